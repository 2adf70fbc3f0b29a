// Command manager is the kvpilot operator: it reconciles InferencePools and
// SchedulerPolicies (serving.kvpilot.dev) into runtime pods, and, as the
// elected leader, runs the fleet loop that places agent programs across
// each pool's pods and reports the pool's KV capacity, Prometheus metrics
// and autoscaling signals.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/controller"
)

// leaderElectionID names the Lease the replicas of the manager elect a
// leader with.
const leaderElectionID = "kvpilot-manager.serving.kvpilot.dev"

type config struct {
	metricsAddr      string
	metricsSecure    bool
	probeAddr        string
	leaderElect      bool
	runtimeImage     string
	watchNamespaces  string
	enableHTTP2      bool
	leaderElectionNS string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.metricsAddr, "metrics-bind-address", ":8443",
		"Address the metrics endpoint binds to; \"0\" turns it off.")
	flag.BoolVar(&cfg.metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, to callers authorized by a TokenReview and SubjectAccessReview.")
	flag.StringVar(&cfg.probeAddr, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz endpoints bind to.")
	flag.BoolVar(&cfg.leaderElect, "leader-elect", false,
		"Elect a leader, so only one replica of the manager reconciles at a time.")
	flag.StringVar(&cfg.leaderElectionNS, "leader-election-namespace", "",
		"Namespace of the leader-election Lease; empty means the manager's own namespace.")
	flag.StringVar(&cfg.runtimeImage, "runtime-image", os.Getenv("KVPILOT_RUNTIME_IMAGE"),
		"Runtime image of InferencePools that set no spec.image (default $KVPILOT_RUNTIME_IMAGE).")
	flag.StringVar(&cfg.watchNamespaces, "watch-namespaces", "",
		"Comma-separated namespaces to reconcile; empty means all namespaces.")
	flag.BoolVar(&cfg.enableHTTP2, "enable-http2", false,
		"Serve the metrics endpoint over HTTP/2 as well (off: HTTP/2 rapid-reset and stream-cancellation CVEs).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := run(cfg); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func run(cfg config) error {
	log := ctrl.Log.WithName("setup")
	if cfg.runtimeImage == "" {
		return errors.New("--runtime-image (or $KVPILOT_RUNTIME_IMAGE) is required: it is the image of pools that set no spec.image")
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(servingv1alpha1.AddToScheme(scheme))

	var tlsOpts []func(*tls.Config)
	if !cfg.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{
		BindAddress:   cfg.metricsAddr,
		SecureServing: cfg.metricsSecure,
		TLSOpts:       tlsOpts,
	}
	if cfg.metricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	cacheOpts := cache.Options{ByObject: controller.CacheByObject()}
	if namespaces := splitNamespaces(cfg.watchNamespaces); len(namespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
		log.Info("watching namespaces", "namespaces", namespaces)
	}

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  cfg.probeAddr,
		LeaderElection:          cfg.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: cfg.leaderElectionNS,
		// The manager exits right after it steps down, so a new leader need
		// not wait out the whole lease.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("new manager: %w", err)
	}

	ctx := ctrl.SetupSignalHandler()
	if err := controller.SetupWithManager(ctx, mgr, controller.Options{DefaultImage: cfg.runtimeImage}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("readyz check: %w", err)
	}

	log.Info("starting manager", "runtimeImage", cfg.runtimeImage, "leaderElection", cfg.leaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

func splitNamespaces(s string) []string {
	var out []string
	for _, ns := range strings.Split(s, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

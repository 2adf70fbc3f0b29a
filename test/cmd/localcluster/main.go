// Command localcluster runs kvpilot on a local cluster of processes for
// `make demo`: etcd, kube-apiserver, kube-controller-manager, the node agent
// (test/nodeagent: pods run as local processes of the runtime binary) and
// kvpilot's manager. It runs in the foreground until SIGINT or SIGTERM,
// then stops everything: the manager, the pods, the control plane.
//
// When everything is up it writes RUN_DIR/ready; RUN_DIR/kubeconfig is the
// admin kubeconfig and RUN_DIR/logs holds every component's log, the pods'
// logs are under RUN_DIR/pods.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kvpilot/kvpilot/test/localcluster"
	"github.com/kvpilot/kvpilot/test/nodeagent"
)

func main() {
	var (
		runDir        = flag.String("run-dir", "", "directory of the cluster's files (required)")
		assetsDir     = flag.String("assets-dir", "", "directory holding etcd and kube-apiserver (hack/setup-envtest.sh)")
		componentsDir = flag.String("components-dir", "", "directory holding kube-controller-manager (hack/setup-kube-components.sh)")
		runtimeBin    = flag.String("runtime-bin", "", "the kvpilot runtime binary the pods run")
		managerBin    = flag.String("manager-bin", "", "the kvpilot manager binary; empty runs no manager")
		gpus          = flag.Int("gpus", 8, "nvidia.com/gpu capacity of the node")
		ipPrefix      = flag.String("ip-prefix", "127.0.0", "pods get the addresses PREFIX.10 to PREFIX.250")
	)
	flag.Parse()
	if *runDir == "" || *assetsDir == "" || *componentsDir == "" || *runtimeBin == "" {
		fmt.Fprintln(os.Stderr, "localcluster: --run-dir, --assets-dir, --components-dir and --runtime-bin are required")
		os.Exit(2)
	}
	if err := run(*runDir, *assetsDir, *componentsDir, *runtimeBin, *managerBin, *gpus, *ipPrefix); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(runDir, assetsDir, componentsDir, runtimeBin, managerBin string, gpus int, ipPrefix string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runDir, err := filepath.Abs(runDir)
	if err != nil {
		return err
	}
	ready := filepath.Join(runDir, "ready")
	_ = os.Remove(ready)
	logf := func(format string, args ...any) { fmt.Printf("localcluster: "+format+"\n", args...) }

	cluster, err := localcluster.Start(ctx, localcluster.Options{
		RunDir: runDir, AssetsDir: assetsDir, ComponentsDir: componentsDir, Log: logf,
	})
	if err != nil {
		return err
	}
	defer cluster.Stop()

	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	agentLog, err := os.OpenFile(filepath.Join(cluster.LogDir, "nodeagent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer agentLog.Close()
	agent, err := nodeagent.New(nodeagent.Options{
		Client:   cs,
		RunDir:   filepath.Join(runDir, "pods"),
		Commands: map[string]string{"kvpilot-runtime": runtimeBin},
		HostFlag: "--host",
		PodIPs:   nodeagent.NewIPPool(ipPrefix, 10, 250),
		GPUs:     gpus,
		Bind:     true,
		Log:      slog.New(slog.NewTextHandler(agentLog, nil)),
	})
	if err != nil {
		return err
	}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan error, 1)
	go func() { agentDone <- agent.Run(agentCtx) }()
	defer func() {
		stopAgent()
		<-agentDone
	}()
	logf("node agent running (pods in %s)", filepath.Join(runDir, "pods"))

	if managerBin != "" {
		// Like the manager's Deployment, restart it when it exits: it does
		// while the CRDs are not installed yet.
		managerDone := make(chan struct{})
		go func() { defer close(managerDone); superviseManager(ctx, cluster, managerBin, logf) }()
		defer func() { <-managerDone }()
	}
	if err := os.WriteFile(ready, []byte(cluster.Kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(ready)
	logf("ready: export KUBECONFIG=%s", cluster.Kubeconfig)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			logf("stopping")
			return nil
		case err := <-agentDone:
			agentDone <- err
			return fmt.Errorf("node agent stopped: %v", err)
		case <-tick.C:
			if err := cluster.Exited(); err != nil {
				return err
			}
		}
	}
}

// superviseManager runs the manager until ctx ends, restarting it 2 s
// after it exits.
func superviseManager(ctx context.Context, cluster *localcluster.Cluster, bin string, logf func(string, ...any)) {
	lastErr := ""
	for ctx.Err() == nil {
		mgr, err := cluster.StartManager(ctx, "manager", bin)
		if err == nil {
			logf("manager running (metrics %s)", mgr.MetricsURL)
			select {
			case <-ctx.Done():
				mgr.Stop(15 * time.Second)
				return
			case <-mgr.Exited():
				err = mgr.Err()
			}
		}
		if msg := fmt.Sprint(err); msg != lastErr {
			lastErr = msg
			logf("manager stopped (%v); restarting it every 2 s (before the CRDs are installed it exits at once)", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

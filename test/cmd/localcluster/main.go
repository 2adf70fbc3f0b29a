// Command localcluster runs a local cluster for `make demo`: etcd,
// kube-apiserver, kube-controller-manager and a node. With --node=real the
// node is real (kube-scheduler, a kubelet, containerd, runc, CNI; pods are
// containers of the images in --images-dir) and kvpilot's manager is left
// to `kubectl apply -k config/default` (hack/demo.sh does it). With
// --node=process (the fallback) the node agent runs pods as local processes
// of the runtime binary and the manager runs as a process. It runs in the
// foreground until SIGINT or SIGTERM, then stops everything and undoes
// what it set up on the machine.
//
// When everything is up it writes RUN_DIR/ready; RUN_DIR/kubeconfig is the
// admin kubeconfig and RUN_DIR/logs holds every component's log, the pods'
// logs are under RUN_DIR/pods (process node) or RUN_DIR/node/pod-logs (real
// node).
//
// --check-node only checks whether this machine can run a real node: it
// prints the missing piece and exits 1, or exits 0.
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
		ipPrefix      = flag.String("ip-prefix", "127.0.0", "pods get the addresses PREFIX.10 to PREFIX.250 (process node)")
		node          = flag.String("node", "process", "real or process")
		imagesDir     = flag.String("images-dir", "", "real node: directory of the image archives (hack/build-node-images.sh: kvpilot.tar, pause.tar)")
		pauseImage    = flag.String("pause-image", "kvpilot.local/pause:dev", "real node: the sandbox image in pause.tar")
		checkNode     = flag.Bool("check-node", false, "only check that this machine can run a real node")
	)
	flag.Parse()
	if *checkNode {
		if err := localcluster.CheckNode(""); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var nodeOpts *localcluster.NodeOptions
	switch *node {
	case "real":
		if *imagesDir == "" {
			fmt.Fprintln(os.Stderr, "localcluster: --node=real needs --images-dir")
			os.Exit(2)
		}
		nodeOpts = &localcluster.NodeOptions{
			ImageArchives: []string{filepath.Join(*imagesDir, "pause.tar"), filepath.Join(*imagesDir, "kvpilot.tar")},
			SandboxImage:  *pauseImage,
			GPUs:          *gpus,
		}
	case "process":
		if *runtimeBin == "" {
			fmt.Fprintln(os.Stderr, "localcluster: --node=process needs --runtime-bin")
			os.Exit(2)
		}
	default:
		fmt.Fprintf(os.Stderr, "localcluster: --node=%s: want real or process\n", *node)
		os.Exit(2)
	}
	if *runDir == "" || *assetsDir == "" || *componentsDir == "" {
		fmt.Fprintln(os.Stderr, "localcluster: --run-dir, --assets-dir and --components-dir are required")
		os.Exit(2)
	}
	if err := run(*runDir, *assetsDir, *componentsDir, *runtimeBin, *managerBin, *gpus, *ipPrefix, nodeOpts); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(runDir, assetsDir, componentsDir, runtimeBin, managerBin string, gpus int, ipPrefix string, node *localcluster.NodeOptions) error {
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
		RunDir: runDir, AssetsDir: assetsDir, ComponentsDir: componentsDir, Log: logf, Node: node,
	})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	if cluster.RealNode {
		return serve(ctx, cluster, ready, nil, logf)
	}

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
	return serve(ctx, cluster, ready, agentDone, logf)
}

// serve writes the ready file and waits until ctx ends or a component (or
// the node agent, when agentDone is not nil) stops.
func serve(ctx context.Context, cluster *localcluster.Cluster, ready string, agentDone chan error, logf func(string, ...any)) error {
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

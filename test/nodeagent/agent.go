// Package nodeagent is a stand-in for a kubelet and a scheduler on a local
// test cluster with no container runtime: it registers one Node, binds
// pending pods to it, and runs each pod's containers as local processes.
//
// Every pod gets its own loopback address (127.0.0.x) as its pod IP, so
// every pod can listen on the same ports as it would in a cluster. Since the
// processes share the host's network, the agent tells each container where
// to listen (Options.HostFlag). Volumes the pods mount (Secrets,
// ConfigMaps, emptyDirs, host paths) are made into a directory per pod, and
// the mount paths in a container's arguments and environment are rewritten
// to them.
//
// It is for tests and demos only: no isolation, no resource limits, no
// images (Options.Commands maps container commands to local binaries).
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Options configure an Agent.
type Options struct {
	// Client talks to the API server with rights to manage nodes, pods,
	// pod bindings and status, and to read Secrets and ConfigMaps.
	Client kubernetes.Interface
	// NodeName names the Node the agent registers; default "kvpilot-local".
	NodeName string
	// RunDir holds a directory per pod: its volumes and container logs.
	RunDir string
	// Commands maps a container's command (its first element, or the base
	// name of it) to the local binary that runs it.
	Commands map[string]string
	// HostFlag, when set, is appended to every container's arguments as
	// HostFlag=<pod IP>: the processes share the host's network, so each
	// must be told to listen on its pod's own address.
	HostFlag string
	// PodIPs hands out pod IPs; default NewIPPool("127.0.0", 10, 250).
	PodIPs *IPPool
	// GPUs is the node's nvidia.com/gpu capacity; GPUProduct its
	// nvidia.com/gpu.product label.
	GPUs       int
	GPUProduct string
	// Bind makes the agent bind pending pods to its node, standing in for
	// kube-scheduler; leave it false where a scheduler runs.
	Bind bool
	// Log receives the agent's logs; nil means slog.Default().
	Log *slog.Logger
}

// Agent runs one node. Create it with New, then Run it.
type Agent struct {
	opts   Options
	client kubernetes.Interface
	log    *slog.Logger
	node   string

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	wg      sync.WaitGroup

	pods cache.Indexer
}

// New checks the options and returns an Agent.
func New(o Options) (*Agent, error) {
	if o.Client == nil {
		return nil, errors.New("nodeagent: Client is required")
	}
	if o.RunDir == "" {
		return nil, errors.New("nodeagent: RunDir is required")
	}
	if o.NodeName == "" {
		o.NodeName = "kvpilot-local"
	}
	if o.PodIPs == nil {
		o.PodIPs = NewIPPool("127.0.0", 10, 250)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.GPUProduct == "" {
		o.GPUProduct = "NVIDIA-H100-80GB-HBM3"
	}
	commands := make(map[string]string, len(o.Commands))
	for cmd, bin := range o.Commands {
		abs, err := filepath.Abs(bin) // containers run in their pod's directory
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("nodeagent: binary of %q: %w", cmd, err)
		}
		commands[cmd] = abs
	}
	o.Commands = commands
	return &Agent{
		opts:    o,
		client:  o.Client,
		log:     o.Log.With("node", o.NodeName),
		node:    o.NodeName,
		workers: map[types.UID]*podWorker{},
	}, nil
}

// Run registers the node and runs its pods until ctx ends; then it stops
// every container (SIGTERM, then SIGKILL after the pod's grace period or
// 10 s, whichever is shorter) and returns.
func (a *Agent) Run(ctx context.Context) error {
	if err := os.MkdirAll(a.opts.RunDir, 0o755); err != nil {
		return err
	}
	if err := a.registerNode(ctx); err != nil {
		return fmt.Errorf("register node %s: %w", a.node, err)
	}
	factory := informers.NewSharedInformerFactory(a.client, 0)
	inf := factory.Core().V1().Pods().Informer()
	a.pods = inf.GetIndexer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.podChanged(obj) },
		UpdateFunc: func(_, obj any) { a.podChanged(obj) },
		DeleteFunc: func(obj any) { a.podDeleted(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	a.log.Info("node agent running", "gpus", a.opts.GPUs, "bind", a.opts.Bind)

	var loops sync.WaitGroup
	loops.Add(1)
	go func() { defer loops.Done(); a.heartbeat(ctx) }()
	if a.opts.Bind {
		loops.Add(1)
		go func() { defer loops.Done(); a.bindLoop(ctx) }()
	}
	<-ctx.Done()
	factory.Shutdown()
	loops.Wait()

	a.mu.Lock()
	for _, w := range a.workers {
		w.shutdown()
	}
	a.mu.Unlock()
	a.wg.Wait()
	return nil
}

// podChanged hands a pod of this node to its worker, starting one for a
// pod it has not seen.
func (a *Agent) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != a.node {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.workers[pod.UID]; ok {
		w.update(pod)
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return // finished before this agent started: nothing to run
	}
	w := newPodWorker(a, pod)
	a.workers[pod.UID] = w
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		w.run()
		a.mu.Lock()
		delete(a.workers, pod.UID)
		a.mu.Unlock()
	}()
}

// podDeleted stops a pod removed from the API server, whether after its
// graceful termination or by force.
func (a *Agent) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.workers[pod.UID]; ok {
		w.removed()
	}
}

// podDir is where a pod's volumes and logs live.
func (a *Agent) podDir(pod *corev1.Pod) string {
	return filepath.Join(a.opts.RunDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)[:8])
}

// binary resolves a container's command to a local binary.
func (a *Agent) binary(c *corev1.Container) (string, []string, error) {
	if len(c.Command) == 0 {
		return "", nil, fmt.Errorf("container %q has no command: the local node runs commands, not images", c.Name)
	}
	for _, key := range []string{c.Command[0], filepath.Base(c.Command[0])} {
		if bin, ok := a.opts.Commands[key]; ok {
			return bin, c.Command[1:], nil
		}
	}
	return "", nil, fmt.Errorf("no local binary for command %q (image %s)", c.Command[0], c.Image)
}

// goarch is the node's architecture label.
var goarch = goruntime.GOARCH

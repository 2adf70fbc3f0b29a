// Package localcluster runs a small Kubernetes control plane as local
// processes for kvpilot's end-to-end tests and demo: etcd, kube-apiserver
// (client-certificate authentication, RBAC, service-account tokens) and
// kube-controller-manager (Deployments → ReplicaSets → Pods, garbage
// collection, disruption budgets). The binaries are built from source by
// hack/setup-envtest.sh and hack/setup-kube-components.sh.
//
// Pods run on one of two kinds of node. With Options.Node set, a real node
// (node.go): kube-scheduler, a kubelet, containerd with runc, CNI's bridge
// and host-local plugins on a bridge of its own, and a device plugin
// advertising nvidia.com/gpu; it needs root and those packages (CheckNode
// says which piece is missing). Without it there is no kubelet:
// test/nodeagent registers a node and runs its pods as processes.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options say where the binaries are and where the cluster keeps its
// files.
type Options struct {
	// RunDir holds the cluster's certificates, etcd data, kubeconfig and
	// logs. It is created if missing.
	RunDir string
	// AssetsDir holds etcd and kube-apiserver (hack/setup-envtest.sh).
	AssetsDir string
	// ComponentsDir holds kube-controller-manager
	// (hack/setup-kube-components.sh).
	ComponentsDir string
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
	// Node, when set, starts a real node (and kube-scheduler) with the
	// control plane; ComponentsDir must then hold the kubelet and
	// kube-scheduler too. The API server then listens on the node's bridge
	// address, which pods reach, instead of loopback.
	Node *NodeOptions
}

// Cluster is a running control plane.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig (group system:masters).
	Kubeconfig string
	// Config is the admin client configuration.
	Config *rest.Config
	// LogDir holds every component's log.
	LogDir string
	// RealNode reports a real node (Options.Node): pods are containers of
	// the node's containerd with addresses in PodCIDR.
	RealNode bool

	procs    []*Process // for Exited
	cleanups []func()   // run in reverse by Stop: processes, then what they needed
	logf     func(format string, args ...any)
}

// ServiceCIDR is the range Service cluster IPs come from on a cluster of
// processes (a real node uses NodeServiceCIDR). Nothing routes it: clients
// use pod IPs.
const ServiceCIDR = "10.0.0.0/24"

// Start brings the control plane up and returns once the API server is
// ready and the controller manager has started its controllers. On error
// everything started so far is stopped.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	for _, bin := range []string{filepath.Join(o.AssetsDir, "etcd"), filepath.Join(o.AssetsDir, "kube-apiserver"), filepath.Join(o.ComponentsDir, "kube-controller-manager")} {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("control-plane binary: %w (build it with hack/setup-envtest.sh and hack/setup-kube-components.sh)", err)
		}
	}
	if o.Node != nil {
		if err := CheckNode(o.ComponentsDir); err != nil {
			return nil, err
		}
	}
	runDir, err := filepath.Abs(o.RunDir)
	if err != nil {
		return nil, err
	}
	c = &Cluster{LogDir: filepath.Join(runDir, "logs"), Kubeconfig: filepath.Join(runDir, "kubeconfig"), logf: logf, RealNode: o.Node != nil}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	bindAddress, serviceCIDR := "127.0.0.1", ServiceCIDR
	var extraIPs []net.IP
	if o.Node != nil {
		release, leftDir, err := lockNode(o.Node.LockWait, filepath.Join(runDir, "node"), logf)
		if err != nil {
			return nil, err
		}
		c.defer_(release)
		if leftDir != "" {
			logf("removing what a killed run's node left (%s)", leftDir)
		}
		removeLeftovers(leftDir)
		logf("setting up the node's network (bridge %s, %s)", nodeBridge, NodeIP)
		if err := c.setUpNodeNetwork(); err != nil {
			return nil, fmt.Errorf("node network: %w", err)
		}
		bindAddress, serviceCIDR, extraIPs = NodeIP, NodeServiceCIDR, nodeAddressIPs()
	}
	certs, err := newPKI(filepath.Join(runDir, "pki"), extraIPs)
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	kcmPort := ports[3]

	// 1. etcd, on loopback; a test cluster does not need fsync.
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	etcdData := filepath.Join(runDir, "etcd")
	if err := os.RemoveAll(etcdData); err != nil {
		return nil, err
	}
	logf("starting etcd on %s", etcdURL)
	if err := c.start("etcd", filepath.Join(o.AssetsDir, "etcd"), []string{
		"--name=local", "--data-dir=" + etcdData,
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=local=" + peerURL, "--unsafe-no-fsync=true",
		"--listen-metrics-urls=", "--log-level=warn",
	}); err != nil {
		return nil, err
	}

	// 2. kube-apiserver: client certificates for people and controllers,
	// RBAC, and a service-account signing key the controller manager's
	// controllers and the tokens API use.
	server := "https://" + net.JoinHostPort(bindAddress, strconv.Itoa(apiPort))
	logf("starting kube-apiserver on %s", server)
	if err := c.start("kube-apiserver", filepath.Join(o.AssetsDir, "kube-apiserver"), []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + bindAddress, "--advertise-address=" + bindAddress, "--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + certs.path(serverCertFile), "--tls-private-key-file=" + certs.path(serverKeyFile),
		"--client-ca-file=" + certs.path(caCertFile),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + certs.path(saPubFile),
		"--service-account-signing-key-file=" + certs.path(saKeyFile),
		"--service-cluster-ip-range=" + serviceCIDR,
		// Node: a kubelet's own credentials reach only its node's objects.
		"--authorization-mode=Node,RBAC",
		"--kubelet-client-certificate=" + certs.path(adminCertFile), "--kubelet-client-key=" + certs.path(adminKeyFile),
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(runDir, "apiserver-certs"),
		// The aggregation layer, for metrics adapters: the API server
		// proxies to an APIService's endpoints (nothing routes Service
		// IPs) with the front-proxy certificate and the user in headers.
		"--requestheader-client-ca-file=" + certs.path(caCertFile),
		"--requestheader-allowed-names=" + proxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + certs.path(proxyCertFile), "--proxy-client-key-file=" + certs.path(proxyKeyFile),
		"--enable-aggregator-routing=true",
	}); err != nil {
		return nil, err
	}
	if err := writeKubeconfig(c.Kubeconfig, server, certs); err != nil {
		return nil, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	if err := c.waitFor(ctx, "kube-apiserver ready", 90*time.Second, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	}); err != nil {
		return nil, err
	}

	// 3. kube-controller-manager, as admin: it needs no per-controller
	// identities here. The default controllers suit: the cloud ones need a
	// cloud provider and node IPAM needs --allocate-node-cidrs, neither of
	// which is set (the node agent hands out pod IPs).
	logf("starting kube-controller-manager")
	if err := c.start("kube-controller-manager", filepath.Join(o.ComponentsDir, "kube-controller-manager"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(kcmPort),
		"--cert-dir=" + filepath.Join(runDir, "kcm-certs"),
		"--leader-elect=false",
		"--controllers=*",
		"--service-account-private-key-file=" + certs.path(saKeyFile),
		"--root-ca-file=" + certs.path(caCertFile),
		"--service-cluster-ip-range=" + serviceCIDR,
		// HorizontalPodAutoscalers act within seconds, not 15.
		"--horizontal-pod-autoscaler-sync-period=1s",
	}); err != nil {
		return nil, err
	}
	// The service-account controller making "default" in a namespace shows
	// the controllers run; pods cannot be created before it.
	if err := c.waitFor(ctx, "kube-controller-manager controllers", 90*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	logf("control plane ready; KUBECONFIG=%s", c.Kubeconfig)
	if o.Node != nil {
		if err := c.routeKubernetesService(apiPort); err != nil {
			return nil, fmt.Errorf("route the kubernetes Service: %w", err)
		}
		if err := c.startNode(ctx, runDir, o.ComponentsDir, certs, server, o.Node); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) start(name, bin string, args []string) error {
	_, err := c.startIn(name, bin, args, nil)
	return err
}

// startIn starts a component whose Stop runs with the cleanups.
func (c *Cluster) startIn(name, bin string, args, env []string) (*Process, error) {
	p, err := StartProcess(name, c.LogDir, bin, args, env)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	c.defer_(func() { p.Stop(10 * time.Second) })
	return p, nil
}

// defer_ adds f to what Stop undoes, in reverse order of adding.
func (c *Cluster) defer_(f func()) { c.cleanups = append(c.cleanups, f) }

// waitFor polls cond until it is true, a process of the cluster exits, or
// timeout passes.
func (c *Cluster) waitFor(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		for _, p := range c.procs {
			select {
			case <-p.Exited():
				return fmt.Errorf("%s: %s exited (%v); see %s", what, p.Name, p.Err(), p.LogPath)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: timed out; logs in %s", what, c.LogDir)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Exited reports a component that stopped on its own, or nil.
func (c *Cluster) Exited() error {
	for _, p := range c.procs {
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited (%v); see %s", p.Name, p.Err(), p.LogPath)
		default:
		}
	}
	return nil
}

// Stop stops the components in reverse start order and undoes what was
// set up for them (a real node's containers, mounts, cgroups, network).
func (c *Cluster) Stop() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
	c.cleanups, c.procs = nil, nil
}

// Client returns a typed client of the cluster.
func (c *Cluster) Client() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.Config)
}

// CreateNamespace creates a namespace and waits for its default service
// account, without which the API server refuses pods in it.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return c.waitFor(ctx, "service account default/"+name, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

func writeKubeconfig(path, server string, certs *pki) error {
	ca, err := os.ReadFile(certs.path(caCertFile))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kvpilot-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificate: certs.path(adminCertFile),
		ClientKey:         certs.path(adminKeyFile),
	}
	cfg.Contexts["kvpilot-local"] = &clientcmdapi.Context{Cluster: "kvpilot-local", AuthInfo: "admin", Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = "kvpilot-local"
	return clientcmd.WriteToFile(*cfg, path)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(errors.New("find a free port"), err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

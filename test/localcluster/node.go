package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// NodeOptions ask for a real node: a kubelet with containerd and runc, CNI's
// bridge and host-local plugins, kube-scheduler, and a device plugin that
// advertises nvidia.com/gpu.
type NodeOptions struct {
	// ImageArchives are image tarballs (docker-archive or OCI archive, as
	// `podman save` writes them) loaded into containerd before the kubelet
	// starts. Pods use these images; nothing is pulled.
	ImageArchives []string
	// SandboxImage names the pod sandbox ("pause") image, which must be in
	// one of the archives.
	SandboxImage string
	// GPUs is the number of nvidia.com/gpu devices the device plugin
	// advertises (0: no device plugin).
	GPUs int
	// LockWait bounds the wait for another run's node on this machine to
	// finish (one node at a time, see nodeLockPath); 0 means 20 minutes.
	LockWait time.Duration
}

// The real node's fixed names and addresses. A machine runs one such node
// at a time: the kubelet's device-plugin socket has a fixed path
// (/var/lib/kubelet/device-plugins/kubelet.sock), whatever its root
// directory, so two kubelets would remove each other's plugins.
const (
	NodeName = "kvpilot-node"
	// nodeBridge is the Linux bridge of the pod network; NodeIP, its
	// address, is the node's InternalIP and where the API server listens.
	nodeBridge = "kvpilot0"
	NodeIP     = "10.250.0.1"
	// PodCIDR is the pods' range (CNI host-local), NodeServiceCIDR the
	// Services' range. Pods route only these two ranges: no route leaves
	// the machine.
	PodCIDR         = "10.250.0.0/24"
	NodeServiceCIDR = "10.251.0.0/24"
	// kubernetesServiceIP is the kubernetes Service's cluster IP, the first
	// address of NodeServiceCIDR.
	kubernetesServiceIP = "10.251.0.1"
	// guardPods and guardServices are blackholed while the node runs: traffic to a pod or
	// service address that the bridge does not hold (a pod already gone, a
	// Service IP nothing routes) is dropped on the machine instead of
	// following the default route out.
	guardPods     = "10.250.0.0/16"
	guardServices = "10.251.0.0/16"
	nodeLockPath  = "/run/kvpilot-node.lock"
	// cgroupName is the cgroup under every hierarchy's root that holds the
	// node's pods (the kubelet's cgroupRoot) and containerd with its shims.
	cgroupName = "kvpilot-node"
	// devicePluginDir is fixed by the kubelet (see above).
	devicePluginDir = "/var/lib/kubelet/device-plugins"
	shimSocketDir   = "/run/containerd/s"
	netnsDir        = "/var/run/netns"
	// netnsBeforeFile, in the node directory, lists the network
	// namespaces that were there before the node started.
	netnsBeforeFile = "netns-before"
	// madeDirFile, in the node directory, names the kubelet directory the
	// run made (/var/lib/kubelet or its device-plugins), if any.
	madeDirFile = "made-dir"
	// cniBinDir is where Debian's containernetworking-plugins installs.
	cniBinDir = "/usr/lib/cni"
	// iptablesComment tags every rule the node adds, so teardown removes
	// exactly those.
	iptablesComment = "kvpilot-e2e-node"
)

// NodeUnavailableError says which piece of a real node this machine lacks.
type NodeUnavailableError struct{ Piece, Why string }

func (e *NodeUnavailableError) Error() string {
	return fmt.Sprintf("real node unavailable: %s: %s", e.Piece, e.Why)
}

// CheckNode reports the first piece of a real node this machine lacks, as a
// *NodeUnavailableError, or nil. componentsDir holds the kubelet and
// kube-scheduler (hack/setup-kube-components.sh); empty skips them (they
// are built after this check).
func CheckNode(componentsDir string) error {
	missing := func(piece, why string) error { return &NodeUnavailableError{Piece: piece, Why: why} }
	if os.Geteuid() != 0 {
		return missing("root", "the kubelet, containerd and the pod network need root (network namespaces, bridges, mounts, cgroups)")
	}
	for _, c := range []string{"kubelet", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(componentsDir, c)); componentsDir != "" && err != nil {
			return missing(c, fmt.Sprintf("not built (hack/setup-kube-components.sh kube-scheduler kubelet): %v", err))
		}
	}
	for _, b := range []struct{ bin, pkg string }{
		{"containerd", "containerd"}, {"containerd-shim-runc-v2", "containerd"}, {"ctr", "containerd"},
		{"runc", "runc"}, {"ip", "iproute2"}, {"iptables", "iptables"}, {"mount", "mount"},
	} {
		if _, err := exec.LookPath(b.bin); err != nil {
			return missing(b.bin, fmt.Sprintf("not installed (apt-get install %s)", b.pkg))
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			return missing("CNI plugin "+p, fmt.Sprintf("not in %s (apt-get install containernetworking-plugins)", cniBinDir))
		}
	}
	fs, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(fs), "\toverlay\n") {
		return missing("overlayfs", "the kernel lists no overlay file system (containerd's overlayfs snapshotter needs it)")
	}
	if hs, err := cgroupHierarchies(); err != nil || len(hs) == 0 {
		return missing("cgroups", fmt.Sprintf("no cgroup file system is mounted (%v)", err))
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return missing("network namespaces", err.Error())
	}
	return nil
}

// lockNode takes the machine's one node (see nodeLockPath), waiting for
// another run's to end. The lock file names the node directory of the run
// that holds it, and is emptied when that run is torn down: a name found
// there means that run was killed before its teardown, and leftDir is its
// node directory, whose leftovers the new run removes.
func lockNode(wait time.Duration, nodeDir string, logf func(string, ...any)) (release func(), leftDir string, err error) {
	if wait == 0 {
		wait = 20 * time.Minute
	}
	f, err := os.OpenFile(nodeLockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(wait)
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, "", fmt.Errorf("lock %s: %w", nodeLockPath, err)
		}
		if !logged {
			logf("another run's real node holds %s; waiting up to %v", nodeLockPath, wait)
			logged = true
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, "", fmt.Errorf("another run's real node held %s for %v", nodeLockPath, wait)
		}
		time.Sleep(2 * time.Second)
	}
	b, _ := io.ReadAll(f)
	if err := writeLockFile(f, nodeDir); err != nil {
		f.Close()
		return nil, "", err
	}
	return func() {
		_ = writeLockFile(f, "")
		f.Close()
	}, strings.TrimSpace(string(b)), nil
}

func writeLockFile(f *os.File, content string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(content), 0)
	return err
}

// removeLeftovers undoes what a killed run's node left on the machine:
// processes in the node's cgroups, mounts under its node directory, its
// bridge, guard routes and firewall rules.
func removeLeftovers(leftDir string) {
	if cg, err := newNodeCgroup(); err == nil {
		cg.killAndRemove()
	}
	if leftDir != "" {
		unmountUnder(leftDir)
		removeMadeDir(leftDir)
		if b, err := os.ReadFile(filepath.Join(leftDir, netnsBeforeFile)); err == nil {
			before := map[string]bool{}
			for _, n := range strings.Fields(string(b)) {
				before[n] = true
			}
			deleteNewNetns(before)
		}
	}
	_ = run("ip", "link", "del", nodeBridge)
	for _, r := range []string{guardPods, guardServices} {
		_ = run("ip", "route", "del", "blackhole", r)
	}
	deleteTaggedRules()
}

// run runs a command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setUpNodeNetwork makes the pod network's bridge with the node's address,
// the guard routes and the firewall rules that keep pod traffic on the
// machine. Every step pushes its undo onto c's cleanups.
func (c *Cluster) setUpNodeNetwork() error {
	if err := run("ip", "link", "add", nodeBridge, "type", "bridge"); err != nil {
		return err
	}
	c.defer_(func() { _ = run("ip", "link", "del", nodeBridge) })
	if err := run("ip", "addr", "add", NodeIP+"/24", "dev", nodeBridge); err != nil {
		return err
	}
	if err := run("ip", "link", "set", nodeBridge, "up"); err != nil {
		return err
	}
	for _, r := range []string{guardPods, guardServices} {
		if err := run("ip", "route", "add", "blackhole", r); err != nil {
			return err
		}
		c.defer_(func() { _ = run("ip", "route", "del", "blackhole", r) })
	}
	// Nothing from the pod range is forwarded anywhere but the pod range
	// (pods on the bridge reach each other and the node's own addresses;
	// only forwarding off the bridge is refused).
	c.defer_(deleteTaggedRules)
	for _, rule := range [][]string{
		{"-t", "filter", "-I", "FORWARD", "-s", PodCIDR, "!", "-d", PodCIDR, "-j", "DROP"},
		{"-t", "filter", "-I", "FORWARD", "-d", PodCIDR, "!", "-s", PodCIDR, "-j", "DROP"},
	} {
		if err := run("iptables", append(rule, "-m", "comment", "--comment", iptablesComment)...); err != nil {
			return err
		}
	}
	return nil
}

// removeMadeDir removes the kubelet's directory that the run of nodeDir
// made (madeDirFile), if any.
func removeMadeDir(nodeDir string) {
	b, err := os.ReadFile(filepath.Join(nodeDir, madeDirFile))
	if made := string(b); err == nil && (made == devicePluginDir || made == filepath.Dir(devicePluginDir)) {
		_ = os.RemoveAll(made)
	}
}

// deleteNewNetns deletes the CNI network namespaces not in before that no
// process uses any longer (the node's processes are gone by then; a
// namespace in use belongs to someone else).
func deleteNewNetns(before map[string]bool) {
	for n := range listDir(netnsDir) {
		if before[n] || !strings.HasPrefix(n, "cni-") {
			continue
		}
		if out, err := exec.Command("ip", "netns", "pids", n).Output(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			continue
		}
		_ = run("ip", "netns", "del", n)
	}
}

// routeKubernetesService does kube-proxy's one job that the suite needs:
// the kubernetes Service's cluster IP (what in-cluster clients dial, from
// KUBERNETES_SERVICE_HOST) reaches the API server. No kube-proxy runs, so
// no other Service's cluster IP routes (the guard route drops it).
func (c *Cluster) routeKubernetesService(apiPort int) error {
	return run("iptables", "-t", "nat", "-I", "PREROUTING", "-d", kubernetesServiceIP, "-p", "tcp", "--dport", "443",
		"-j", "DNAT", "--to-destination", NodeIP+":"+strconv.Itoa(apiPort), "-m", "comment", "--comment", iptablesComment)
}

// deleteTaggedRules removes every iptables rule tagged iptablesComment.
func deleteTaggedRules() {
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.Command("iptables", "-t", table, "-S").Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "-A ") || !strings.Contains(line, iptablesComment) {
				continue
			}
			// -S prints rules as arguments to -A; the same words after -D
			// delete it. The comment is quoted by -S.
			args := strings.Fields(strings.Replace(line, `"`+iptablesComment+`"`, iptablesComment, 1))
			args[0] = "-D"
			_ = run("iptables", append([]string{"-t", table}, args...)...)
		}
	}
}

// startNode starts containerd, loads the images, writes the CNI network,
// starts the kubelet, the device plugin and kube-scheduler, and waits until
// the node is Ready with its GPUs allocatable.
func (c *Cluster) startNode(ctx context.Context, runDir, componentsDir string, certs *pki, server string, o *NodeOptions) error {
	logf := c.logf
	nodeDir := filepath.Join(runDir, "node")
	ctrdDir := filepath.Join(nodeDir, "containerd")
	cniConfDir := filepath.Join(nodeDir, "cni", "net.d")
	sock := filepath.Join(ctrdDir, "containerd.sock")
	for _, d := range []string{ctrdDir, cniConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// Teardown order (cleanups run in reverse): every mount under the node's
	// directory and the pods' network namespaces go last, after the
	// processes that made them.
	// containerd 1.6 makes the pods' network namespaces in /var/run/netns,
	// whatever its state directory: the ones that were not there before
	// are the node's. The list is kept for removeLeftovers.
	netnsBefore := listDir(netnsDir)
	if err := os.WriteFile(filepath.Join(nodeDir, netnsBeforeFile), []byte(strings.Join(slices.Sorted(maps.Keys(netnsBefore)), "\n")), 0o644); err != nil {
		return err
	}
	// containerd 1.6 puts its shims' sockets in /run/containerd/s whatever
	// its state directory; killed shims leave them behind.
	shimSocketsBefore, runContainerdExisted := listDir(shimSocketDir), exists(filepath.Dir(shimSocketDir))
	c.defer_(func() {
		unmountUnder(nodeDir)
		deleteNewNetns(netnsBefore)
		if !runContainerdExisted {
			_ = os.RemoveAll(filepath.Dir(shimSocketDir))
			return
		}
		for n := range listDir(shimSocketDir) {
			if !shimSocketsBefore[n] {
				_ = os.Remove(filepath.Join(shimSocketDir, n))
			}
		}
	})
	// The kubelet makes devicePluginDir; what the run made goes with it,
	// and a marker in the node directory lets removeLeftovers do the same
	// for a killed run.
	made := ""
	switch {
	case !exists(filepath.Dir(devicePluginDir)):
		made = filepath.Dir(devicePluginDir)
	case !exists(devicePluginDir):
		made = devicePluginDir
	}
	if err := os.WriteFile(filepath.Join(nodeDir, madeDirFile), []byte(made), 0o644); err != nil {
		return err
	}
	c.defer_(func() { removeMadeDir(nodeDir) })
	cg, err := newNodeCgroup()
	if err != nil {
		return err
	}
	// After the processes stop: kill what is left in the node's cgroups
	// (containers, containerd's shims), then remove them.
	c.defer_(cg.killAndRemove)

	// 1. containerd, its CRI plugin using runc and CNI.
	cfg := fmt.Sprintf(containerdConfig, filepath.Join(ctrdDir, "root"), filepath.Join(ctrdDir, "state"), sock, sock+".ttrpc",
		o.SandboxImage, filepath.Join(ctrdDir, "runc"), cniBinDir, cniConfDir)
	cfgPath := filepath.Join(ctrdDir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	logf("starting containerd (runc, CNI bridge in %s)", cniConfDir)
	p, err := c.startIn("containerd", "containerd", []string{"--config", cfgPath}, nil)
	if err != nil {
		return err
	}
	// containerd and the shims it starts live in the node's cgroup.
	if err := cg.add("runtime", p.Pid()); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd socket", 60*time.Second, func(context.Context) (bool, error) {
		return exec.Command("ctr", "--address", sock, "version").Run() == nil, nil
	}); err != nil {
		return err
	}
	for _, a := range o.ImageArchives {
		logf("loading %s into containerd", filepath.Base(a))
		if err := run("ctr", "--address", sock, "--namespace", "k8s.io", "images", "import", a); err != nil {
			return fmt.Errorf("load image: %w", err)
		}
	}

	// 2. The pod network: CNI's bridge on the node's bridge (it exists, with
	// the node's address: the plugin adds veths to it and sets nothing on
	// the host) and host-local addresses from PodCIDR. Pods route PodCIDR
	// (on the link) and the Service range (through the node) only.
	conflist := map[string]any{
		"cniVersion": "0.4.0", "name": "kvpilot",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": nodeBridge, "isGateway": false, "ipMasq": false, "hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": NodeIP}}},
				"routes":  []map[string]string{{"dst": NodeServiceCIDR}},
				"dataDir": filepath.Join(nodeDir, "cni", "ipam"),
			},
		}},
	}
	b, _ := json.MarshalIndent(conflist, "", "  ")
	if err := os.WriteFile(filepath.Join(cniConfDir, "10-kvpilot.conflist"), b, 0o644); err != nil {
		return err
	}

	// 3. The kubelet, as system:node:NodeName.
	kubeletDir := filepath.Join(nodeDir, "kubelet")
	if err := os.MkdirAll(kubeletDir, 0o755); err != nil {
		return err
	}
	if err := certs.issueNode(NodeName); err != nil {
		return err
	}
	kubeletKubeconfig := filepath.Join(nodeDir, "kubelet.kubeconfig")
	if err := writeKubeconfigFor(kubeletKubeconfig, server, certs, nodeCertFile, nodeKeyFile, "system:node:"+NodeName); err != nil {
		return err
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	kcfg := fmt.Sprintf(kubeletConfig, NodeIP, ports[0], ports[1], certs.path(caCertFile), "/"+cgroupName,
		"unix://"+sock, filepath.Join(nodeDir, "pod-logs"), filepath.Join(kubeletDir, "volume-plugins"))
	kcfgPath := filepath.Join(nodeDir, "kubelet-config.yaml")
	if err := os.WriteFile(kcfgPath, []byte(kcfg), 0o644); err != nil {
		return err
	}
	logf("starting the kubelet (node %s, %s)", NodeName, NodeIP)
	if _, err := c.startIn("kubelet", filepath.Join(componentsDir, "kubelet"), []string{
		"--config=" + kcfgPath, "--kubeconfig=" + kubeletKubeconfig,
		"--root-dir=" + kubeletDir, "--cert-dir=" + filepath.Join(kubeletDir, "pki"),
		"--hostname-override=" + NodeName, "--node-ip=" + NodeIP, "--v=2",
	}, nil); err != nil {
		return err
	}

	// 4. kube-scheduler.
	logf("starting kube-scheduler")
	if _, err := c.startIn("kube-scheduler", filepath.Join(componentsDir, "kube-scheduler"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--leader-elect=false",
	}, nil); err != nil {
		return err
	}

	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "node "+NodeName+" Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		return err == nil && nodeReady(n), nil
	}); err != nil {
		return err
	}

	// 5. The device plugin, once the kubelet serves its registration socket.
	if o.GPUs > 0 {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		plugin, err := startGPUPlugin(rctx, devicePluginDir, o.GPUs)
		cancel()
		if err != nil {
			return err
		}
		c.defer_(plugin.stop)
		want := strconv.Itoa(o.GPUs)
		if err := c.waitFor(ctx, "node allocatable "+GPUResource+"="+want, time.Minute, func(ctx context.Context) (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			q, ok := n.Status.Allocatable[GPUResource]
			return ok && q.String() == want, nil
		}); err != nil {
			return err
		}
	}
	logf("node %s ready (kubelet, containerd, runc, CNI bridge %s on %s)", NodeName, nodeBridge, PodCIDR)
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// writeKubeconfigFor writes a kubeconfig authenticating with a client
// certificate of certs.
func writeKubeconfigFor(path, server string, certs *pki, certFile, keyFile, user string) error {
	ca, err := os.ReadFile(certs.path(caCertFile))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kvpilot-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: certs.path(certFile), ClientKey: certs.path(keyFile)}
	cfg.Contexts["kvpilot-local"] = &clientcmdapi.Context{Cluster: "kvpilot-local", AuthInfo: user, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = "kvpilot-local"
	return clientcmd.WriteToFile(*cfg, path)
}

func listDir(dir string) map[string]bool {
	out := map[string]bool{}
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		out[e.Name()] = true
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// unmountUnder detaches every mount point at or under dir, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	points := mountPointsUnder(string(b), dir)
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// mountPointsUnder lists the mount points at or under dir in a mountinfo
// text, in its order (parents before the mounts on top of them).
func mountPointsUnder(mountinfo, dir string) []string {
	var points []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		// Mount points escape spaces and the like as octal.
		p := unescapeMountPoint(f[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	return points
}

func unescapeMountPoint(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// nodeCgroup is the cgroup cgroupName in every mounted hierarchy.
type nodeCgroup struct{ roots []string }

// cgroupHierarchies lists the mount points of the cgroup file systems.
func cgroupHierarchies() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return cgroupMounts(string(b)), nil
}

// cgroupMounts lists the mount points of cgroup and cgroup2 file systems in
// a mountinfo text.
func cgroupMounts(mountinfo string) []string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		// mountinfo: ID parent major:minor root mountpoint options
		// [optional fields] - fstype source superoptions
		_, after, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f := strings.Fields(line)
		if fs := strings.Fields(after); len(fs) > 0 && (fs[0] == "cgroup" || fs[0] == "cgroup2") && len(f) > 4 {
			out = append(out, unescapeMountPoint(f[4]))
		}
	}
	return out
}

func newNodeCgroup() (*nodeCgroup, error) {
	hs, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	cg := &nodeCgroup{}
	for _, h := range hs {
		cg.roots = append(cg.roots, filepath.Join(h, cgroupName))
	}
	return cg, nil
}

// add puts pid into the child cgroup name of the node's cgroup in every
// hierarchy.
func (cg *nodeCgroup) add(name string, pid int) error {
	for _, root := range cg.roots {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// A v1 cpuset cgroup starts with no CPUs and no memory nodes: a
		// process cannot join it until it has its parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			for _, d := range []string{root, dir} {
				if v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil {
					_ = os.WriteFile(filepath.Join(d, f), v, 0o644)
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move pid %d into %s: %w", pid, dir, err)
		}
	}
	return nil
}

// killAndRemove kills every process left in the node's cgroups (the pods'
// containers, containerd's shims) and removes the cgroups, deepest first.
func (cg *nodeCgroup) killAndRemove() {
	for attempt := 0; attempt < 50; attempt++ {
		pids := map[int]bool{}
		for _, root := range cg.roots {
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
						pids[pid] = true
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			break
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, root := range cg.roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

// nodeAddressIPs are the addresses the API server's certificate must name
// for a real node: the node's address and the kubernetes Service's.
func nodeAddressIPs() []net.IP {
	return []net.IP{net.ParseIP(NodeIP), net.ParseIP(kubernetesServiceIP)}
}

// containerdConfig is containerd's configuration (format of containerd
// 1.6 and 1.7): root, state, socket, ttrpc socket, sandbox image, runc's
// state directory, CNI plugin and configuration directories. OOM score adjustments are clamped
// to containerd's own (the kubelet asks for negative ones, which need
// CAP_SYS_RESOURCE).
const containerdConfig = `version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`

// kubeletConfig is the kubelet's configuration: address, port, healthz
// port, client CA, cgroup root, runtime endpoint, pod log directory, volume
// plugin directory. Eviction thresholds are low (a shared test machine's
// disk and memory may be fuller than a node's would be, and an evicted pod
// would fail a test for reasons of the machine), cgroup v1 is allowed (the
// hosts this runs on have a hybrid layout), and no cluster DNS is set (no
// DNS runs; the manager reaches the API server by the kubernetes Service's
// address).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
cgroupRoot: %s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: %s
podLogsDir: %s
volumePluginDir: %s
resolvConf: /etc/resolv.conf
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 110
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
protectKernelDefaults: false
`

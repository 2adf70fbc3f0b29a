package nodeagent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestRewritePaths(t *testing.T) {
	mounts := []mount{
		{containerPath: "/var/run/kvpilot/control", localPath: "/run/pod/volumes/control-token"},
		{containerPath: "/tmp", localPath: "/run/pod/volumes/tmp"},
	}
	for in, want := range map[string]string{
		"--control-token-file=/var/run/kvpilot/control/token": "--control-token-file=/run/pod/volumes/control-token/token",
		"/var/run/kvpilot/control/token":                      "/run/pod/volumes/control-token/token",
		"/tmp":                                                "/run/pod/volumes/tmp",
		"TMPDIR=/tmp/x":                                       "TMPDIR=/run/pod/volumes/tmp/x",
		"--model=builtin:tiny":                                "--model=builtin:tiny",
		"--host=0.0.0.0":                                      "--host=0.0.0.0",
		"/tmpfoo":                                             "/tmpfoo",
		"--stop=a=/tmp":                                       "--stop=a=/tmp",
	} {
		if got := rewritePaths(in, mounts); got != want {
			t.Errorf("rewritePaths(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "POD_IP": "127.0.0.10"}
	for in, want := range map[string]string{
		"$(POD_IP):8000": "127.0.0.10:8000",
		"$(A)$(A)":       "11",
		"$$(A)":          "$(A)",
		"$(MISSING)":     "$(MISSING)",
		"plain":          "plain",
		"trailing$":      "trailing$",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestContainerEnvDownwardAPIAndSecrets(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1", Labels: map[string]string{"app": "x"}},
		Spec:       corev1.PodSpec{NodeName: "n"},
	}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	c := &corev1.Container{Env: []corev1.EnvVar{
		field("POD_NAME", "metadata.name"),
		field("POD_NAMESPACE", "metadata.namespace"),
		field("POD_IP", "status.podIP"),
		field("APP", "metadata.labels['app']"),
		{Name: "ADDR", Value: "$(POD_IP):8000"},
		{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}},
		{Name: "CACHE", Value: "/tmp/cache"},
	}}
	client := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"k": []byte("v")}})
	a := &Agent{client: client}
	got, err := a.containerEnv(context.Background(), pod, c, "127.0.0.10", []mount{{containerPath: "/tmp", localPath: "/pods/p/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"POD_NAME=p", "POD_NAMESPACE=ns", "POD_IP=127.0.0.10", "APP=x", "ADDR=127.0.0.10:8000", "KEY=v", "CACHE=/pods/p/tmp/cache"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}

	// A Secret that does not exist yet makes the container wait.
	c.Env[5].ValueFrom.SecretKeyRef.Name = "later"
	if _, err := a.containerEnv(context.Background(), pod, c, "127.0.0.10", nil); err == nil {
		t.Error("a missing secret should make the container wait")
	} else if _, ok := err.(errWaiting); !ok {
		t.Errorf("missing secret: %T %v, want errWaiting", err, err)
	}
}

func TestPrepareVolumesWritesSecretItems(t *testing.T) {
	dir := t.TempDir()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "tok", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "pool-control", Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "pvc", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
		}},
	}
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "tok", MountPath: "/var/run/kvpilot/control"},
	}}
	client := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pool-control", Namespace: "ns"},
		Data: map[string][]byte{"token": []byte("s3cret"), "other": []byte("x")}})
	a := &Agent{client: client}
	mounts, err := a.prepareVolumes(context.Background(), pod, c, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []mount{
		{containerPath: "/var/run/kvpilot/control", localPath: filepath.Join(dir, "volumes", "tok")},
		{containerPath: "/tmp", localPath: filepath.Join(dir, "volumes", "tmp")},
	}
	if diff := cmp.Diff(want, mounts, cmp.AllowUnexported(mount{})); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "volumes", "tok", "token")); err != nil || string(b) != "s3cret" {
		t.Errorf("token file: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes", "tok", "other")); !os.IsNotExist(err) {
		t.Errorf("only the listed items are written: %v", err)
	}

	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "pvc", MountPath: "/models"})
	if _, err := a.prepareVolumes(context.Background(), pod, c, dir); err == nil {
		t.Error("a PVC volume cannot run on the local node and should be refused")
	}
}

func TestFits(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"nvidia.com/gpu.product": "H100"}}}
	gpuPod := func(n int64, sel map[string]string) *corev1.Pod {
		q := *resource.NewQuantity(n, resource.DecimalSI)
		return &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: sel, Containers: []corev1.Container{{
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{gpuResource: q}},
		}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		free int64
		fit  bool
	}{
		{"no gpus", &corev1.Pod{}, 0, true},
		{"gpus free", gpuPod(2, nil), 2, true},
		{"too few gpus", gpuPod(3, nil), 2, false},
		{"selector matches", gpuPod(1, map[string]string{"nvidia.com/gpu.product": "H100"}), 8, true},
		{"selector does not match", gpuPod(1, map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4"}), 8, false},
	} {
		if got := fits(tc.pod, node, podGPUs(tc.pod), tc.free) == ""; got != tc.fit {
			t.Errorf("%s: fits = %v, want %v", tc.name, got, tc.fit)
		}
	}
}

func TestIPPoolSkipsBusyAddresses(t *testing.T) {
	// Something else listens on the first address's port.
	l, err := net.Listen("tcp", "127.0.0.201:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.201: %v", err)
	}
	defer l.Close()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	pool := NewIPPool("127.0.0", 201, 203)
	ip, err := pool.Allocate([]int32{port})
	if err != nil || ip != "127.0.0.202" {
		t.Fatalf("Allocate = %q, %v; want 127.0.0.202 (201's port is taken)", ip, err)
	}
	ip2, err := pool.Allocate([]int32{port})
	if err != nil || ip2 != "127.0.0.203" {
		t.Fatalf("second Allocate = %q, %v; want 127.0.0.203", ip2, err)
	}
	if _, err := pool.Allocate([]int32{port}); err == nil {
		t.Fatal("the pool is exhausted; Allocate should fail")
	}
	pool.Release(ip)
	if ip3, err := pool.Allocate([]int32{port}); err != nil || ip3 != ip {
		t.Fatalf("after Release: %q, %v; want %s", ip3, err, ip)
	}
}

func TestPodStatusFollowsContainers(t *testing.T) {
	w := &podWorker{ip: "127.0.0.10", pod: &corev1.Pod{}}
	c := &container{status: corev1.ContainerStatus{Name: "runtime"}}
	w.containers = []*container{c}
	if s := w.status(); s.Phase != corev1.PodPending || s.PodIP != "127.0.0.10" {
		t.Errorf("before start: phase %s ip %s", s.Phase, s.PodIP)
	}
	c.status.ContainerID = "local://1"
	c.status.Started = ptr.To(true)
	if s := w.status(); s.Phase != corev1.PodRunning || condition(s, corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("started, not ready: phase %s ready %s", s.Phase, condition(s, corev1.PodReady))
	}
	c.status.Ready = true
	if s := w.status(); condition(s, corev1.PodReady) != corev1.ConditionTrue || condition(s, corev1.ContainersReady) != corev1.ConditionTrue {
		t.Errorf("ready: %+v", s.Conditions)
	}
	c.done = true
	c.status.Ready = false
	c.status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}
	if s := w.status(); s.Phase != corev1.PodFailed {
		t.Errorf("exited 2 for good: phase %s", s.Phase)
	}
}

func condition(s corev1.PodStatus, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

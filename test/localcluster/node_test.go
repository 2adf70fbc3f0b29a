package localcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mountinfo is /proc/self/mountinfo of a host with a hybrid cgroup layout
// and a real node's mounts, one with a space in its path.
const mountinfo = `22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
24 22 0:21 / /sys rw,relatime - sysfs sysfs rw
25 24 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:24 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
28 25 0:25 / /sys/fs/cgroup/systemd rw,relatime shared:5 - cgroup cgroup rw,name=systemd
29 25 0:26 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
40 22 0:40 / /tmp/run/node/kubelet/pods/a/volumes/secret rw,relatime - tmpfs tmpfs rw
41 22 0:41 / /tmp/run/node/containerd/state/shm rw,relatime - tmpfs shm rw
42 41 0:42 / /tmp/run/node/containerd/state/shm/inner rw,relatime - tmpfs shm rw
43 22 0:43 / /tmp/run/node\040two rw,relatime - tmpfs tmpfs rw
44 22 0:44 / /tmp/run/nodes rw,relatime - tmpfs tmpfs rw
`

func TestCgroupMounts(t *testing.T) {
	want := []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"}
	if diff := cmp.Diff(want, cgroupMounts(mountinfo)); diff != "" {
		t.Errorf("cgroupMounts (-want +got):\n%s", diff)
	}
}

func TestMountPointsUnder(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"/tmp/run/node", []string{
			"/tmp/run/node/kubelet/pods/a/volumes/secret",
			"/tmp/run/node/containerd/state/shm",
			"/tmp/run/node/containerd/state/shm/inner",
		}},
		{"/tmp/run/node two", []string{"/tmp/run/node two"}},
		{"/tmp/other", nil},
	} {
		if diff := cmp.Diff(tc.want, mountPointsUnder(mountinfo, tc.dir)); diff != "" {
			t.Errorf("mountPointsUnder(%q) (-want +got):\n%s", tc.dir, diff)
		}
	}
}

func TestUnescapeMountPoint(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:          "/a/b",
		`/a\040b`:       "/a b",
		`/tab\011x\134`: "/tab\tx\\",
		`/bad\9`:        `/bad\9`,
	} {
		if got := unescapeMountPoint(in); got != want {
			t.Errorf("unescapeMountPoint(%q) = %q, want %q", in, got, want)
		}
	}
}

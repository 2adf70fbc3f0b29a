package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mount maps a container's mount path to the local path that stands for it.
type mount struct {
	containerPath, localPath string
}

// errWaiting is a volume that cannot be made yet (its Secret or ConfigMap
// does not exist); the worker tries again, as a kubelet does.
type errWaiting struct{ msg string }

func (e errWaiting) Error() string { return e.msg }

// prepareVolumes makes the volumes a container mounts under dir/volumes and
// returns where each mount path now is, longest mount path first.
func (a *Agent) prepareVolumes(ctx context.Context, pod *corev1.Pod, c *corev1.Container, dir string) ([]mount, error) {
	volumes := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		volumes[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var mounts []mount
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q is not defined", vm.Name)
		}
		local, err := a.prepareVolume(ctx, pod.Namespace, v, filepath.Join(dir, "volumes", v.Name))
		if err != nil {
			return nil, err
		}
		if vm.SubPath != "" {
			local = filepath.Join(local, vm.SubPath)
		}
		mounts = append(mounts, mount{containerPath: filepath.Clean(vm.MountPath), localPath: local})
	}
	slices.SortFunc(mounts, func(x, y mount) int { return len(y.containerPath) - len(x.containerPath) })
	return mounts, nil
}

func (a *Agent) prepareVolume(ctx context.Context, namespace string, v *corev1.Volume, dir string) (string, error) {
	switch {
	case v.EmptyDir != nil:
		return dir, os.MkdirAll(dir, 0o755)
	case v.HostPath != nil:
		return v.HostPath.Path, nil
	case v.Secret != nil:
		s, err := a.client.CoreV1().Secrets(namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			if v.Secret.Optional != nil && *v.Secret.Optional {
				return dir, os.MkdirAll(dir, 0o755)
			}
			return "", errWaiting{fmt.Sprintf("secret %q: %v", v.Secret.SecretName, err)}
		}
		return dir, writeKeys(dir, s.Data, nil, v.Secret.Items)
	case v.ConfigMap != nil:
		cm, err := a.client.CoreV1().ConfigMaps(namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			if v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
				return dir, os.MkdirAll(dir, 0o755)
			}
			return "", errWaiting{fmt.Sprintf("configmap %q: %v", v.ConfigMap.Name, err)}
		}
		return dir, writeKeys(dir, cm.BinaryData, cm.Data, v.ConfigMap.Items)
	default:
		return "", fmt.Errorf("volume %q: only emptyDir, hostPath, secret and configMap volumes run on the local node", v.Name)
	}
}

// writeKeys writes a Secret's or ConfigMap's keys as files: the listed
// items, or every key.
func writeKeys(dir string, data map[string][]byte, text map[string]string, items []corev1.KeyToPath) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	value := func(k string) ([]byte, bool) {
		if b, ok := data[k]; ok {
			return b, true
		}
		s, ok := text[k]
		return []byte(s), ok
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
		for k := range text {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		b, ok := value(it.Key)
		if !ok {
			return errWaiting{fmt.Sprintf("key %q not found", it.Key)}
		}
		p := filepath.Join(dir, filepath.Clean("/"+it.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// rewritePaths replaces container paths in s with their local paths: s
// itself, or the value of a --flag=value argument or NAME=value pair.
func rewritePaths(s string, mounts []mount) string {
	prefix, value := "", s
	if i := strings.IndexByte(s, '='); i >= 0 && !strings.HasPrefix(s, "/") {
		prefix, value = s[:i+1], s[i+1:]
	}
	for _, m := range mounts {
		if value == m.containerPath {
			return prefix + m.localPath
		}
		if rest, ok := strings.CutPrefix(value, m.containerPath+"/"); ok {
			return prefix + filepath.Join(m.localPath, rest)
		}
	}
	return s
}

package nodeagent

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerEnv resolves a container's environment as a kubelet does:
// literal values (with $(VAR) references to earlier ones), the downward API
// (metadata.name, metadata.namespace, metadata.uid, spec.nodeName,
// status.podIP, status.hostIP, …), and keys of Secrets and ConfigMaps.
// Paths under the container's mounts become local paths.
func (a *Agent) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP string, mounts []mount) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		data := map[string]string{}
		switch {
		case from.SecretRef != nil:
			s, err := a.client.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				return nil, errWaiting{fmt.Sprintf("secret %q: %v", from.SecretRef.Name, err)}
			}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		case from.ConfigMapRef != nil:
			cm, err := a.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				return nil, errWaiting{fmt.Sprintf("configmap %q: %v", from.ConfigMapRef.Name, err)}
			}
			data = cm.Data
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		v, err := a.envValue(ctx, pod, e, podIP, vars)
		if err != nil {
			return nil, err
		}
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, rewritePaths(k+"="+vars[k], mounts))
	}
	return out, nil
}

func (a *Agent) envValue(ctx context.Context, pod *corev1.Pod, e corev1.EnvVar, podIP string, vars map[string]string) (string, error) {
	src := e.ValueFrom
	switch {
	case src == nil:
		return expand(e.Value, vars), nil
	case src.FieldRef != nil:
		return fieldValue(pod, src.FieldRef.FieldPath, podIP)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := a.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", errWaiting{fmt.Sprintf("secret %q: %v", ref.Name, err)}
		}
		return string(s.Data[ref.Key]), nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := a.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", errWaiting{fmt.Sprintf("configmap %q: %v", ref.Name, err)}
		}
		return cm.Data[ref.Key], nil
	default:
		return "", fmt.Errorf("env %s: only values, field references, secret and configmap keys run on the local node", e.Name)
	}
}

// fieldValue is a downward-API field of the pod.
func fieldValue(pod *corev1.Pod, path, podIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	if k, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(k, "']")], nil
	}
	if k, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(k, "']")], nil
	}
	return "", fmt.Errorf("downward API field %q is not supported on the local node", path)
}

// expand replaces $(NAME) with earlier variables' values; $$ escapes.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if j := strings.IndexByte(s[i:], ')'); j > 0 {
				name := s[i+2 : i+j]
				if v, ok := vars[name]; ok {
					b.WriteString(v)
					i += j
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

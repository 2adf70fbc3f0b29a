//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gpuPool asks for 4 nvidia.com/gpu per pod, three pods, on a node that
// advertises 8 (the real node's device plugin, or the node agent): two pods
// fit.
var gpuPool = simPool{name: "gpu-sim", replicas: 3, gpus: 4}

// TestGPUPoolSchedulesByDeviceCount checks that GPU pools schedule by the
// node's nvidia.com/gpu: the pods ask for the pool's accelerators and
// tolerate the GPU taint, two of three run, and the third stays pending
// for want of GPUs, as the scheduler says. On the real node the devices
// come from a device plugin registered with the kubelet (only their count
// is made up; there is no GPU behind them).
func TestGPUPoolSchedulesByDeviceCount(t *testing.T) {
	ns := newNamespace(t, "e2e-gpu")
	applyYAML(t, ns, gpuPool.manifest())
	poll.UntilOK(t, podsReadyTimeout, func() string {
		pods, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "serving.kvpilot.dev/pool=" + gpuPool.name})
		if err != nil {
			return err.Error()
		}
		var ready, unschedulable int
		var states []string
		for _, p := range pods.Items {
			c := p.Spec.Containers[0]
			if q := c.Resources.Limits[gpuResourceName]; q.Value() != 4 {
				t.Fatalf("pod %s: limits %v, want 4 %s", p.Name, c.Resources.Limits, gpuResourceName)
			}
			if isReady(&p) {
				ready++
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse &&
					strings.Contains(cond.Message, "Insufficient "+string(gpuResourceName)) {
					unschedulable++
				}
			}
			states = append(states, fmt.Sprintf("%s %s ready=%v node=%q", p.Name, p.Status.Phase, isReady(&p), p.Spec.NodeName))
		}
		if len(pods.Items) != 3 || ready != 2 || unschedulable != 1 {
			return fmt.Sprintf("want 3 pods, 2 ready and 1 unschedulable for want of %s; have %s", gpuResourceName, strings.Join(states, "; "))
		}
		return ""
	})
	node, err := env.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(node.Items) != 1 {
		t.Fatalf("nodes: %v %v", node, err)
	}
	if q := node.Items[0].Status.Allocatable[gpuResourceName]; q.Value() != 8 {
		t.Errorf("node allocatable %s = %s, want 8", gpuResourceName, q.String())
	}
}

const gpuResourceName corev1.ResourceName = "nvidia.com/gpu"

package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kvpilot/kvpilot/internal/fleet"
)

// runtimePod is a pool's pod as the Deployment makes it, with an address
// and a readiness.
func runtimePod(name, ip string, ready bool) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelPool: "p"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: runtimeContainerName,
			Ports: []corev1.ContainerPort{
				{Name: httpPortName, ContainerPort: httpPort},
				{Name: controlPortName, ContainerPort: controlPort},
			},
		}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			PodIP: ip,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: status},
			},
		},
	}
}

func TestFleetPods(t *testing.T) {
	terminating := runtimePod("d-terminating", "10.0.0.4", false)
	terminating.DeletionTimestamp = &metav1.Time{}
	terminating.Finalizers = []string{"example.com/keep"}
	noConditions := runtimePod("e-starting", "10.0.0.5", false)
	noConditions.Status.Conditions = nil
	failed := runtimePod("f-failed", "10.0.0.6", false)
	failed.Status.Phase = corev1.PodFailed
	succeeded := runtimePod("g-done", "10.0.0.7", false)
	succeeded.Status.Phase = corev1.PodSucceeded
	pending := runtimePod("h-pending", "", false)
	pending.Status.Phase = corev1.PodPending
	ipv6 := runtimePod("i-v6", "fd00::9", true)
	otherPorts := runtimePod("j-ports", "10.0.0.10", true)
	otherPorts.Spec.Containers[0].Ports[0].ContainerPort = 9000
	otherPorts.Spec.Containers[0].Ports[1].ContainerPort = 9001
	noPorts := runtimePod("k-noports", "10.0.0.11", true)
	noPorts.Spec.Containers[0].Ports = nil

	pods := []corev1.Pod{
		runtimePod("c-ready", "10.0.0.3", true), runtimePod("b-unready", "10.0.0.2", false),
		terminating, noConditions, failed, succeeded, pending, ipv6, otherPorts, noPorts,
	}
	got := fleetPods(pods, PodIPAddresses)
	want := []fleet.Pod{
		{Name: "b-unready", APIAddr: "10.0.0.2:8000", ControlAddr: "10.0.0.2:8081"},
		{Name: "c-ready", APIAddr: "10.0.0.3:8000", ControlAddr: "10.0.0.3:8081", Ready: true},
		{Name: "d-terminating", APIAddr: "10.0.0.4:8000", ControlAddr: "10.0.0.4:8081", Draining: true},
		{Name: "e-starting", APIAddr: "10.0.0.5:8000", ControlAddr: "10.0.0.5:8081"},
		{Name: "i-v6", APIAddr: "[fd00::9]:8000", ControlAddr: "[fd00::9]:8081", Ready: true},
		{Name: "j-ports", APIAddr: "10.0.0.10:9000", ControlAddr: "10.0.0.10:9001", Ready: true},
		{Name: "k-noports", APIAddr: "10.0.0.11:8000", ControlAddr: "10.0.0.11:8081", Ready: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fleetPods (-want +got):\n%s", diff)
	}
}

func TestFleetPodsCustomAddresses(t *testing.T) {
	addrs := func(pod *corev1.Pod) (string, string) {
		if pod.Name == "unknown" {
			return "", ""
		}
		return pod.Name + ":1", pod.Name + ":2"
	}
	got := fleetPods([]corev1.Pod{runtimePod("a", "", true), runtimePod("unknown", "10.0.0.1", true)}, addrs)
	want := []fleet.Pod{{Name: "a", APIAddr: "a:1", ControlAddr: "a:2", Ready: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fleetPods (-want +got):\n%s", diff)
	}
}

package nodeagent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// bindInterval is how often pending pods are looked at again; a pod that
// did not fit may fit once another has gone.
const bindInterval = 500 * time.Millisecond

// bindLoop is the agent's scheduler: every pending pod of the default
// scheduler that fits the node is bound to it. A pod fits when its node
// selector matches the node's labels, it tolerates the node's taints (the
// node has none) and the node has the nvidia.com/gpu it asks for left. CPU
// and memory requests are not counted: the processes share one machine.
func (a *Agent) bindLoop(ctx context.Context) {
	t := time.NewTicker(bindInterval)
	defer t.Stop()
	unschedulable := map[string]string{} // pod key → message already reported
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		node, err := a.client.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		if err != nil {
			continue
		}
		free := gpusFree(node, a.pods.List())
		for _, obj := range a.pods.List() {
			pod := obj.(*corev1.Pod)
			if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil ||
				(pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName) {
				continue
			}
			key := pod.Namespace + "/" + pod.Name
			want := podGPUs(pod)
			msg := fits(pod, node, want, free)
			if msg != "" {
				if unschedulable[key] != msg {
					unschedulable[key] = msg
					a.reportUnschedulable(ctx, pod, msg)
				}
				continue
			}
			delete(unschedulable, key)
			err := a.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: a.node},
			}, metav1.CreateOptions{})
			switch {
			case err == nil:
				free -= want
				a.log.Info("bound pod", "pod", key)
			case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			default:
				a.log.Error("bind pod", "pod", key, "err", err)
			}
		}
	}
}

// fits says why pod cannot run on node, or "" when it can.
func fits(pod *corev1.Pod, node *corev1.Node, gpus, free int64) string {
	if sel := pod.Spec.NodeSelector; len(sel) > 0 && !labels.SelectorFromSet(sel).Matches(labels.Set(node.Labels)) {
		return "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
	}
	if gpus > free {
		return fmt.Sprintf("0/1 nodes are available: 1 Insufficient %s (%d free, %d requested).", gpuResource, free, gpus)
	}
	return ""
}

// gpusFree is the node's GPU capacity less what the pods bound to it and
// not finished ask for.
func gpusFree(node *corev1.Node, pods []any) int64 {
	capacity := node.Status.Allocatable[gpuResource]
	free := capacity.Value()
	for _, obj := range pods {
		pod := obj.(*corev1.Pod)
		if pod.Spec.NodeName != node.Name || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		free -= podGPUs(pod)
	}
	return free
}

func podGPUs(pod *corev1.Pod) int64 {
	var n int64
	for i := range pod.Spec.Containers {
		q := pod.Spec.Containers[i].Resources.Requests[gpuResource]
		if q.IsZero() {
			q = pod.Spec.Containers[i].Resources.Limits[gpuResource]
		}
		n += q.Value()
	}
	return n
}

// reportUnschedulable sets PodScheduled=False as kube-scheduler does, so
// `kubectl describe pod` says why a pod is pending.
func (a *Agent) reportUnschedulable(ctx context.Context, pod *corev1.Pod, msg string) {
	p := pod.DeepCopy()
	setPodCondition(&p.Status, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg,
	})
	if _, err := a.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		a.log.Error("report unschedulable pod", "pod", p.Namespace+"/"+p.Name, "err", err)
	}
}

// setPodCondition sets c in s, keeping the transition time while the
// condition's status holds.
func setPodCondition(s *corev1.PodStatus, c corev1.PodCondition) {
	now := metav1.Now()
	for i := range s.Conditions {
		if s.Conditions[i].Type != c.Type {
			continue
		}
		if s.Conditions[i].Status == c.Status {
			c.LastTransitionTime = s.Conditions[i].LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
		s.Conditions[i] = c
		return
	}
	c.LastTransitionTime = now
	s.Conditions = append(s.Conditions, c)
}

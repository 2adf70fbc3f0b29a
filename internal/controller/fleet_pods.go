package controller

import (
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kvpilot/kvpilot/internal/fleet"
)

// PodAddresses returns the host:port of a runtime pod's OpenAI API and of
// its control API, or empty strings while the pod has no address. It must
// not block: the fleet loop calls it for every pod every round.
type PodAddresses func(pod *corev1.Pod) (apiAddr, controlAddr string)

// PodIPAddresses is the PodAddresses of a real cluster: the pod's IP and
// the container ports named http and control (the runtime's defaults when
// a pod names none).
func PodIPAddresses(pod *corev1.Pod) (apiAddr, controlAddr string) {
	ip := pod.Status.PodIP
	if ip == "" {
		return "", ""
	}
	api, ctl := int32(httpPort), int32(controlPort)
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			switch p.Name {
			case httpPortName:
				api = p.ContainerPort
			case controlPortName:
				ctl = p.ContainerPort
			}
		}
	}
	return net.JoinHostPort(ip, strconv.Itoa(int(api))), net.JoinHostPort(ip, strconv.Itoa(int(ctl)))
}

// fleetPods maps a pool's pods to the fleet loop's view, sorted by name.
// Pods that have finished, or have no address yet, are left out: they hold
// no programs and cannot be asked. A terminating pod is Draining, so its
// programs move to the others while it finishes its requests.
func fleetPods(pods []corev1.Pod, addrs PodAddresses) []fleet.Pod {
	out := make([]fleet.Pod, 0, len(pods))
	for i := range pods {
		pod := &pods[i]
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		api, ctl := addrs(pod)
		if api == "" || ctl == "" {
			continue
		}
		out = append(out, fleet.Pod{
			Name:        pod.Name,
			APIAddr:     api,
			ControlAddr: ctl,
			Ready:       podReady(pod),
			Draining:    pod.DeletionTimestamp != nil,
		})
	}
	slices.SortFunc(out, func(a, b fleet.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

package controller

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

// maxFetchMessage bounds the part of a failed fetch's termination message
// (the tail of its log) that goes into the condition.
const maxFetchMessage = 1024

// podFetch is where one pod is with its fetch.
type podFetch int

const (
	// podFetching: not started yet (scheduling, pulling the image), or the
	// init container is running.
	podFetching podFetch = iota
	podFetched
	podFetchFailed
)

// podFetchState classifies a pod by its fetch-model init container, and
// for a failed fetch says why.
func podFetchState(p *corev1.Pod) (podFetch, string) {
	st := fetchStatus(p)
	switch {
	case st == nil:
		return podFetching, ""
	case st.State.Terminated != nil && st.State.Terminated.ExitCode == 0:
		return podFetched, ""
	case st.State.Terminated != nil:
		return podFetchFailed, fetchFailure(st.State.Terminated)
	case st.State.Waiting != nil && st.LastTerminationState.Terminated != nil && st.LastTerminationState.Terminated.ExitCode != 0:
		return podFetchFailed, fetchFailure(st.LastTerminationState.Terminated)
	}
	return podFetching, ""
}

// modelReadyCondition summarises the pods' fetch-model init containers of
// a url-source pool. A failed fetch wins (its message is the reason the
// pool is stuck); then fetching pods, with the progress of those in
// progress (by pod name) that answered; True only when every pod is past
// its fetch.
func modelReadyCondition(pods []corev1.Pod, progress map[string]wire.FetchProgress) metav1.Condition {
	c := metav1.Condition{Type: servingv1alpha1.PoolModelReady}
	if len(pods) == 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, servingv1alpha1.ReasonNoPods, "the pool has no pods"
		return c
	}
	sorted := sortedPods(pods)
	fetched, fetching := 0, 0
	var failed []string
	for i := range sorted {
		switch state, why := podFetchState(&sorted[i]); state {
		case podFetched:
			fetched++
		case podFetchFailed:
			failed = append(failed, sorted[i].Name+": "+why)
		default:
			fetching++
		}
	}
	switch {
	case len(failed) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, servingv1alpha1.ReasonModelFetchFailed
		c.Message = fmt.Sprintf("%d of %d pods failed to fetch the model (kubectl logs POD -c %s); %s", len(failed), len(pods), fetchContainerName, failed[0])
	case fetched == len(pods):
		c.Status, c.Reason = metav1.ConditionTrue, servingv1alpha1.ReasonModelFetched
		c.Message = fmt.Sprintf("%d of %d pods have the model", fetched, len(pods))
	default:
		c.Status, c.Reason = metav1.ConditionFalse, servingv1alpha1.ReasonModelFetching
		c.Message = fmt.Sprintf("%d of %d pods fetching the model", fetching, len(pods))
		var said []string
		for i := range sorted {
			if p, ok := progress[sorted[i].Name]; ok {
				said = append(said, sorted[i].Name+" "+describeFetch(p))
			}
		}
		if len(said) == 0 {
			c.Message += fmt.Sprintf(" (progress: kubectl logs POD -c %s)", fetchContainerName)
		} else {
			c.Message += "; " + strings.Join(said, "; ")
		}
	}
	return c
}

// modelStatus counts the pods of a url-source pool by their fetch and sums
// the progress of those that said they are downloading (or have just
// finished, their init container not yet exited). The total is left out
// when one of them does not know its size yet.
func modelStatus(pods []corev1.Pod, progress map[string]wire.FetchProgress) *servingv1alpha1.ModelStatus {
	st := &servingv1alpha1.ModelStatus{}
	var total int64
	known := true
	for i := range pods {
		state, _ := podFetchState(&pods[i])
		switch state {
		case podFetched:
			st.PodsFetched++
			continue
		case podFetchFailed:
			st.PodsFailed++
			continue
		}
		st.PodsFetching++
		p, ok := progress[pods[i].Name]
		if !ok || (p.Phase != wire.FetchDownloading && p.Phase != wire.FetchDone) {
			continue
		}
		st.PodsDownloading++
		st.BytesDone += p.DoneBytes
		total += p.TotalBytes
		known = known && p.TotalBytes >= 0
	}
	if st.PodsDownloading > 0 && known {
		st.BytesTotal = ptr.To(total)
		st.DownloadPercent = ptr.To(int32(100 * st.BytesDone / max(total, 1)))
		if total == 0 {
			st.DownloadPercent = ptr.To(int32(100))
		}
	}
	return st
}

func sortedPods(pods []corev1.Pod) []corev1.Pod {
	sorted := append([]corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	return sorted
}

func fetchStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.InitContainerStatuses {
		if s := &p.Status.InitContainerStatuses[i]; s.Name == fetchContainerName {
			return s
		}
	}
	return nil
}

// fetchFailure is a failed fetch's last log line that says why (the
// termination message is the log's tail), bounded.
func fetchFailure(t *corev1.ContainerStateTerminated) string {
	msg := strings.TrimSpace(t.Message)
	if msg == "" {
		return fmt.Sprintf("exit code %d", t.ExitCode)
	}
	lines := strings.Split(msg, "\n")
	last := lines[len(lines)-1]
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "fetch failed") || strings.Contains(lines[i], "runtime:") {
			last = lines[i]
			break
		}
	}
	if len(last) > maxFetchMessage {
		last = last[:maxFetchMessage]
	}
	return last
}

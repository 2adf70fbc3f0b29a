package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	utiltesting "github.com/kvpilot/kvpilot/internal/util/testing"
)

func fetchPod(name string, st *corev1.ContainerStatus) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if st != nil {
		st.Name = fetchContainerName
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{*st}
	}
	return p
}

func TestModelReadyCondition(t *testing.T) {
	done := &corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}
	running := &corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	log := "time=... level=INFO msg=\"fetching model\"\n" +
		`time=... level=ERROR msg="fetch failed" url=hf://acme/m:Q4_K_M err="hf://acme/m@main/m.gguf: 401 Unauthorized: the repository is gated"` + "\n"
	backoff := &corev1.ContainerStatus{
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: log}},
	}
	for _, tc := range []struct {
		name        string
		pods        []corev1.Pod
		status      metav1.ConditionStatus
		reason      string
		wantMessage string
	}{
		{name: "no pods", status: metav1.ConditionUnknown, reason: servingv1alpha1.ReasonNoPods},
		{name: "all fetched", pods: []corev1.Pod{fetchPod("a", done), fetchPod("b", done)},
			status: metav1.ConditionTrue, reason: servingv1alpha1.ReasonModelFetched, wantMessage: "2 of 2 pods have the model"},
		{name: "one fetching, one not started", pods: []corev1.Pod{fetchPod("a", done), fetchPod("b", running), fetchPod("c", nil)},
			status: metav1.ConditionFalse, reason: servingv1alpha1.ReasonModelFetching, wantMessage: "2 of 3 pods fetching the model"},
		{name: "a failure in back-off wins", pods: []corev1.Pod{fetchPod("a", running), fetchPod("b", backoff)},
			status: metav1.ConditionFalse, reason: servingv1alpha1.ReasonModelFetchFailed,
			wantMessage: `1 of 2 pods failed to fetch the model (kubectl logs POD -c fetch-model); b: time=... level=ERROR msg="fetch failed" url=hf://acme/m:Q4_K_M err="hf://acme/m@main/m.gguf: 401 Unauthorized`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := modelReadyCondition(tc.pods)
			if c.Type != servingv1alpha1.PoolModelReady || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("got %s=%s %s %q, want %s %s containing %q", c.Type, c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.wantMessage)
			}
		})
	}
}

func TestModelReadyOnlyForURLPools(t *testing.T) {
	pool := utiltesting.MakeInferencePool("p", "ns").URLModel("hf://acme/m:Q4_K_M", nil).Obj()
	setPoolStatus(pool, observation{modelReady: modelReadyCondition(nil)})
	if c := meta.FindStatusCondition(pool.Status.Conditions, servingv1alpha1.PoolModelReady); c == nil || c.Reason != servingv1alpha1.ReasonNoPods {
		t.Fatalf("a url pool's status lacks ModelReady=Unknown NoPods: %+v", pool.Status.Conditions)
	}
	// The pool moves to another source: the condition goes.
	pool.Spec.Model.Source = servingv1alpha1.ModelSource{Builtin: servingv1alpha1.BuiltinModelTiny}
	setPoolStatus(pool, observation{})
	for _, c := range pool.Status.Conditions {
		if c.Type == servingv1alpha1.PoolModelReady {
			t.Errorf("a builtin pool keeps %+v", c)
		}
	}
}

package controller

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/util/testing/builders"
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
			c := modelReadyCondition(tc.pods, nil)
			if c.Type != servingv1alpha1.PoolModelReady || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("got %s=%s %s %q, want %s %s containing %q", c.Type, c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.wantMessage)
			}
		})
	}
}

func TestModelReadyOnlyForURLPools(t *testing.T) {
	pool := builders.MakeInferencePool("p", "ns").URLModel("hf://acme/m:Q4_K_M", nil).Obj()
	setPoolStatus(pool, observation{modelReady: modelReadyCondition(nil, nil), model: modelStatus(nil, nil)})
	if c := meta.FindStatusCondition(pool.Status.Conditions, servingv1alpha1.PoolModelReady); c == nil || c.Reason != servingv1alpha1.ReasonNoPods {
		t.Fatalf("a url pool's status lacks ModelReady=Unknown NoPods: %+v", pool.Status.Conditions)
	}
	if pool.Status.Model == nil {
		t.Fatal("a url pool's status lacks model")
	}
	// The pods could not be read: what was observed stays.
	setPoolStatus(pool, observation{})
	if pool.Status.Model == nil || meta.FindStatusCondition(pool.Status.Conditions, servingv1alpha1.PoolModelReady) == nil {
		t.Fatalf("an observation without the pods dropped the url pool's model status: %+v", pool.Status)
	}
	// The pool moves to another source: the condition goes.
	pool.Spec.Model.Source = servingv1alpha1.ModelSource{Builtin: servingv1alpha1.BuiltinModelTiny}
	setPoolStatus(pool, observation{})
	for _, c := range pool.Status.Conditions {
		if c.Type == servingv1alpha1.PoolModelReady {
			t.Errorf("a builtin pool keeps %+v", c)
		}
	}
	if pool.Status.Model != nil {
		t.Errorf("a builtin pool keeps model %+v", pool.Status.Model)
	}
}

func TestModelReadyShowsProgress(t *testing.T) {
	running := &corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	pods := []corev1.Pod{fetchPod("c", running), fetchPod("a", running), fetchPod("b", running)}
	progress := map[string]wire.FetchProgress{
		"a": {Phase: wire.FetchDownloading, File: 1, Files: 1, DoneBytes: 13207024435, TotalBytes: 43056619930},
		"c": {Phase: wire.FetchWaiting, TotalBytes: -1},
	}
	c := modelReadyCondition(pods, progress)
	want := "3 of 3 pods fetching the model; a downloading: 12.3 GiB of 40.1 GiB (30%); " +
		"c waiting for another pod's download of the same model to the shared cache"
	if c.Reason != servingv1alpha1.ReasonModelFetching || c.Message != want {
		t.Errorf("got %s %q, want %s %q", c.Reason, c.Message, servingv1alpha1.ReasonModelFetching, want)
	}
}

func TestModelStatus(t *testing.T) {
	done := &corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}
	failed := &corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	running := &corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	downloading := func(done, total int64) wire.FetchProgress {
		return wire.FetchProgress{Phase: wire.FetchDownloading, File: 1, Files: 1, DoneBytes: done, TotalBytes: total}
	}
	for _, tc := range []struct {
		name     string
		pods     []corev1.Pod
		progress map[string]wire.FetchProgress
		want     servingv1alpha1.ModelStatus
	}{
		{name: "no pods"},
		{name: "counts without progress",
			pods: []corev1.Pod{fetchPod("a", done), fetchPod("b", failed), fetchPod("c", running), fetchPod("d", nil)},
			want: servingv1alpha1.ModelStatus{PodsFetched: 1, PodsFailed: 1, PodsFetching: 2}},
		{name: "two downloads summed, a waiting pod and a finished pod's stale answer left out",
			pods: []corev1.Pod{fetchPod("a", running), fetchPod("b", running), fetchPod("c", running), fetchPod("d", done)},
			progress: map[string]wire.FetchProgress{
				"a": downloading(3<<30, 8<<30), "b": {Phase: wire.FetchDone, File: 1, Files: 1, DoneBytes: 8 << 30, TotalBytes: 8 << 30},
				"c": {Phase: wire.FetchWaiting, TotalBytes: -1}, "d": downloading(1, 8<<30),
			},
			want: servingv1alpha1.ModelStatus{PodsFetched: 1, PodsFetching: 3, PodsDownloading: 2,
				BytesDone: 11 << 30, BytesTotal: ptr.To[int64](16 << 30), DownloadPercent: ptr.To[int32](68)}},
		{name: "a size not known yet leaves the total out",
			pods:     []corev1.Pod{fetchPod("a", running), fetchPod("b", running)},
			progress: map[string]wire.FetchProgress{"a": downloading(5, 10), "b": downloading(7, -1)},
			want:     servingv1alpha1.ModelStatus{PodsFetching: 2, PodsDownloading: 2, BytesDone: 12}},
		{name: "an empty model is all there",
			pods:     []corev1.Pod{fetchPod("a", running)},
			progress: map[string]wire.FetchProgress{"a": downloading(0, 0)},
			want:     servingv1alpha1.ModelStatus{PodsFetching: 1, PodsDownloading: 1, BytesTotal: ptr.To[int64](0), DownloadPercent: ptr.To[int32](100)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, *modelStatus(tc.pods, tc.progress)); diff != "" {
				t.Errorf("modelStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeFetch(t *testing.T) {
	for _, tc := range []struct {
		p    wire.FetchProgress
		want string
	}{
		{wire.FetchProgress{Phase: wire.FetchResolving, TotalBytes: -1}, "asking the store for the model's files"},
		{wire.FetchProgress{Phase: wire.FetchDownloading, File: 1, Files: 1, DoneBytes: 512 << 10, TotalBytes: -1}, "downloading: 512.0 KiB"},
		{wire.FetchProgress{Phase: wire.FetchDownloading, File: 2, Files: 3, DoneBytes: 3 << 30, TotalBytes: 9 << 30}, "downloading: 3.0 GiB of 9.0 GiB (33%), file 2 of 3"},
		{wire.FetchProgress{Phase: wire.FetchDownloading, File: 1, Files: 1, DoneBytes: 0, TotalBytes: 0}, "downloading: 0 B of 0 B (0%)"},
		{wire.FetchProgress{Phase: wire.FetchDone, File: 1, Files: 1, DoneBytes: 1 << 40, TotalBytes: 1 << 40}, "downloaded 1.0 TiB"},
	} {
		if got := describeFetch(tc.p); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.p, got, tc.want)
		}
	}
}

// TestGetFetchProgressRefusesNonsense: a pod's answer is checked before it
// reaches the pool's status.
func TestGetFetchProgressRefusesNonsense(t *testing.T) {
	answer := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.FetchProgressPath {
			http.Redirect(w, r, wire.FetchProgressPath, http.StatusFound)
			return
		}
		io.WriteString(w, answer)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		answer, wantErr string
	}{
		{`{"phase":"downloading","file":1,"files":1,"doneBytes":5,"totalBytes":10}`, ""},
		{`{"phase":"exploding","doneBytes":5,"totalBytes":10}`, "unknown phase"},
		{`{"phase":"downloading","doneBytes":11,"totalBytes":10}`, "inconsistent"},
		{`{"phase":"downloading","doneBytes":-1,"totalBytes":-1}`, "inconsistent"},
		{`{"phase":"downloading","file":4,"files":3,"doneBytes":1,"totalBytes":-1}`, "inconsistent"},
		{`not json`, "invalid character"},
	} {
		answer = tc.answer
		_, err := getFetchProgress(context.Background(), progressClient, addr)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err %v, want %q", tc.answer, err, tc.wantErr)
		}
	}
	// A redirect is not followed.
	if _, err := getFetchProgress(context.Background(), progressClient, addr+"/x?"); err == nil || !strings.Contains(err.Error(), "302") {
		t.Errorf("a redirect: err %v, want the 302 refused", err)
	}
}

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
)

const (
	// defaultFetchProgressInterval is how often a pool whose pods fetch
	// its model is reconciled to read their progress: a pod's status does
	// not change while it downloads.
	defaultFetchProgressInterval = 10 * time.Second
	// fetchProgressTimeout bounds one read of a pod's progress.
	fetchProgressTimeout = 2 * time.Second
	// maxProgressPods is how many fetching pods are asked, and named in
	// the ModelReady condition, the first by name.
	maxProgressPods = 3
	// maxProgressBody bounds a progress answer.
	maxProgressBody = 4 << 10
)

// progressClient reads pods' progress. It follows no redirect: a pod's
// answer cannot send the manager elsewhere.
var progressClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// fetchProgress asks the pods whose fetch-model init container is running
// (the first maxProgressPods by name) for their download's progress, on the
// control port where the init container serves it, and returns what those
// that answered said, by pod name. A pod that does not answer is left out:
// the condition then says only that it is fetching.
func (r *InferencePoolReconciler) fetchProgress(ctx context.Context, pods []corev1.Pod) map[string]wire.FetchProgress {
	var fetching []*corev1.Pod
	for i := range pods {
		if st := fetchStatus(&pods[i]); st != nil && st.State.Running != nil {
			fetching = append(fetching, &pods[i])
		}
	}
	if len(fetching) == 0 {
		return nil
	}
	sort.Slice(fetching, func(i, j int) bool { return fetching[i].Name < fetching[j].Name })
	fetching = fetching[:min(len(fetching), maxProgressPods)]
	addrs := r.Addresses
	if addrs == nil {
		addrs = PodIPAddresses
	}
	client := r.HTTPClient
	if client == nil {
		client = progressClient
	}
	var mu sync.Mutex
	out := map[string]wire.FetchProgress{}
	var wg sync.WaitGroup
	for _, pod := range fetching {
		_, ctl := addrs(pod)
		if ctl == "" {
			continue
		}
		wg.Go(func() {
			p, err := getFetchProgress(ctx, client, ctl)
			if err != nil {
				log.FromContext(ctx).V(1).Info("no fetch progress", "pod", pod.Name, "err", err)
				return
			}
			mu.Lock()
			out[pod.Name] = p
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// getFetchProgress reads one pod's progress and checks it makes sense: the
// answer comes from the pod's network, so nothing in it is trusted beyond
// numbers and a known phase.
func getFetchProgress(ctx context.Context, client *http.Client, addr string) (wire.FetchProgress, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchProgressTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+wire.FetchProgressPath, nil)
	if err != nil {
		return wire.FetchProgress{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return wire.FetchProgress{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return wire.FetchProgress{}, fmt.Errorf("GET %s: %s", wire.FetchProgressPath, resp.Status)
	}
	var p wire.FetchProgress
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxProgressBody)).Decode(&p); err != nil {
		return wire.FetchProgress{}, fmt.Errorf("GET %s: %w", wire.FetchProgressPath, err)
	}
	switch {
	case p.Phase != wire.FetchResolving && p.Phase != wire.FetchWaiting && p.Phase != wire.FetchDownloading && p.Phase != wire.FetchDone:
		return wire.FetchProgress{}, fmt.Errorf("unknown phase %q", p.Phase)
	case p.DoneBytes < 0 || p.TotalBytes < -1 || p.TotalBytes >= 0 && p.DoneBytes > p.TotalBytes ||
		p.Files < 0 || p.File < 0 || p.File > p.Files:
		return wire.FetchProgress{}, fmt.Errorf("inconsistent progress %+v", p)
	}
	return p, nil
}

// describeFetch says where one pod's fetch is, for the ModelReady
// condition: "downloading: 12.3 GiB of 40.1 GiB (31%)".
func describeFetch(p wire.FetchProgress) string {
	switch p.Phase {
	case wire.FetchResolving:
		return "asking the store for the model's files"
	case wire.FetchWaiting:
		return "waiting for another pod's download of the same model to the shared cache"
	case wire.FetchDone:
		return "downloaded " + formatBytes(p.DoneBytes)
	}
	s := "downloading: " + formatBytes(p.DoneBytes)
	if p.TotalBytes >= 0 {
		pct := 100 * float64(p.DoneBytes) / float64(max(p.TotalBytes, 1))
		s += fmt.Sprintf(" of %s (%d%%)", formatBytes(p.TotalBytes), int(pct))
	}
	if p.Files > 1 {
		s += fmt.Sprintf(", file %d of %d", p.File, p.Files)
	}
	return s
}

// formatBytes writes n in binary units with one decimal: 12.3 GiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

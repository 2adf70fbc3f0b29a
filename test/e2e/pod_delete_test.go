//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// drainPool's pods drain for 2 s after SIGTERM and then abort what still
// runs.
var drainPool = simPool{name: "drain-sim"}

// TestDeletedPodIsReplacedAndItsRequestsFailCleanly deletes a pod with
// long streams in flight: the streams end with an OpenAI error event
// within the drain timeout (not a hang or a torn connection), a retry on
// another pod succeeds, and the Deployment replaces the pod.
func TestDeletedPodIsReplacedAndItsRequestsFailCleanly(t *testing.T) {
	ns := newNamespace(t, "e2e-delete")
	applyYAML(t, ns, drainPool.manifest())
	pods := readyPods(t, ns, "drain-sim", 2)
	victim, survivor := pods[0], pods[1]

	type streamEnd struct {
		program      string
		chunks       int
		errorEvent   bool
		done         bool
		readErr      error
		afterDeleted time.Duration
	}
	const streams = 3
	started := make(chan struct{}, streams)
	ends := make(chan streamEnd, streams)
	var deletedAt time.Time
	deleted := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range streams {
		id := fmt.Sprintf("long-%d", i)
		go func() {
			e := streamEnd{program: id}
			defer func() { ends <- e }()
			body := `{"model":"llama-3.1-8b","prompt":"Tell me a very long story","max_tokens":4000,"ignore_eos":true,"stream":true}`
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+victim.Status.PodIP+":8000/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Program-Id", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				e.readErr = err
				started <- struct{}{}
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				switch {
				case data == "[DONE]":
					e.done = true
				case strings.HasPrefix(data, `{"error"`):
					e.errorEvent = true
				default:
					if e.chunks++; e.chunks == 1 {
						started <- struct{}{}
					}
				}
			}
			e.readErr = sc.Err()
			<-deleted
			e.afterDeleted = time.Since(deletedAt)
		}()
	}
	for range streams {
		<-started
	}
	deletedAt = time.Now()
	mustKubectl(t, "delete", "pod", "-n", ns, victim.Name, "--wait=false")
	close(deleted)

	for range streams {
		e := <-ends
		if e.chunks == 0 || !e.errorEvent || !e.done || e.readErr != nil {
			t.Errorf("%s: %d chunks, error event %v, [DONE] %v, read error %v: want tokens, then an error event and [DONE]",
				e.program, e.chunks, e.errorEvent, e.done, e.readErr)
		}
		// Drain timeout 2 s, after the pod template's preStop sleep of 5 s
		// (the kubelet runs it; the node agent does not), plus the time the
		// node takes to see the deletion and the pod to abort.
		t.Logf("%s ended %v after the deletion", e.program, e.afterDeleted.Round(time.Millisecond))
		if e.afterDeleted > 15*time.Second {
			t.Errorf("%s ended %v after the deletion; the drain timeout is 2 s", e.program, e.afterDeleted)
		}
		// The client retries on another pod of the pool.
		resp, err := http.Post("http://"+survivor.Status.PodIP+":8000/v1/completions", "application/json",
			strings.NewReader(`{"model":"llama-3.1-8b","prompt":"Tell me a short story","max_tokens":16}`))
		if err != nil {
			t.Fatalf("retry of %s: %v", e.program, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("retry of %s: status %d: %s", e.program, resp.StatusCode, b)
		}
	}

	// The Deployment replaces the pod; the old one is gone once its
	// process has stopped.
	replaced := readyPods(t, ns, "drain-sim", 2)
	for _, p := range replaced {
		if p.Name == victim.Name {
			t.Errorf("deleted pod %s is still there", victim.Name)
		}
	}
	// On a real node a pod's address is gone with its network namespace:
	// a connection to it is not refused but goes unanswered.
	probe := &http.Client{Timeout: 5 * time.Second}
	if _, err := probe.Get("http://" + victim.Status.PodIP + ":8000/health"); err == nil && !podIPReused(replaced, victim.Status.PodIP) {
		t.Errorf("the deleted pod's process still answers on %s", victim.Status.PodIP)
	}
}

func podIPReused(pods []corev1.Pod, ip string) bool {
	for _, p := range pods {
		if p.Status.PodIP == ip {
			return true
		}
	}
	return false
}

//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	utiltesting "github.com/kvpilot/kvpilot/internal/util/testing"
)

// programsManifest is a program-aware pool of two simulated H100 pods with
// room for 1,024 KV tokens each (64 blocks of 16), so a handful of agent
// programs overflow one pod, and a host KV tier of 128 blocks each, where
// paused programs' KV goes; the policy runs a round every second.
const programsManifest = `
apiVersion: serving.kvpilot.dev/v1alpha1
kind: SchedulerPolicy
metadata:
  name: agents-fast
spec:
  mode: ProgramAware
  interval: 1s
  actingTokenWeight: "1"
  bufferTokensPerProgram: 100
  maxPauseDuration: 2m
  # The test needs pauses: with the host tier holding acting programs' KV
  # or taking the device's overflow (the defaults), this handful of
  # programs would all fit.
  actingOnHost: false
  deviceOvercommitPercent: 100
  # The test checks resumes across pods: no waiting for the pod whose host
  # tier holds a paused program's KV.
  fairness:
    cacheAffinityWait: 0s
---
apiVersion: serving.kvpilot.dev/v1alpha1
kind: InferencePool
metadata:
  name: agents-sim
spec:
  replicas: 2
  model:
    name: llama-3.1-8b
    source:
      builtin: tiny
  executor:
    type: Sim
    sim:
      accelerator: H100-SXM
      model: llama-3.1-8b
  engine:
    blockSize: 16
    kvCacheBlocks: 64
    kvHostBlocks: 128
    drainTimeout: 2s
  schedulerPolicyRef:
    name: agents-fast
`

// outTokens is every agent step's output: ~0.4 s of simulated H100 decode,
// so rounds see programs reasoning as well as acting.
const outTokens = 48

// TestProgramAwarePausesResumesAcrossPods runs more agent programs than
// one pod holds, every request sent to the same pod as if a Service always
// picked it: the fleet loop must pause programs and resume them on the
// other pod (visible in the pool's status and the manager's metrics), and
// every held request must complete. Midway the manager is restarted: no
// program the pods know is lost, and the new manager carries on.
func TestProgramAwarePausesResumesAcrossPods(t *testing.T) {
	ns := newNamespace(t, "e2e-programs")
	applyYAML(t, ns, programsManifest)
	pods := readyPods(t, ns, "agents-sim", 2)
	podA, podB := pods[0].Status.PodIP, pods[1].Status.PodIP
	token := controlToken(t, ns, "agents-sim")

	// Watch the pool's status and the manager's kvpilot_programs gauge for
	// paused programs.
	var maxPaused, maxPausedMetric atomic.Int32
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go func() {
		for i := 0; watchCtx.Err() == nil; i++ {
			pool := &servingv1alpha1.InferencePool{}
			if err := env.client.Get(watchCtx, client.ObjectKey{Namespace: ns, Name: "agents-sim"}, pool); err == nil && pool.Status.Capacity != nil {
				if p := pool.Status.Capacity.ProgramsPaused; p > maxPaused.Load() {
					maxPaused.Store(p)
				}
			}
			if i%3 == 0 {
				if p := int32(scrapePausedGauge(currentManager().MetricsURL, ns, "agents-sim")); p > maxPausedMetric.Load() {
					maxPausedMetric.Store(p)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	// Long enough (8 steps, 0.4 s tools) that no program has finished
	// when the manager restarts, early in the run.
	const programs, steps = 6, 8
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		program       string
		step, tokens  int
		servedBy, err string
	}
	results := make(chan result, programs*steps)
	var released sync.Map // program → time its release was sent
	var wg sync.WaitGroup
	for i := range programs {
		id := fmt.Sprintf("agent-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctxLen := 200
			for s := 1; s <= steps; s++ {
				got, err := utiltesting.AgentStep(ctx, podA+":8000", id, ctxLen, outTokens)
				r := result{program: id, step: s, tokens: got.Tokens, servedBy: got.ServedBy}
				if err != nil {
					r.err = err.Error()
				}
				results <- r
				if err != nil {
					return
				}
				ctxLen += outTokens + 24           // the output and a tool's result
				time.Sleep(400 * time.Millisecond) // acting: a tool runs
			}
			released.Store(id, time.Now())
			resp, err := http.Post("http://"+podA+":8000/programs/release", "application/json", strings.NewReader(fmt.Sprintf(`{"program_id":%q}`, id)))
			if err == nil {
				resp.Body.Close()
			}
		}()
	}

	// Restart the manager once a pause shows in the pool's status.
	eventually(t, 60*time.Second, func() string {
		if maxPaused.Load() == 0 {
			return "no paused program in the pool's status.capacity.programsPaused"
		}
		return ""
	})
	first := currentManager()
	firstCounts := scrapeFleetCounters(t, first.MetricsURL, ns, "agents-sim")
	before := programTables(t, token, podA, podB)
	if len(before) == 0 {
		t.Fatal("the pods report no programs before the manager restart")
	}
	first.Stop(15 * time.Second)
	time.Sleep(time.Second) // no controller: the pods keep serving on their last placement
	if err := startManager(context.Background()); err != nil {
		t.Fatalf("restart manager: %v", err)
	}
	time.Sleep(2500 * time.Millisecond) // a few rounds of the new leader
	after := programTables(t, token, podA, podB)
	afterAt := time.Now()
	t.Logf("programs before the manager restart %v, after %v", before, after)
	compared := 0
	for id, st := range before {
		if at, ok := released.Load(id); (ok && at.(time.Time).Before(afterAt)) || st == "TERMINATED" {
			continue // the client ended it
		}
		compared++
		if got, ok := after[id]; !ok || got == "TERMINATED" {
			t.Errorf("program %s was %s before the manager restart, %q after: its state was lost", id, st, got)
		}
	}
	if compared == 0 {
		t.Errorf("every program ended before the manager restart was checked: the workload is too short")
	}

	wg.Wait()
	close(results)
	done := map[string]int{}
	forwarded := 0
	for r := range results {
		if r.err != "" {
			t.Errorf("%s step %d: %s", r.program, r.step, r.err)
			continue
		}
		if r.tokens != outTokens {
			t.Errorf("%s step %d: %d tokens, want %d", r.program, r.step, r.tokens, outTokens)
		}
		done[r.program]++
		if strings.HasPrefix(r.servedBy, podB+":") {
			forwarded++
		}
	}
	for i := range programs {
		if id := fmt.Sprintf("agent-%d", i); done[id] != steps {
			t.Errorf("%s completed %d of %d steps", id, done[id], steps)
		}
	}
	if forwarded == 0 {
		t.Errorf("no request sent to pod A was served by pod B: nothing was resumed there")
	}

	secondCounts := scrapeFleetCounters(t, currentManager().MetricsURL, ns, "agents-sim")
	pauses := firstCounts["kvpilot_program_pauses_total"] + secondCounts["kvpilot_program_pauses_total"]
	resumes := firstCounts["kvpilot_program_resumes_total"] + secondCounts["kvpilot_program_resumes_total"]
	// A pause shows as kvpilot_program_pauses_total (an acting program
	// paused) or, for a reasoning program marked to pause when its request
	// ends, in kvpilot_programs{state="paused"}.
	if (pauses == 0 && maxPausedMetric.Load() == 0) || resumes == 0 {
		t.Errorf("manager metrics: %v pauses, at most %d programs paused, %v resumes; want pauses and resumes",
			pauses, maxPausedMetric.Load(), resumes)
	}
	t.Logf("at most %d programs paused in the pool's status, %d in kvpilot_programs; pauses %v, resumes %v (both managers); %d of %d programs' states compared across the restart; %d requests served by pod B",
		maxPaused.Load(), maxPausedMetric.Load(), pauses, resumes, compared, len(before), forwarded)

	// Pauses went through the host tier: the pods copied KV blocks out
	// (vLLM's offload counter), and the status counts the tier apart.
	var out, in float64
	for _, ip := range []string{podA, podB} {
		o, i := scrapeOffloadBytes(t, "http://"+ip+":8000/metrics")
		out, in = out+o, in+i
	}
	if out == 0 {
		t.Errorf("programs were paused but no KV byte was copied to a host tier")
	}
	t.Logf("host tier: %.0f bytes copied out, %.0f copied back", out, in)

	// Every program was released: the new manager's status says nothing
	// runs or waits.
	eventually(t, statusTimeout, func() string {
		c := getPool(t, ns, "agents-sim").Status.Capacity
		if c == nil || c.ProgramsActive != 0 || c.ProgramsPaused != 0 || c.HostKVTokens != 2*128*16 {
			return fmt.Sprintf("status.capacity after every release (want host tier 4096 tokens): %+v", c)
		}
		return ""
	})
}

// controlToken reads the bearer token of a pool's control API from the
// Secret the operator made.
func controlToken(t *testing.T, ns, pool string) string {
	t.Helper()
	s, err := env.kube.CoreV1().Secrets(ns).Get(context.Background(), pool+"-control", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(s.Data["token"]))
	if tok == "" {
		t.Fatalf("secret %s-control has no token", pool)
	}
	return tok
}

// programTables reads the pods' program tables over the control API and
// returns each program's state, preferring the pod it is placed on.
func programTables(t *testing.T, token string, ips ...string) map[string]string {
	t.Helper()
	states := map[string]string{}
	for _, ip := range ips {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ip+":8081/v1/state", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("state of %s: %v", ip, err)
		}
		var rep struct {
			Programs []struct {
				ID     string `json:"id"`
				State  string `json:"state"`
				Placed bool   `json:"placed"`
			} `json:"programs"`
		}
		err = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("state of %s: %v", ip, err)
		}
		for _, p := range rep.Programs {
			if _, seen := states[p.ID]; !seen || p.Placed {
				states[p.ID] = p.State
			}
		}
	}
	return states
}

// scrapePausedGauge reads kvpilot_programs{state="paused"} of a pool; 0
// when the manager cannot be reached (it may be restarting).
func scrapePausedGauge(url, ns, pool string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m != nil && m[1] == "kvpilot_programs" && strings.Contains(m[2], `state="paused"`) &&
			strings.Contains(m[2], fmt.Sprintf(`namespace="%s"`, ns)) && strings.Contains(m[2], fmt.Sprintf(`pool="%s"`, pool)) {
			v, _ := strconv.ParseFloat(m[3], 64)
			return v
		}
	}
	return 0
}

var sampleLine = regexp.MustCompile(`^([a-z_:]+)\{([^}]*)\} ([0-9.e+-]+)$`)

// scrapeOffloadBytes reads a runtime pod's vllm:kv_offload_total_bytes_total
// by direction: to host (GPU_to_CPU) and back (CPU_to_GPU).
func scrapeOffloadBytes(t *testing.T, url string) (out, in float64) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != "vllm:kv_offload_total_bytes_total" {
			continue
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		switch {
		case strings.Contains(m[2], `transfer_type="GPU_to_CPU"`):
			out += v
		case strings.Contains(m[2], `transfer_type="CPU_to_GPU"`):
			in += v
		}
	}
	return out, in
}

// scrapeFleetCounters reads the fleet loop's counters of one pool from the
// manager's metrics.
func scrapeFleetCounters(t *testing.T, url, ns, pool string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	want := fmt.Sprintf(`namespace="%s"`, ns)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || !strings.Contains(m[2], want) || !strings.Contains(m[2], fmt.Sprintf(`pool="%s"`, pool)) {
			continue
		}
		if v, err := strconv.ParseFloat(m[3], 64); err == nil {
			out[m[1]] += v
		}
	}
	return out
}

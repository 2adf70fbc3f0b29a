package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
	"github.com/kvpilot/kvpilot/internal/util/testing/agentclient"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
	"github.com/kvpilot/kvpilot/internal/util/testing/runtimeproc"
)

// This file runs real runtime processes (the cmd/runtime binary, sim
// executor in real time) on loopback, with the fleet loop against them.

// proc is one runtime process.
type proc struct{ *runtimeproc.Pod }

// startPod runs one runtime process with a KV cache of kvBlocks × 16 tokens.
func startPod(t *testing.T, name string, kvBlocks int, extra ...string) *proc {
	t.Helper()
	return &proc{runtimeproc.StartPod(t, runtimeproc.PodOptions{
		Options: runtimeproc.Options{
			Name: name,
			Args: append([]string{"--sim-accelerator", "H100-SXM", "--sim-model", "llama-3.1-8b",
				"--kv-cache-blocks", fmt.Sprint(kvBlocks), "--block-size", "16", "--max-model-len", "4096",
				"--warmup-iterations", "0", "--drain-timeout", "5s"}, extra...),
			StopTimeout: 10 * time.Second,
		},
		ControlToken: token,
		ReadyTimeout: 30 * time.Second,
	})}
}

func (p *proc) fleetPod() Pod {
	return Pod{Name: p.Name, APIAddr: p.API, ControlAddr: p.Control, Ready: true}
}

type stepResult struct {
	program  string
	step     int
	servedBy string
	tokens   int
	cached   int // prompt tokens found in the prefix cache (--enable-prompt-tokens-details)
	err      error
}

// outTokens is every request's output: long enough (~0.4 s of simulated
// H100 decode) that rounds see programs REASONING as well as ACTING.
const outTokens = 48

// step sends one request of a program to pod addr: a prompt of n tokens
// (the program's growing context) and outTokens output tokens.
func step(ctx context.Context, addr, program string, n, stepNo int) stepResult {
	return stepN(ctx, addr, program, n, stepNo, outTokens)
}

func stepN(ctx context.Context, addr, program string, n, stepNo, maxTokens int) stepResult {
	r, err := agentclient.Step(ctx, addr, program, n, maxTokens)
	return stepResult{program: program, step: stepNo, servedBy: r.ServedBy, tokens: r.Tokens, cached: r.CachedTokens, err: err}
}

// loop runs fleet rounds every interval until stopped.
func loop(ctx context.Context, f *Fleet, pods []Pod, every time.Duration, sums chan<- *Summary) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s, _ := f.Round(ctx, pods, time.Now())
			if s != nil && sums != nil {
				select {
				case sums <- s:
				default:
				}
			}
		}
	}
}

func TestProcessesPauseResumeAcrossPods(t *testing.T) {
	if testing.Short() {
		t.Skip("starts runtime processes")
	}
	// 1,024 KV tokens each, and a host tier: the fleet loop's pauses copy
	// the paused programs' KV to host memory.
	a := startPod(t, "pod-a", 64, "--kv-host-blocks", "128")
	b := startPod(t, "pod-b", 64, "--kv-host-blocks", "128")
	pods := []Pod{a.fleetPod(), b.fleetPod()}
	policy := placement.DefaultPolicy()
	// This test is about moving programs across pods: with the cache
	// affinity wait a program paused on a waits up to a minute for a's
	// room (its KV is in a's host tier) instead of going to b.
	policy.CacheAffinityWait = 0
	// And pod a must overflow: at the default overcommit (400%) its host
	// tier (2,048 tokens) would take all six programs.
	policy.DeviceOvercommit = 2
	client := controlclient.New(token, 2*time.Second)
	f, err := New(policy, client, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var totals struct {
		sync.Mutex
		pauses, marks, resumes int
	}
	sums := make(chan *Summary, 64)
	go func() {
		for s := range sums {
			totals.Lock()
			totals.pauses += s.Pauses
			totals.marks += s.Marks
			totals.resumes += s.Resumes
			totals.Unlock()
		}
	}()
	loopCtx, stopLoop := context.WithCancel(ctx)
	var leader atomic.Pointer[Fleet]
	leader.Store(f)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		// The first leader runs for a while, then the controller restarts:
		// a new leader with no state rebuilds everything from the pods.
		first, cancelFirst := context.WithTimeout(loopCtx, 1500*time.Millisecond)
		loop(first, f, pods, 150*time.Millisecond, sums)
		cancelFirst()
		time.Sleep(400 * time.Millisecond) // no controller: pods keep serving
		next, err := New(policy, client, nil)
		if err != nil {
			panic(err)
		}
		leader.Store(next)
		loop(loopCtx, next, pods, 150*time.Millisecond, sums)
	}()

	// Six programs, every request sent to pod a (as if the Service always
	// picked it): 6 × (~300 + 100 buffer) tokens overflow one pod's 1,024.
	const programs, steps = 6, 4
	results := make(chan stepResult, programs*steps)
	var wg sync.WaitGroup
	for i := range programs {
		id := fmt.Sprintf("agent-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctxLen := 200
			for s := 1; s <= steps; s++ {
				r := step(ctx, a.API, id, ctxLen, s)
				results <- r
				if r.err != nil {
					return
				}
				ctxLen += outTokens + 24           // the output and a tool result
				time.Sleep(200 * time.Millisecond) // acting: a tool runs
			}
			// Done: release it (through pod a, whichever pod runs it).
			body := fmt.Sprintf(`{"program_id":%q}`, id)
			if resp, err := http.Post("http://"+a.API+"/programs/release", "application/json", strings.NewReader(body)); err == nil {
				b, _ := io.ReadAll(resp.Body)
				if !strings.Contains(string(b), `"released":true`) {
					t.Errorf("release %s: %s", id, b)
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	close(results)
	stopLoop()
	<-loopDone

	seen := map[string]int{}
	forwarded := 0
	for r := range results {
		if r.err != nil {
			t.Errorf("%s step %d: %v", r.program, r.step, r.err)
			continue
		}
		if r.tokens != outTokens {
			t.Errorf("%s step %d: %d tokens", r.program, r.step, r.tokens)
		}
		seen[r.program]++
		if r.servedBy == b.API {
			forwarded++
		}
	}
	for i := range programs {
		if id := fmt.Sprintf("agent-%d", i); seen[id] != steps {
			t.Errorf("%s completed %d of %d steps: a request was lost or duplicated", id, seen[id], steps)
		}
	}
	totals.Lock()
	defer totals.Unlock()
	if totals.pauses+totals.marks == 0 || totals.resumes == 0 {
		t.Errorf("overflowing pod a should pause or mark programs and resume them: pauses %d marks %d resumes %d",
			totals.pauses, totals.marks, totals.resumes)
	}
	if forwarded == 0 {
		t.Errorf("no request was forwarded to pod b")
	}
	t.Logf("pauses %d, marks %d, resumes %d, %d requests forwarded to pod b", totals.pauses, totals.marks, totals.resumes, forwarded)
	if out, _ := offloadBlocks(t, a.API); out == 0 {
		t.Errorf("pod a paused programs but copied no KV block to its host tier")
	}

	// Released programs end on the pods that ran them (one more round
	// carries releases made through another pod).
	if _, err := leader.Load().Round(context.Background(), pods, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{a, b} {
		rep, err := client.State(context.Background(), p.Control)
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range rep.Programs {
			if pr.Placed && pr.State != "TERMINATED" {
				t.Errorf("%s: %s still %s after release", p.Name, pr.ID, pr.State)
			}
		}
	}
}

func TestProcessesForceResumeWithoutController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts runtime processes")
	}
	a := startPod(t, "pod-a", 64)
	client := controlclient.New(token, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The program runs a step, then a controller pauses it and goes away.
	if r := step(ctx, a.API, "lonely", 200, 1); r.err != nil {
		t.Fatal(r.err)
	}
	f, _ := New(placement.DefaultPolicy(), client, nil)
	if _, err := f.Round(ctx, []Pod{a.fleetPod()}, time.Now()); err != nil {
		t.Fatal(err)
	}
	v := f.version + 1
	res, err := client.Push(ctx, a.Control, &wire.Placement{Version: v, Pause: []string{"lonely"}, MaxPauseSeconds: 1})
	if err != nil || !res.Applied {
		t.Fatalf("pause push: %+v %v", res, err)
	}
	start := time.Now()
	r := step(ctx, a.API, "lonely", 240, 2)
	if r.err != nil {
		t.Fatalf("held request after the pause limit: %v", r.err)
	}
	if held := time.Since(start); held < 900*time.Millisecond {
		t.Errorf("request answered after %v: it should have been held until the 1 s pause limit", held)
	}
}

func TestProcessesMarkReasoningProgramsAndMoveThem(t *testing.T) {
	if testing.Short() {
		t.Skip("starts runtime processes")
	}
	a := startPod(t, "pod-a", 64)
	b := startPod(t, "pod-b", 64)
	pods := []Pod{a.fleetPod(), b.fleetPod()}
	client := controlclient.New(token, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Four long requests run on pod a at once: 4 × (200 + 100) tokens of
	// REASONING programs on a 1,024-token pod, none ACTING to pause. (The
	// gate admits the fourth: 124 tokens were left, above the buffer.)
	ids := []string{"r-0", "r-1", "r-2", "r-3"}
	done := make(chan stepResult, len(ids))
	for _, id := range ids {
		go func() { done <- stepN(ctx, a.API, id, 200, 1, 250) }()
	}
	poll.UntilOK(t, 10*time.Second, func() string {
		rep, err := client.State(ctx, a.Control)
		if err != nil {
			return err.Error()
		}
		n := 0
		for _, p := range rep.Programs {
			if p.Status == "REASONING" && p.ContextTokens == 200 {
				n++
			}
		}
		if n != len(ids) {
			return fmt.Sprintf("requests not all running: %+v", rep.Programs)
		}
		return ""
	})
	f, _ := New(placement.DefaultPolicy(), client, nil)
	sum, err := f.Round(ctx, pods, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Marks == 0 || sum.Pauses != 0 {
		t.Fatalf("REASONING programs must be marked, not paused: %+v", sum)
	}
	var marked []string
	rep, _ := client.State(ctx, a.Control)
	for _, p := range rep.Programs {
		if p.MarkedForPause {
			marked = append(marked, p.ID)
		}
	}
	if len(marked) != sum.Marks {
		t.Fatalf("pod a reports %v marked, the round marked %d", marked, sum.Marks)
	}
	// The marked programs pause when their requests end; every request
	// still completes.
	for range ids {
		if r := <-done; r.err != nil || r.tokens != 250 {
			t.Fatalf("%s: %d tokens, %v", r.program, r.tokens, r.err)
		}
	}
	rep, _ = client.State(ctx, a.Control)
	for _, p := range rep.Programs {
		if slices.Contains(marked, p.ID) != (p.State == "PAUSED") {
			t.Errorf("%s: state %s (marked %v)", p.ID, p.State, slices.Contains(marked, p.ID))
		}
	}
	// The next round resumes them on pod b; their next request, sent to
	// pod a, is forwarded there.
	if sum, err = f.Round(ctx, pods, time.Now()); err != nil || sum.Resumes != len(marked) {
		t.Fatalf("resume round: %+v %v", sum, err)
	}
	r := stepN(ctx, a.API, marked[0], 480, 2, 8)
	if r.err != nil || r.servedBy != b.API {
		t.Fatalf("moved program's request: served by %q (pod b is %s), %v", r.servedBy, b.API, r.err)
	}
}

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

// programsPool is a program-aware pool of two simulated H100 pods with
// room for 1,024 KV tokens each (64 blocks of 16), so a handful of agent
// programs overflow one pod, and a host KV tier of 128 blocks each, where
// paused programs' KV goes.
var programsPool = simPool{
	name: "agents-sim", kvBlocks: 64, hostBlocks: 128,
	policy: "agents-fast",
	policySpec: `  actingTokenWeight: "1"
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
`,
}

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
	applyYAML(t, ns, programsPool.manifest())
	pods := readyPods(t, ns, "agents-sim", 2)
	podA, podB := pods[0].Status.PodIP, pods[1].Status.PodIP
	token := controlToken(t, ns, "agents-sim")

	// Watch the pool's status and the manager's kvpilot_programs gauge for
	// paused programs.
	var maxPaused, maxPausedMetric atomic.Int32
	polls := 0
	stopWatch := every(100*time.Millisecond, func(ctx context.Context) {
		pool := &servingv1alpha1.InferencePool{}
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agents-sim"}, pool); err == nil && pool.Status.Capacity != nil {
			storeMax(&maxPaused, pool.Status.Capacity.ProgramsPaused)
		}
		if polls++; polls%3 == 1 {
			storeMax(&maxPausedMetric, int32(scrapePausedGauge(currentManager().MetricsURL, ns, "agents-sim")))
		}
	})
	defer stopWatch()

	// Long enough (8 steps, 0.4 s tools) that no program has finished
	// when the manager restarts, early in the run.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var released sync.Map // program → time its release was sent
	w := &agentWorkload{
		programs: 6, steps: 8,
		firstContext: 200, outTokens: outTokens, toolTokens: 24, toolTime: 400 * time.Millisecond,
		addr:          func(int) string { return podA + ":8000" },
		beforeRelease: func(id string) { released.Store(id, time.Now()) },
	}
	wait := w.start(ctx)

	// Restart the manager once a pause shows in the pool's status.
	poll.UntilOK(t, 60*time.Second, func() string {
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
	restartAt := time.Now()
	if err := restartManager(context.Background()); err != nil {
		t.Fatalf("restart manager: %v", err)
	}
	t.Logf("manager restarted in %v", time.Since(restartAt).Round(time.Millisecond))
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

	results := wait()
	w.check(t, results)
	forwarded := 0
	for _, r := range results {
		if r.err == "" && strings.HasPrefix(r.ServedBy, podB+":") {
			forwarded++
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
	poll.UntilOK(t, statusTimeout, func() string {
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

// podState reads a runtime pod's report (its KV cache and program table)
// from its control API.
func podState(ctx context.Context, token, ip string) (*wire.Report, error) {
	rep, err := controlclient.New(token, 5*time.Second).State(ctx, ip+":8081")
	if err != nil {
		return nil, fmt.Errorf("state of %s: %w", ip, err)
	}
	return rep, nil
}

// programTables reads the pods' program tables over the control API and
// returns each program's state, preferring the pod it is placed on.
func programTables(t *testing.T, token string, ips ...string) map[string]string {
	t.Helper()
	states := map[string]string{}
	for _, ip := range ips {
		rep, err := podState(context.Background(), token, ip)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rep.Programs {
			if _, seen := states[p.ID]; !seen || p.Placed {
				states[p.ID] = p.State
			}
		}
	}
	return states
}

// storeMax raises m to v if v is larger.
func storeMax(m *atomic.Int32, v int32) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

// hostTierPool is a ProgramAware pool of two simulated H100 pods with
// 1,024 device KV tokens each (64 blocks of 16) and a host KV tier of 256
// blocks each, under a policy that leaves actingOnHost and
// deviceOvercommitPercent to their defaults (true, 400).
var hostTierPool = simPool{name: "agents-host", kvBlocks: 64, hostBlocks: 256, policy: "agents-defaults"}

// TestHostTierDefaultsRunPastDeviceKV runs, under the SchedulerPolicy
// defaults, more agent programs than the pods' device KV holds: three per
// pod whose contexts reach 3 × 536 = 1,608 tokens on 1,024-token devices.
// With actingOnHost, programs in a tool call are charged only their
// 100-token buffer (their KV fits the 4,096-token host tier), and with the
// 400% overcommit a pod may be charged 4,096 tokens, more than three
// reasoning programs ever take (3 × (488 + 100) = 1,764): no program is
// paused or marked, every step completes once with its tokens, and the
// device's overflow goes through the host tier (blocks spilled there and
// restored from it, prompt tokens found on the host). Without the
// overcommit the same load pauses programs (the second step's 3 × (272 +
// 100) = 1,116 tokens pass 1,024); without actingOnHost the pods are
// charged the programs' whole contexts while they are in a tool call.
func TestHostTierDefaultsRunPastDeviceKV(t *testing.T) {
	ns := newNamespace(t, "e2e-hosttier")
	applyYAML(t, ns, hostTierPool.manifest())

	// The API server applied the defaults this test is about.
	policy := &servingv1alpha1.SchedulerPolicy{}
	if err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: hostTierPool.policy}, policy); err != nil {
		t.Fatal(err)
	}
	if p := policy.Spec.ActingOnHost; p == nil || !*p {
		t.Fatalf("spec.actingOnHost read back as %v, want the default true", fmtPtr(p))
	}
	if p := policy.Spec.DeviceOvercommitPercent; p == nil || *p != 400 {
		t.Fatalf("spec.deviceOvercommitPercent read back as %v, want the default 400", fmtPtr(p))
	}

	pods := readyPods(t, ns, hostTierPool.name, 2)
	ips := []string{pods[0].Status.PodIP, pods[1].Status.PodIP}
	token := controlToken(t, ns, hostTierPool.name)
	const deviceTokens, buffer = 64 * 16, 100

	// Watch the pods' program tables and the pool's status for any program
	// paused or marked for pause.
	var maxPaused, maxMarked atomic.Int32
	var watchErrs sync.Map // pod IP → last error reading its state
	stopWatch := every(100*time.Millisecond, func(ctx context.Context) {
		for _, ip := range ips {
			rep, err := podState(ctx, token, ip)
			if err != nil {
				if ctx.Err() == nil {
					watchErrs.Store(ip, err)
				}
				continue
			}
			var paused, marked int32
			for _, p := range rep.Programs {
				if p.State == "PAUSED" {
					paused++
				}
				if p.MarkedForPause {
					marked++
				}
			}
			storeMax(&maxPaused, paused)
			storeMax(&maxMarked, marked)
		}
		pool := &servingv1alpha1.InferencePool{}
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: hostTierPool.name}, pool); err == nil && pool.Status.Capacity != nil {
			storeMax(&maxPaused, pool.Status.Capacity.ProgramsPaused)
		}
	})
	defer stopWatch()

	// Program i sends every request to pod i%2, as a Service with session
	// affinity would: three programs start on each pod. After its last
	// step a program stays in its tool call until every program is there.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var finished sync.WaitGroup
	release := make(chan struct{})
	w := &agentWorkload{
		programs: 6, steps: 5,
		firstContext: 200, outTokens: outTokens, toolTokens: 24, toolTime: 400 * time.Millisecond,
		addr: func(i int) string { return ips[i%2] + ":8000" },
		beforeRelease: func(string) {
			finished.Done()
			select {
			case <-release:
			case <-ctx.Done():
			}
		},
	}
	finished.Add(w.programs)
	wait := w.start(ctx)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	if !waitGroupWithin(&finished, 60*time.Second) {
		close(release)
		released = true
		w.check(t, wait())
		t.Fatalf("the programs did not all reach their last tool call within 60s; at most %d paused and %d marked for pause (want none)",
			maxPaused.Load(), maxMarked.Load())
	}

	// Every program is in its last tool call, its whole context placed on
	// its pod: more than the device holds. Two rounds later the manager
	// charges each pod only the programs' buffers, their KV being on the
	// host tier (actingOnHost).
	mgr := currentManager().MetricsURL
	roundsBefore := sumSamples(mustScrape(t, mgr), "kvpilot_fleet_round_duration_seconds_count", poolLabels(ns, hostTierPool.name)...)
	for i, ip := range ips {
		rep, err := podState(context.Background(), token, ip)
		if err != nil {
			t.Fatal(err)
		}
		var placed int64
		for _, p := range rep.Programs {
			if p.Placed && p.State == "ACTIVE" {
				placed += p.ContextTokens
			}
		}
		if placed <= deviceTokens {
			t.Errorf("pod %s: %d context tokens placed, want more than its %d device KV tokens: the workload does not overflow the device", pods[i].Name, placed, deviceTokens)
		}
		t.Logf("pod %s: %d context tokens placed in a tool call, device %d", pods[i].Name, placed, deviceTokens)
	}
	poll.UntilOK(t, statusTimeout, func() string {
		n := sumSamples(mustScrape(t, mgr), "kvpilot_fleet_round_duration_seconds_count", poolLabels(ns, hostTierPool.name)...)
		if n < roundsBefore+2 {
			return fmt.Sprintf("%v fleet rounds since every program reached its tool call, want 2", n-roundsBefore)
		}
		return ""
	})
	fleetSamples := mustScrape(t, mgr)
	for _, pod := range pods {
		labels := append(poolLabels(ns, hostTierPool.name), fmt.Sprintf(`pod="%s"`, pod.Name))
		charged := sumSamples(fleetSamples, "kvpilot_pod_kv_placed_tokens", labels...)
		device := sumSamples(fleetSamples, "kvpilot_pod_kv_capacity_tokens", labels...)
		if want := float64(w.programs / 2 * buffer); charged != want || device != deviceTokens {
			t.Errorf("pod %s: kvpilot_pod_kv_placed_tokens %v of kvpilot_pod_kv_capacity_tokens %v while its programs are in a tool call; want %v (their buffers: their KV is on the host tier) of %d",
				pod.Name, charged, device, want, deviceTokens)
		}
	}
	close(release)
	released = true
	results := wait()
	stopWatch()
	w.check(t, results)
	watchErrs.Range(func(ip, err any) bool {
		t.Logf("reading the state of pod %s failed at least once: %v", ip, err)
		return true
	})

	// Nothing was paused for the overflow.
	if maxPaused.Load() != 0 || maxMarked.Load() != 0 {
		t.Errorf("%d programs paused and %d marked for pause at most (pods' tables, pool status), want none: with deviceOvercommitPercent at its default this load fits the pods and their host tiers",
			maxPaused.Load(), maxMarked.Load())
	}
	fleet := scrapeFleetCounters(t, mgr, ns, hostTierPool.name)
	if p, r := fleet["kvpilot_program_pauses_total"], fleet["kvpilot_program_resumes_total"]; p != 0 || r != 0 {
		t.Errorf("manager metrics: %v pauses, %v resumes, want none", p, r)
	}

	// The device's overflow went to the host tier and came back: spilled
	// blocks, blocks restored, prompt tokens found on the host. Every
	// request ran, once, to its length.
	var all []sample
	for _, ip := range ips {
		all = append(all, mustScrape(t, "http://"+ip+":8000/metrics")...)
	}
	spilled := sumSamples(all, "kvpilot_kv_spilled_blocks_total")
	restored := sumSamples(all, "kvpilot_kv_offload_blocks_total", `transfer_type="CPU_to_GPU"`)
	hostHits := sumSamples(all, "kvpilot_prefix_cache_host_hits_total")
	if spilled == 0 || restored == 0 || hostHits == 0 {
		t.Errorf("host tier: %v blocks spilled, %v restored, %v prompt tokens hit on the host; want all three above 0", spilled, restored, hostHits)
	}
	want := float64(w.programs * w.steps)
	if got := sumSamples(all, "vllm:request_success_total", `finished_reason="length"`); got != want {
		t.Errorf("vllm:request_success_total{finished_reason=\"length\"} over the pods: %v, want %v (one per step)", got, want)
	}
	if got := sumSamples(all, "vllm:generation_tokens_total"); got != want*outTokens {
		t.Errorf("vllm:generation_tokens_total over the pods: %v, want %v", got, want*outTokens)
	}
	t.Logf("host tier: %v blocks spilled, %v restored, %v prompt tokens hit; %v preemptions",
		spilled, restored, hostHits, sumSamples(all, "vllm:num_preemptions_total"))
}

// waitGroupWithin waits for wg for at most d and reports whether it is done.
func waitGroupWithin(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// fmtPtr prints what a pointer points to, or nil.
func fmtPtr[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

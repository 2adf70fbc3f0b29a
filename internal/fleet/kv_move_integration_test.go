package fleet

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/placement"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

// TestProcessesMoveKVOffADrainingPod runs two real runtime processes and
// the fleet loop: a program runs a step on pod a, pod a drains, and the
// round pauses the program there and resumes it on pod b, telling b to
// fetch its KV from a over the control port. b's metrics count the blocks
// that arrived, and the program's next step, sent to pod a, is forwarded
// to b and finds its prefix cached there instead of recomputing it. With
// transfers off, the same step recomputes.
func TestProcessesMoveKVOffADrainingPod(t *testing.T) {
	if testing.Short() {
		t.Skip("starts runtime processes")
	}
	for _, tc := range []struct {
		name       string
		bandwidth  float64
		wantBlocks bool
	}{
		{name: "transfer", bandwidth: placement.DefaultKVTransferBandwidth, wantBlocks: true},
		{name: "transfers off", bandwidth: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startPod(t, "pod-a", 64, "--enable-prompt-tokens-details")
			b := startPod(t, "pod-b", 64, "--enable-prompt-tokens-details")
			policy := placement.DefaultPolicy()
			policy.KVTransferBandwidth = tc.bandwidth
			f := newFleet(t, policy)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const prog = "agent-m"
			if r := step(ctx, a.API, prog, 200, 1); r.err != nil || r.servedBy != "" {
				t.Fatalf("step 1: served by %q, %v", r.servedBy, r.err)
			}
			pods := []Pod{a.fleetPod(), b.fleetPod()}
			if _, err := f.Round(ctx, pods, time.Now()); err != nil {
				t.Fatal(err)
			}
			pods[0].Draining = true
			sum, err := f.Round(ctx, pods, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if sum.Moves != 1 || (sum.KVFetches == 1) != tc.wantBlocks {
				t.Fatalf("drain round: %d moves, %d KV fetches", sum.Moves, sum.KVFetches)
			}
			// Step 2 extends the prompt: its 12 leading full blocks of 16
			// (192 tokens) are step 1's.
			r := step(ctx, a.API, prog, 240, 2)
			if r.err != nil || r.servedBy != b.API {
				t.Fatalf("step 2: served by %q (pod b is %s), %v", r.servedBy, b.API, r.err)
			}
			in, out := kvTransferBlocks(t, b.API), kvTransferBlocks(t, a.API)
			// a counts what it sent when its handler returns, which can be
			// after b has read the last byte.
			if tc.wantBlocks {
				poll.Wait(5*time.Second, func() bool { out = kvTransferBlocks(t, a.API); return out["out"] >= 12 })
			}
			wantCached := 0
			if tc.wantBlocks {
				wantCached = 192
				if in["in"] < 12 || out["out"] < 12 {
					t.Fatalf("blocks moved: %v into b, %v out of a; want at least 12", in["in"], out["out"])
				}
			} else if in["in"] != 0 {
				t.Fatalf("transfers off, yet %v blocks moved into b", in["in"])
			}
			if r.cached != wantCached {
				t.Fatalf("step 2 on b found %d prompt tokens cached, want %d", r.cached, wantCached)
			}
		})
	}
}

var kvTransferRE = regexp.MustCompile(`(?m)^kvpilot_kv_transfer_blocks_total\{direction="(in|out)"\} (\S+)$`)

// kvTransferBlocks reads a pod's kvpilot_kv_transfer_blocks_total by
// direction.
func kvTransferBlocks(t *testing.T, api string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	got := map[string]float64{}
	for _, m := range kvTransferRE.FindAllStringSubmatch(string(b), -1) {
		got[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	return got
}

// TestProcessesResumePausedProgramWithItsKV: pod a is full, so the round
// pauses a program there (its KV goes to a's host tier); the next round,
// rather than have it wait for room on a (the cache affinity wait), resumes
// it on pod b with its KV fetched from a's host tier, and its next step
// finds its prefix there. With transfers off it keeps waiting for a.
func TestProcessesResumePausedProgramWithItsKV(t *testing.T) {
	if testing.Short() {
		t.Skip("starts runtime processes")
	}
	for _, transfer := range []bool{true, false} {
		t.Run("transfer="+strconv.FormatBool(transfer), func(t *testing.T) {
			a := startPod(t, "pod-a", 64, "--kv-host-blocks", "256", "--enable-prompt-tokens-details")
			b := startPod(t, "pod-b", 64, "--enable-prompt-tokens-details")
			policy := placement.DefaultPolicy()
			// Pod a's host tier must not make room on its device.
			policy.DeviceOvercommit, policy.ActingOnHost = 1, false
			if transfer {
				policy.KVTransferBandwidth = placement.DefaultKVTransferBandwidth
			}
			f := newFleet(t, policy)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			pods := []Pod{a.fleetPod(), b.fleetPod()}
			if _, err := f.Round(ctx, pods, time.Now()); err != nil {
				t.Fatal(err)
			}
			const prog = "agent-r"
			if r := step(ctx, a.API, prog, 200, 1); r.err != nil || r.servedBy != "" {
				t.Fatalf("step 1: served by %q, %v", r.servedBy, r.err)
			}
			// A larger program on a: 248 + 650 tokens and two buffers
			// overflow its 1,024.
			if r := stepN(ctx, a.API, "filler", 600, 1, 50); r.err != nil || r.servedBy != "" {
				t.Fatalf("filler: served by %q, %v", r.servedBy, r.err)
			}
			sum, err := f.Round(ctx, pods, time.Now())
			if err != nil || sum.Pauses != 1 {
				t.Fatalf("pause round: %+v, %v", sum, err)
			}
			sum, err = f.Round(ctx, pods, time.Now().Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if !transfer {
				if sum.Resumes != 0 || sum.KVFetches != 0 {
					t.Fatalf("without transfers the program should wait for pod a: %+v", sum)
				}
				return
			}
			if sum.Resumes != 1 || sum.KVFetches != 1 {
				t.Fatalf("resume round: %d resumes, %d KV fetches", sum.Resumes, sum.KVFetches)
			}
			r := step(ctx, a.API, prog, 240, 2)
			if r.err != nil || r.servedBy != b.API {
				t.Fatalf("step 2: served by %q (pod b is %s), %v", r.servedBy, b.API, r.err)
			}
			if in := kvTransferBlocks(t, b.API)["in"]; in < 12 {
				t.Fatalf("%v blocks moved into b, want at least 12", in)
			}
			if r.cached != 192 {
				t.Fatalf("step 2 on b found %d prompt tokens cached, want 192", r.cached)
			}
		})
	}
}

package fleet

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/util/testing/agentclient"
)

// TestProcessesPauseThroughHostTier runs a real runtime process with a
// host KV tier: a program is paused by a placement, its KV is copied to host
// memory, another program's request takes every device block, and when the
// program is resumed its next step finds its prefix, restored from the host,
// instead of recomputing it. The same run without a host tier recomputes.
func TestProcessesPauseThroughHostTier(t *testing.T) {
	if testing.Short() {
		t.Skip("starts runtime processes")
	}
	for _, tc := range []struct {
		name       string
		extra      []string
		wantCached int
	}{
		// Step 1: a 200-token prompt and 48 output tokens. Step 2 extends
		// the prompt, so 12 full blocks of 16 (192 tokens) can match.
		{name: "host tier", extra: []string{"--kv-host-blocks", "256", "--enable-prompt-tokens-details"}, wantCached: 192},
		{name: "no host tier", extra: []string{"--enable-prompt-tokens-details"}, wantCached: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startPod(t, "pod-a", 48, tc.extra...) // 768 device tokens
			client := controlclient.New(token, 2*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const prog = "agent-h"
			if r := step(ctx, a.API, prog, 200, 1); r.err != nil {
				t.Fatal(r.err)
			}
			push := func(pl wire.Placement) {
				t.Helper()
				rep, err := client.State(ctx, a.Control)
				if err != nil {
					t.Fatal(err)
				}
				pl.Version = rep.PlacementVersion + 1
				if _, err := client.Push(ctx, a.Control, &pl); err != nil {
					t.Fatal(err)
				}
			}
			push(wire.Placement{Pause: []string{prog}})
			// Another program takes every device block.
			if _, err := agentclient.Step(ctx, a.API, "filler", 740, 8); err != nil {
				t.Fatal(err)
			}
			push(wire.Placement{Place: []string{prog}})
			r, err := agentclient.Step(ctx, a.API, prog, 260, 8)
			if err != nil {
				t.Fatal(err)
			}
			if r.CachedTokens != tc.wantCached {
				t.Fatalf("resumed step found %d cached tokens, want %d", r.CachedTokens, tc.wantCached)
			}
			out, in := offloadBlocks(t, a.API)
			if tc.wantCached > 0 && (out < 12 || in < 12) {
				t.Fatalf("offload metrics: %v blocks to host, %v back, want at least 12 each", out, in)
			}
			if tc.wantCached == 0 && (out != 0 || in != 0) {
				t.Fatalf("offload metrics without a host tier: %v out, %v in", out, in)
			}
		})
	}
}

var offloadRE = regexp.MustCompile(`(?m)^kvpilot_kv_offload_blocks_total\{[^}]*transfer_type="(GPU_to_CPU|CPU_to_GPU)"[^}]*\} (\S+)$`)

// offloadBlocks reads the pod's host-tier transfer counters from /metrics.
func offloadBlocks(t *testing.T, api string) (out, in float64) {
	t.Helper()
	resp, err := http.Get("http://" + api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, m := range offloadRE.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "GPU_to_CPU" {
			out = v
		} else {
			in = v
		}
	}
	return out, in
}

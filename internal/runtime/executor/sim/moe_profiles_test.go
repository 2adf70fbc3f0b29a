package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// TestMoEProfilesMatchPublishedCounts: each profile's parameter counts,
// computed from its published config (moeShape), are the publisher's
// totals. Publishers count active parameters differently and the table
// says how: OpenAI leaves the input embedding out (gpt-oss's model card:
// 3.61B = attention + 4/32 of the MLP + the unembedding); Qwen counts
// both embeddings in; Z.ai does not say, and its 12B for GLM-4.5-Air
// matches with both left out (12.18B; 12.80B with the output projection).
// GLM-4.7-Flash's active count is published only as the "A3B" of its
// class name, so its bound is looser.
func TestMoEProfilesMatchPublishedCounts(t *testing.T) {
	for _, c := range []struct {
		name          string
		total, active float64
		// embed is how many of the input embedding and output
		// projection (Vocab×Hidden each) the published active count
		// has: 2 (Qwen), 1 (OpenAI: the output projection), 0 (Z.ai).
		embed     int
		activeTol float64
	}{
		{"qwen3-coder-30b-a3b", 30.5e9, 3.3e9, 2, 0.03},
		{"gpt-oss-20b", 20.91e9, 3.61e9, 1, 0.03},
		{"gpt-oss-120b", 116.83e9, 5.13e9, 1, 0.03},
		{"glm-4.5-air", 106e9, 12e9, 0, 0.03},
		{"glm-4.5-air-fp8", 106e9, 12e9, 0, 0.03},
		{"glm-4.7-flash", 30e9, 3e9, 0, 0.10},
	} {
		g, err := LookupGeometry(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(float64(g.Params)-c.total) / c.total; d > 0.03 {
			t.Errorf("%s: %.2fB parameters, published %.2fB (%.1f%% off)", c.name, float64(g.Params)/1e9, c.total/1e9, 100*d)
		}
		// ActiveParams has the output projection (1).
		active := float64(g.ActiveParams()) + float64(c.embed-1)*float64(g.Vocab)*float64(g.Hidden)
		if d := math.Abs(active-c.active) / c.active; d > c.activeTol {
			t.Errorf("%s: %.2fB active, published %.2fB (%.1f%% off)", c.name, active/1e9, c.active/1e9, 100*d)
		}
		if g.Experts == 0 || g.MoELayers == 0 || g.RoutedParams <= 0 || g.RoutedParams >= g.Params {
			t.Errorf("%s: not a mixture of experts: %+v", c.name, g)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-20s %8s %8s %9s %12s %12s %8s\n", "profile", "total", "active", "weights", "KV B/token", "by group@32k", "ratio")
	for _, name := range GeometryNames() {
		g, _ := LookupGeometry(name)
		fmt.Fprintf(&b, "%-20s %7.2fB %7.2fB %7.1fGB %12d %12.0f %8.3f\n", name, float64(g.Params)/1e9, float64(g.ActiveParams())/1e9,
			float64(g.WeightBytes())/1e9, g.KVBytesPerToken(), float64(g.KVGroupBytes(32768))/32768, g.KVGroupRatio(32768))
	}
	t.Log(b.String())
}

// TestKVLayerGroups: what each profile's layers store per token, counted
// by hand from the configs; a group allocation of gpt-oss at 32k tokens
// holds the full layers' KV and 128 positions of the sliding ones.
func TestKVLayerGroups(t *testing.T) {
	for _, c := range []struct {
		name     string
		perToken int64
		ratio32k float64
	}{
		{"llama-3.1-8b", 32 * 2 * 8 * 128 * 2, 1},
		{"qwen3-coder-30b-a3b", 48 * 2 * 4 * 128 * 2, 1},
		{"gpt-oss-20b", 24 * 2 * 8 * 64 * 2, (12*32768 + 12*128) / (24 * 32768.0)},
		{"gpt-oss-120b", 36 * 2 * 8 * 64 * 2, (18*32768 + 18*128) / (36 * 32768.0)},
		{"glm-4.5-air", 46 * 2 * 8 * 128 * 2, 1},
		// llama.cpp's deepseek2 cache with MLA: a K row of kv_lora_rank
		// 512 + rope 64 per layer, no V row (V is a view of K).
		{"glm-4.7-flash", 47 * 576 * 2, 1},
	} {
		g, _ := LookupGeometry(c.name)
		if got := g.KVBytesPerToken(); got != c.perToken {
			t.Errorf("%s: %d KV bytes a token, want %d", c.name, got, c.perToken)
		}
		if err := g.KV().Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if got := g.KVGroupRatio(32768); math.Abs(got-c.ratio32k) > 1e-9 {
			t.Errorf("%s: group ratio at 32k %.4f, want %.4f", c.name, got, c.ratio32k)
		}
		var layers int
		for _, gr := range g.KVLayerGroups() {
			layers += gr.Layers
		}
		if layers != g.Layers {
			t.Errorf("%s: groups hold %d layers of %d", c.name, layers, g.Layers)
		}
		// A context within the window: every layer keeps it all.
		if got := g.KVGroupBytes(100); got != 100*c.perToken {
			t.Errorf("%s: 100 tokens need %d bytes by group, want %d", c.name, got, 100*c.perToken)
		}
	}
	// MLA's latent is shared by the heads: every tensor-parallel device
	// holds all of it; GQA's KV heads are split.
	flash, _ := LookupGeometry("glm-4.7-flash")
	if got := flash.KVBytesPerTokenPerDevice(2); got != flash.KVBytesPerToken() {
		t.Errorf("MLA on 2 devices: %d bytes a token each, want %d", got, flash.KVBytesPerToken())
	}
	air, _ := LookupGeometry("glm-4.5-air")
	if got := air.KVBytesPerTokenPerDevice(2); got != air.KVBytesPerToken()/2 {
		t.Errorf("GQA on 2 devices: %d bytes a token each, want %d", got, air.KVBytesPerToken()/2)
	}
}

// TestExpertBytesGrowSublinearly: a step reads the dense weights and the
// routed experts its tokens touch, E·(1 − (1 − k/E)^T) per MoE layer; 64
// decodes read far less than 64 times one decode's experts, and a large
// prefill reads them all.
func TestExpertBytesGrowSublinearly(t *testing.T) {
	x := newTestExec(t, "H100-SXM", "qwen3-coder-30b-a3b", Options{StepOverhead: time.Nanosecond})
	g := x.opts.Geometry
	// Closed form, written out: 128 experts, 8 a token.
	for _, c := range []struct {
		tokens int
		want   float64
	}{{1, 8}, {2, 8 + 8*120.0/128}, {64, 128 * (1 - math.Pow(120.0/128, 64))}} {
		if got := g.ExpectedExpertsTouched(c.tokens); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%d tokens touch %.4f experts a layer, want %.4f", c.tokens, got, c.want)
		}
	}
	dense := float64(g.DenseParams()) * 2
	perExpert := float64(g.RoutedParams) / float64(48*128) * 2
	if math.Abs(g.ExpertBytes()-perExpert) > 1 {
		t.Errorf("an expert is %.0f bytes, want %.0f", g.ExpertBytes(), perExpert)
	}
	bw := 3.35e12 * 0.8
	one := x.StepTime(decodeBatch(1, 100)).Seconds()
	b64 := x.StepTime(decodeBatch(64, 100)).Seconds()
	kv := func(n int) float64 { return float64(n) * 101 * float64(g.KVBytesPerToken()) }
	want1 := (dense + 48*8*perExpert + kv(1)) / bw
	want64 := (dense + 48*128*(1-math.Pow(120.0/128, 64))*perExpert + kv(64)) / bw
	if math.Abs(one-want1)/want1 > 1e-6 || math.Abs(b64-want64)/want64 > 1e-6 {
		t.Errorf("decode steps %.3f ms (1) and %.3f ms (64), want %.3f and %.3f", one*1e3, b64*1e3, want1*1e3, want64*1e3)
	}
	expert1, expert64 := g.WeightBytesRead(1)-dense, g.WeightBytesRead(64)-dense
	if r := expert64 / expert1; r < 5 || r > 16 {
		t.Errorf("64 tokens read %.1f× one token's expert bytes, want sublinear (≈ 15.7 = 125.9/8)", r)
	}
	if all := g.WeightBytesRead(8192); math.Abs(all-float64(g.WeightBytes()))/float64(g.WeightBytes()) > 1e-6 {
		t.Errorf("an 8k prefill reads %.2f GB of weights, want all %.2f GB", all/1e9, float64(g.WeightBytes())/1e9)
	}
	// FLOPs are the active parameters': a large prefill costs ~3.3B, not
	// 30.5B, parameters' worth.
	pre := &batch.Batch{Seqs: []batch.Seq{{Tokens: make([]int32, 8192), Sample: true}}, NumTokens: 8192}
	got := x.StepTime(pre).Seconds()
	lower := 2 * float64(g.ActiveParams()-int64(g.Vocab*g.Hidden)) * 8192 / (989e12 * 0.6)
	if got < lower || got > 2*lower {
		t.Errorf("8k prefill %.1f ms, want between %.1f and %.1f ms", got*1e3, lower*1e3, 2*lower*1e3)
	}
}

// TestSlidingWindowReadsLessKV: a gpt-oss decode step at 32k of context
// reads the full layers' KV and 128 positions of the sliding ones: less
// than the same shape with every layer full, by the bytes the sliding
// layers leave.
func TestSlidingWindowReadsLessKV(t *testing.T) {
	x := newTestExec(t, "H100-SXM", "gpt-oss-20b", Options{StepOverhead: time.Nanosecond})
	allFull := x.opts.Geometry
	allFull.SlidingLayers, allFull.SlidingWindow = 0, 0
	y, err := New(Options{Accelerator: x.opts.Accelerator, Geometry: allFull, StepOverhead: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	const ctx, seqs = 32000, 16
	swa, full := x.StepTime(decodeBatch(seqs, ctx)).Seconds(), y.StepTime(decodeBatch(seqs, ctx)).Seconds()
	perLayer := float64(allFull.KVBytesPerToken()) / 24
	saved := seqs * 12 * perLayer * float64((ctx+1)-(127+1)) / (3.35e12 * 0.8)
	if math.Abs((full-swa)-saved)/saved > 1e-6 {
		t.Errorf("sliding window saves %.3f ms at 32k × %d, want %.3f ms", (full-swa)*1e3, seqs, saved*1e3)
	}
	// Within the window both read the same.
	if a, b := x.StepTime(decodeBatch(seqs, 50)), y.StepTime(decodeBatch(seqs, 50)); a != b {
		t.Errorf("at 50 tokens of context: %v with sliding layers, %v without", a, b)
	}
}

// TestAttendedPairs: the closed form matches counting, window or not.
func TestAttendedPairs(t *testing.T) {
	for _, w := range []int{0, 1, 4, 128} {
		for p := 0; p < 300; p += 37 {
			for _, n := range []int{1, 3, 200} {
				var pairs float64
				lo := p
				for j := p + 1; j <= p+n; j++ {
					if w > 0 {
						pairs += float64(min(j, w))
						lo = min(lo, max(0, j-w))
					} else {
						pairs += float64(j)
						lo = 0
					}
				}
				if got := attendedPairs(p, n, w); got != pairs {
					t.Errorf("p=%d n=%d window=%d: %v pairs, want %v", p, n, w, got, pairs)
				}
				if got := positionsRead(p, n, w); got != p+n-lo {
					t.Errorf("p=%d n=%d window=%d: reads %d positions, want %d", p, n, w, got, p+n-lo)
				}
			}
		}
	}
}

// TestMoEProfilesOnOneH100: gpt-oss-120b's MXFP4 experts fit one 80 GB
// H100 (~61 GiB of weights); GLM-4.5-Air in BF16 (~213 GB) fits neither
// one nor two, its FP8 checkpoint two, and 4-bit weights one.
func TestMoEProfilesOnOneH100(t *testing.T) {
	a, _ := LookupAccelerator("H100-SXM")
	for _, c := range []struct {
		name string
		tp   int
		fits bool
	}{
		{"qwen3-coder-30b-a3b", 1, true},
		{"gpt-oss-20b", 1, true},
		{"gpt-oss-120b", 1, true},
		{"glm-4.7-flash", 1, true},
		{"glm-4.5-air", 1, false},
		{"glm-4.5-air", 2, false},
		{"glm-4.5-air", 4, true},
		{"glm-4.5-air-fp8", 1, false},
		{"glm-4.5-air-fp8", 2, true},
	} {
		g, _ := LookupGeometry(c.name)
		n, err := KVBlocksForDevice(a, g, c.tp, 0.9, 16)
		t.Logf("%s on %d× H100: %.1f GB of weights, %d KV blocks (%v)", c.name, c.tp, float64(g.WeightBytes())/1e9, n, err)
		if (err == nil) != c.fits {
			t.Errorf("%s on %d× H100: fits = %v, want %v", c.name, c.tp, err == nil, c.fits)
		}
	}
	oss, _ := LookupGeometry("gpt-oss-120b")
	if w := float64(oss.WeightBytes()) / (1 << 30); w < 58 || w > 64 {
		t.Errorf("gpt-oss-120b weights %.1f GiB, want ≈ 61", w)
	}
	// The precision knob: GLM-4.5-Air at 4.5 bits fits one H100.
	air, _ := LookupGeometry("glm-4.5-air")
	if _, err := KVBlocksForDevice(a, air.WithWeightBits(4.5, 0), 1, 0.9, 16); err != nil {
		t.Errorf("GLM-4.5-Air at 4.5 bits: %v", err)
	}
}

// TestCRDListsEveryProfile: the InferencePool CRD's executor.sim enums
// (api/v1alpha1) name exactly the profiles LookupAccelerator and
// LookupGeometry know, so a pool can ask for each and for nothing else.
func TestCRDListsEveryProfile(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "api", "v1alpha1", "inferencepool_types.go"))
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	start := strings.Index(body, "type SimExecutorSpec struct")
	if start < 0 {
		t.Fatal("SimExecutorSpec not found in api/v1alpha1")
	}
	body = body[start:]
	body = body[:strings.Index(body, "\n}\n")]
	enums := map[string][]string{}
	field := ""
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "// +kubebuilder:validation:Enum="); ok {
			field = v
			continue
		}
		if name, _, ok := strings.Cut(line, " string"); ok && field != "" {
			enums[name] = strings.Split(field, ";")
			field = ""
		}
	}
	got, want := enums["Model"], GeometryNames()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("CRD executor.sim.model enum %v, profiles %v", got, want)
	}
	got = enums["Accelerator"]
	slices.Sort(got)
	if want := names(accelerators); !slices.Equal(got, want) {
		t.Errorf("CRD executor.sim.accelerator enum %v, profiles %v", got, want)
	}
}

// TestMLAStepReadsTheLatent: a GLM-4.7-Flash decode step reads each
// context position's 576-wide latent in every layer, on every device of
// a tensor-parallel group (the latent is shared by the heads, not split),
// while the weights are split.
func TestMLAStepReadsTheLatent(t *testing.T) {
	const seqs, ctx = 64, 8000
	for _, tp := range []int{1, 2} {
		x := newTestExec(t, "H100-SXM", "glm-4.7-flash", Options{StepOverhead: time.Nanosecond, TensorParallel: tp})
		a, g := x.opts.Accelerator, x.opts.Geometry
		kv := float64(seqs) * (ctx + 1) * 47 * 576 * 2
		want := (g.WeightBytesRead(seqs)/float64(tp) + kv) / (a.MemBandwidth * 0.8)
		if tp > 1 {
			msg := float64(seqs) * 2048 * 2
			want += 2 * 47 * (5e-6 + 2*float64(tp-1)/float64(tp)*msg/a.LinkBandwidth)
		}
		if got := x.StepTime(decodeBatch(seqs, ctx)).Seconds(); math.Abs(got-want)/want > 1e-6 {
			t.Errorf("TP=%d: %d decodes at %d tokens take %.3f ms, want %.3f ms", tp, seqs, ctx, got*1e3, want*1e3)
		}
	}
}

//go:build linux && (amd64 || arm64)

package ggml

import (
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Device parity: how far the test device may stray from the CPU. Both
// run deviceGen greedy steps of the CPU's tokens after a prompt; the
// logits of every step must stay within deviceLogitsTol of their scale,
// and wherever the CPU's top-2 margin exceeds deviceMargin of the scale
// the device must pick the CPU's token (F16 weights; deviceQuantTol and
// deviceQuantMargin where ggml quantizes the activations too, for Q8_0
// and MXFP4 weights, as TestQ8AgreesWithCPU allows).
//
// A mixture of experts is held to its median step (within deviceMoETol
// at least) and to 80% of the tokens instead: a random router's near
// ties flip an expert on a difference in the fourth digit, which changes
// that token's output and, through its KV, the steps after it. Plain
// against flash attention on the CPU flipped up to 3 of 24 tokens with a
// margin and moved the largest step by up to half the scale; on an H200
// glm4moe's median F16 step moved 2.9e-2 of the scale. At least a
// quarter of the steps must have a margin for the tokens to count.
//
// On CUDA, ggml multiplies F32 activations on the tensor cores in TF32
// and quantizes them to Q8_1 for Q8_0 and MXFP4 weights (the CPU to
// Q8_0). On an H200 the dense architectures' F16 logits stayed within
// 1.4e-2 of the CPU's scale (most within 6e-3), every compared token
// equal.
const (
	deviceLogitsTol   = 2e-2
	deviceQuantTol    = 0.1
	deviceMoETol      = 0.05
	deviceMargin      = 0.01
	deviceQuantMargin = 0.05
	deviceGen         = 32
)

// TestArchitecturesOnDeviceMatchCPU holds every architecture of the
// llama.cpp parity cases, on the device the tests run on
// (KVPILOT_GGML_DEVICE: cuda under make test-gpu and the GPU bundle), to
// the same ggml on the CPU, which TestGreedyParityWithLlamaCpp holds to
// llama.cpp token for token: F16 and Q8_0 weights (and gpt-oss's experts
// in MXFP4), an F16 KV cache, the parity tests' short and long prompts,
// the criteria above. On the CPU the second executor runs the plain
// attention, the chain GPUs run by default, so the test checks that path
// against flash attention for every architecture there.
func TestArchitecturesOnDeviceMatchCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("every architecture, twice: not in -short (race) runs")
	}
	lib := testLibDir(t)
	blocks := (parityLongPrompt + deviceGen + testBlockSize - 1) / testBlockSize
	ref := Options{LibDir: lib, Device: DeviceCPU, Threads: 1, KVCacheDType: kvcache.DTypeF16}
	dev := ref
	dev.Device = testDevice()
	if dev.Device == DeviceCPU {
		dev.PlainAttention = true
	}
	type variant struct {
		typ model.DType
		m   func(t *testing.T, c parityCase) *model.Model
	}
	convert := func(typ model.DType) variant {
		return variant{typ, func(t *testing.T, c parityCase) *model.Model {
			m, err := parityModel(c.cfg, c.seed).Convert(typ)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}}
	}
	variants := []variant{convert(model.F16), convert(model.Q8_0)}
	for _, c := range parityModels() {
		vs := variants
		if c.name == gptossParity().name {
			vs = append(vs, variant{model.MXFP4, func(t *testing.T, c parityCase) *model.Model {
				m, err := convert(model.F16).m(t, c).WithMXFP4Experts()
				if err != nil {
					t.Fatal(err)
				}
				return m
			}})
		}
		for _, v := range vs {
			t.Run(c.name+"/"+v.typ.String(), func(t *testing.T) {
				m := v.m(t, c)
				want, got := newExecIn(t, m, blocks, testBlockSize, ref), newExecIn(t, m, blocks, testBlockSize, dev)
				tol, margin := deviceLogitsTol, deviceMargin
				if v.typ != model.F16 {
					tol, margin = deviceQuantTol, deviceQuantMargin
				}
				for _, n := range []int{parityShortPrompt, parityLongPrompt} {
					r := compareOnDevice(t, want, got, parityPrompt(n, m.Config.VocabSize), margin)
					t.Logf("prompt of %d tokens on %s: logits within %.3g of their scale (median step %.3g); tokens agree at %d of %d steps with a margin",
						n, dev.Device, r.max, r.median, r.agreed, r.checked)
					if r.checked < deviceGen/4 {
						t.Errorf("prompt of %d tokens: only %d of %d steps had a top-2 margin to compare tokens on", n, r.checked, deviceGen)
					}
					worst, agree := r.max, r.agreed == r.checked
					if c.cfg.Experts > 0 {
						worst, agree = r.median, r.agreed*5 >= r.checked*4
						tol = max(tol, deviceMoETol)
					}
					if worst > tol || !agree {
						t.Errorf("prompt of %d tokens: %s differs from the CPU: logits by %.3g of their scale (median step %.3g; tolerance %g), tokens at %d of %d steps",
							n, dev.Device, r.max, r.median, tol, r.checked-r.agreed, r.checked)
					}
				}
			})
		}
	}
}

// deviceComparison is compareOnDevice's result: the largest and the
// median step's logit difference relative to the scale, and at how many
// steps with a margin the tokens were compared and agreed.
type deviceComparison struct {
	max, median     float64
	checked, agreed int
}

// compareOnDevice runs prompt and deviceGen greedy steps of ref's tokens
// through ref and g, comparing tokens where ref's top-2 margin exceeds
// margin of the scale.
func compareOnDevice(t *testing.T, ref, g *Executor, prompt []int32, margin float64) deviceComparison {
	t.Helper()
	var r deviceComparison
	blocks := contiguous(0, (len(prompt)+deviceGen+testBlockSize-1)/testBlockSize)
	in, pos := prompt, 0
	var diffs []float64
	for range deviceGen {
		seq := []batch.Seq{{Tokens: in, Pos: pos, Blocks: blocks, Sample: true}}
		lw := append([]float32(nil), execute(t, ref, seq)[0]...)
		lg := execute(t, g, seq)[0]
		d := maxRelDiff([][]float32{lw}, [][]float32{lg})
		diffs = append(diffs, d)
		r.max = max(r.max, d)
		if float64(top2Margin(lw)) > margin*logitScale(lw) {
			r.checked++
			if argmax(lw) == argmax(lg) {
				r.agreed++
			}
		}
		pos += len(in)
		in = []int32{argmax(lw)}
	}
	r.median = median(diffs)
	return r
}

//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// TestRopeExtRotates holds the executor's RopeExt to YaRN's rotation
// written out here in float64 (the YaRN paper's ramp between the
// correction dimensions of beta_fast and beta_slow rotations over the
// original context, its 1+0.1·ln(factor) magnitude, linear interpolation
// outside the ramp), in both pair modes: unscaled, linear, YaRN (with a
// model's attention factor) and partial rotation, whose unrotated
// dimensions pass unchanged. Every parameter differs from its default, so
// one passed to ggml out of place shows.
func TestRopeExtRotates(t *testing.T) {
	const hd, heads, n = 32, 2, 5
	pos := []int32{0, 1, 7, 130, 511}
	for _, mode := range []arch.RopeMode{arch.RopeNormal, arch.RopeNeox} {
		for _, p := range []arch.RopeParams{
			{Dims: hd, Theta: 10000},
			{Dims: hd, Theta: 1e6, FreqScale: 0.5, AttnFactor: 0.8},
			{Dims: hd, Theta: 1e6, FreqScale: 0.25, OrigContext: 128, ExtFactor: 1, AttnFactor: 0.9, BetaFast: 24, BetaSlow: 2},
			{Dims: hd / 2, Theta: 1e4, FreqScale: 0.25, OrigContext: 64, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1},
			{Dims: 8, Theta: 1e4},
		} {
			p.Mode = mode
			t.Run(fmt.Sprintf("%+v", p), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(3, 4))
				x := make([]float32, hd*heads*n)
				for i := range x {
					x[i] = rng.Float32()*2 - 1
				}
				got := ropeOnExecutor(t, p, x, pos, hd, heads)
				want := ropeReference(p, x, pos, hd, heads)
				for i := range want {
					if d := math.Abs(float64(got[i]) - want[i]); d > 1e-4 {
						t.Fatalf("element %d (dim %d, head %d, token %d): %g, want %g", i, i%hd, i/hd%heads, i/(hd*heads), got[i], want[i])
					}
				}
			})
		}
	}
}

// ropeOnExecutor runs graphOps.RopeExt over x [hd, heads, len(pos)].
func ropeOnExecutor(t *testing.T, p arch.RopeParams, x []float32, pos []int32, hd, heads int) []float32 {
	t.Helper()
	e := newTestExec(t, model.Random(wideHeads()["llama"], 1), 4)
	a, n := e.a, len(pos)
	ctx := a.initCtx(initParams{MemSize: a.tensorOverhead()*8 + a.graphOverhead(8, false), NoAlloc: true})
	defer a.freeCtx(ctx)
	xt := a.newTensor3d(ctx, typeF32, int64(hd), int64(heads), int64(n))
	pt := a.newTensor1d(ctx, typeI32, int64(n))
	o := &graphOps{e: e, ctx: ctx, in: inputs{pos: pt}, nt: int64(n)}
	out := cTensor(o.RopeExt(arch.Tensor(xt), p))
	g := a.newGraphCustom(ctx, 8, false)
	a.buildForward(g, out)
	buf := a.allocCtxTensors(ctx, e.be.h)
	if buf == 0 {
		t.Fatal("allocate the rope graph")
	}
	defer a.bufferFree(buf)
	a.tensorSet(xt, unsafe.Pointer(&x[0]), 0, uintptr(4*len(x)))
	a.tensorSet(pt, unsafe.Pointer(&pos[0]), 0, uintptr(4*n))
	if st := a.graphCompute(e.be.h, g); st != gStatusSuccess {
		t.Fatalf("rope: status %d", st)
	}
	got := make([]float32, len(x))
	a.tensorGet(out, unsafe.Pointer(&got[0]), 0, uintptr(4*len(got)))
	return got
}

// ropeReference rotates pair k of each head's first p.Dims dimensions by
// pos·θ_k, θ_k = Theta^(-2k/Dims), scaled: linear interpolation
// (FreqScale·θ_k) mixed back towards θ_k by YaRN's ramp over the pairs
// between the correction dimensions, the result multiplied by AttnFactor
// (and YaRN's magnitude 1+0.1·ln(1/FreqScale)).
func ropeReference(p arch.RopeParams, x []float32, pos []int32, hd, heads int) []float64 {
	d := p.Dims
	fs, af := float64(p.FreqScale), float64(p.AttnFactor)
	if fs == 0 {
		fs = 1
	}
	if af == 0 {
		af = 1
	}
	// The pair index whose wavelength makes rot rotations over the
	// original context.
	corr := func(rot float64) float64 {
		return float64(d) * math.Log(float64(p.OrigContext)/(rot*2*math.Pi)) / (2 * math.Log(float64(p.Theta)))
	}
	low := max(0, math.Floor(corr(float64(p.BetaFast))))
	high := min(float64(d-1), math.Ceil(corr(float64(p.BetaSlow))))
	mscale := af
	if p.ExtFactor != 0 {
		mscale *= 1 + 0.1*math.Log(1/fs)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	for t, ps := range pos {
		for h := range heads {
			row := out[(t*heads+h)*hd:][:hd]
			for k := range d / 2 {
				extrap := float64(ps) * math.Pow(float64(p.Theta), -2*float64(k)/float64(d))
				theta := fs * extrap
				if p.ExtFactor != 0 {
					y := (float64(k) - low) / max(0.001, high-low)
					mix := (1 - min(1, max(0, y))) * float64(p.ExtFactor)
					theta = theta*(1-mix) + extrap*mix
				}
				c, s := math.Cos(theta)*mscale, math.Sin(theta)*mscale
				i, j := 2*k, 2*k+1
				if p.Mode == arch.RopeNeox {
					i, j = k, k+d/2
				}
				a, b := row[i], row[j]
				row[i], row[j] = a*c-b*s, a*s+b*c
			}
		}
	}
	return out
}

// TestRopeScalingChangesLogits: the scaled parity models
// (TestGreedyParityWithLlamaCpp) are not their unscaled twins in
// disguise: over the long prompt, dropping the scaling, for YaRN
// stretching linearly or from another original context, for mistral3
// dropping the attention temperature or its own YaRN keys, for llama3 its
// frequency factors (the twin draws the same other weights), moves the last
// position's logits by far more than the parity tolerance.
func TestRopeScalingChangesLogits(t *testing.T) {
	scaling := func(s arch.RopeScaling) func(*model.Config) {
		return func(c *model.Config) { c.RopeScaling = s }
	}
	for _, tc := range []struct {
		name  string
		cfg   model.Config
		twins map[string]func(*model.Config)
	}{
		{"qwen3-yarn", yarnConfig(), map[string]func(*model.Config){
			"unscaled":         scaling(arch.RopeScaling{}),
			"linear":           scaling(arch.RopeScaling{Type: "linear", Factor: 4}),
			"original context": scaling(arch.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 512}),
			"attention factor": scaling(arch.RopeScaling{Type: "yarn", Factor: 4, OrigContext: 128, AttnFactor: 0.9}),
		}},
		{"llama-linear", linearConfig(), map[string]func(*model.Config){
			"unscaled":            scaling(arch.RopeScaling{}),
			"no attention factor": scaling(arch.RopeScaling{Type: "linear", Factor: 2}),
		}},
		{"mistral3", mistral3Config(), map[string]func(*model.Config){
			"no temperature":    func(c *model.Config) { c.AttnTempScale = 0 },
			"no log multiplier": func(c *model.Config) { c.RopeScaling.YarnLogMul = 0 },
			"default betas":     func(c *model.Config) { c.RopeScaling.YarnBetaFast, c.RopeScaling.YarnBetaSlow = 0, 0 },
		}},
		{"llama3", llama3Config(), map[string]func(*model.Config){
			"no frequency factors": func(c *model.Config) { c.RopeFreqFactors = false },
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(41, parityLongPrompt))
			prompt := make([]int32, parityLongPrompt)
			for i := range prompt {
				prompt[i] = int32(rng.IntN(tc.cfg.VocabSize))
			}
			logits := func(c model.Config) []float32 {
				e := newTestExec(t, parityModel(c, 1), parityMaxModelLen/testBlockSize)
				return execute(t, e, []batch.Seq{{Tokens: prompt, Blocks: contiguous(0, parityMaxModelLen/testBlockSize), Sample: true}})[0]
			}
			want := logits(tc.cfg)
			for name, edit := range tc.twins {
				c := tc.cfg
				edit(&c)
				got := logits(c)
				d := 0.0
				for i := range want {
					d = max(d, math.Abs(float64(got[i]-want[i])))
				}
				if d < 10*parityLogitsTol {
					t.Errorf("%s: logits within %.3g of the model's", name, d)
				} else {
					t.Logf("%s: logits move by up to %.3g", name, d)
				}
			}
		})
	}
}

// TestAttnTemperatures: 1 + scale·ln(⌊pos/floor⌋+1): 1 within the first
// floor positions, then a step at every multiple of floor.
func TestAttnTemperatures(t *testing.T) {
	got := attnTemperatures(nil, []int32{0, 127, 128, 255, 256, 300, 1280}, 0.1, 128)
	want := []float32{1, 1, float32(1 + 0.1*math.Ln2), float32(1 + 0.1*math.Ln2), float32(1 + 0.1*math.Log(3)), float32(1 + 0.1*math.Log(3)), float32(1 + 0.1*math.Log(11))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("temperatures (-want +got):\n%s", diff)
	}
}

package arch

import (
	"fmt"
	"math"
	"strconv"
)

// Gating is how a mixture-of-experts router's logits become expert
// probabilities: GGUF's expert_gating_func, whose numbers these are.
type Gating uint8

const (
	// GatingSoftmax is a softmax over the experts (Qwen3-MoE, Mixtral).
	GatingSoftmax Gating = 1
	// GatingSigmoid is each expert's own sigmoid (DeepSeek-V3, GLM-4.5).
	GatingSigmoid Gating = 2
	// GatingSoftmaxWeight chooses the experts by their raw logits and
	// weights the chosen ones by a softmax over their logits alone
	// (gpt-oss; llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT).
	GatingSoftmaxWeight Gating = 3
)

// String is the gating's name, for errors and logs.
func (g Gating) String() string {
	switch g {
	case GatingSoftmax:
		return "softmax"
	case GatingSigmoid:
		return "sigmoid"
	case GatingSoftmaxWeight:
		return "softmax over the chosen"
	}
	return "gating " + strconv.Itoa(int(g))
}

// MoEOps are the operations a mixture-of-experts MLP needs besides the
// dense ones (MoE.Build composes them the way llama.cpp's build_moe_ffn
// does, so that an executor's results are llama.cpp's). Shapes are in
// ggml order; index tensors hold int32 expert numbers.
type MoEOps interface {
	// SoftMax is the softmax of each row of x; Sigmoid is element-wise.
	SoftMax(x Tensor) Tensor
	Sigmoid(x Tensor) Tensor
	// TopK is, per row of x [m, n], the indices of its k largest
	// elements, largest first: [k, n] int32.
	TopK(x Tensor, k int) Tensor
	// GetRows picks, for every column j of ids [k, n], the rows ids[·, j]
	// of the j-th matrix of x [w, rows, n]: [w, k, n].
	GetRows(x, ids Tensor) Tensor
	// Reshape2D views x, contiguous, as [ne0, ne1].
	Reshape2D(x Tensor, ne0, ne1 int) Tensor
	// SumRows is each row's sum: [m, …] → [1, …].
	SumRows(x Tensor) Tensor
	// Div is a / b element-wise, b broadcast over a.
	Div(a, b Tensor) Tensor
	// Clamp bounds every element of x to [lo, hi].
	Clamp(x Tensor, lo, hi float32) Tensor
	// Scale is s·x.
	Scale(x Tensor, s float32) Tensor
	// MulMatID multiplies by the experts ids chooses: w [k, m, experts],
	// x [k, 1 or used, n], ids [used, n] → [m, used, n], whose column
	// (i, j) is w[ids[i, j]]·x[·, i or 0, j].
	MulMatID(w, x, ids Tensor) Tensor
	// Slice is the i-th [ne0, ne2] along the middle dimension of x, a
	// contiguous F32 [ne0, ne1, ne2] (a view).
	Slice(x Tensor, ne0, ne1, ne2, i int) Tensor
}

// MoE is one layer's mixture-of-experts MLP: a router scores the
// experts for each token, the ExpertsUsed best run a SwiGLU MLP each, and
// their outputs are summed, weighted by the router's probabilities.
type MoE struct {
	// Router is ffn_gate_inp.weight [Dim, Experts].
	Router Tensor
	// Gate, Up and Down are the experts' projections,
	// ffn_{gate,up}_exps.weight [Dim, ExpertFFN, Experts] and
	// ffn_down_exps.weight [ExpertFFN, Dim, Experts].
	Gate, Up, Down Tensor
	// GateUp, when set instead of Gate and Up, is both in one tensor,
	// ffn_gate_up_exps.weight [Dim, 2·FFN, Experts]: each expert's FFN
	// gate rows, then its FFN up rows (Config.FusedGateUpExperts).
	GateUp Tensor
	// FFN is an expert's width (Config.ExpertFFN).
	FFN int
	// SelectionBias is added to the probabilities to choose the experts
	// but not to weight them (exp_probs_b.bias [Experts], DeepSeek-V3's
	// and GLM-4.5's), or 0.
	SelectionBias Tensor
	// Dim, Experts and Used are the model's width, experts and experts
	// per token.
	Dim, Experts, Used int
	Gating             Gating
	// Norm divides the chosen experts' weights by their sum; Scale, when
	// neither 0 nor 1, multiplies them.
	Norm  bool
	Scale float32
	// RouterBias is added to the router's logits (ffn_gate_inp.bias
	// [Experts], gpt-oss's), or 0.
	RouterBias Tensor
	// GateBias, UpBias [ExpertFFN, Experts] and DownBias [Dim, Experts]
	// are the experts' own biases, added to each chosen expert's
	// projection (gpt-oss's ffn_{gate,up,down}_exps.bias), or 0.
	GateBias, UpBias, DownBias Tensor
	// OAI runs the experts' SwiGLU as OpenAI's clamped one (SwiGLUOAI)
	// with Alpha and Limit instead of silu(gate)·up.
	OAI          bool
	Alpha, Limit float32
	// Groups, when more than 1, splits the experts into that many equal
	// groups of which only the GroupsUsed best are chosen from
	// (groupSelection: DeepSeek-V3's grouped selection).
	Groups, GroupsUsed int
}

// MoEOf is the MoE a layer of c runs with the given weights.
func MoEOf(c Config, router, gate, up, down, bias Tensor) MoE {
	return MoE{
		Router: router, Gate: gate, Up: up, Down: down, SelectionBias: bias,
		Dim: c.Dim, FFN: c.ExpertFFN, Experts: c.Experts, Used: c.ExpertsUsed,
		Gating: c.ExpertGating, Norm: c.ExpertWeightsNorm, Scale: c.ExpertWeightsScale,
		Groups: c.ExpertGroups, GroupsUsed: c.ExpertGroupsUsed,
	}
}

// minWeightSum is the smallest positive F16 normal, which llama.cpp
// clamps the weights' sum to before dividing by it.
const minWeightSum = 6.103515625e-5

// Build is the MLP over x [Dim, n]: [Dim, n]. It follows llama.cpp's
// build_moe_ffn step for step (probabilities, biased selection, weights
// gathered from the unbiased probabilities, normalized and scaled, the
// experts' outputs weighted and then added in the order chosen), so that
// an executor over ggml's kernels computes the same sums in the same
// order.
func (m MoE) Build(o Ops, x Tensor) Tensor { return m.BuildRows(o, x, o.Tokens()) }

// BuildRows is Build over x [Dim, n] of n rows other than the batch's
// tokens (the sampled rows alone, Ops.Sampled).
func (m MoE) BuildRows(o Ops, x Tensor, n int) Tensor {
	logits := o.MulMat(m.Router, x) // [experts, n]
	if m.RouterBias != 0 {
		logits = o.Add(logits, m.RouterBias)
	}
	var probs Tensor
	switch m.Gating {
	case GatingSigmoid:
		probs = o.Sigmoid(logits)
	case GatingSoftmaxWeight:
		probs = logits
	default:
		probs = o.SoftMax(logits)
	}
	selection := probs
	if m.SelectionBias != 0 {
		selection = o.Add(probs, m.SelectionBias)
	}
	if m.Groups > 1 {
		selection = m.groupSelection(o, selection, n)
	}
	chosen := o.TopK(selection, m.Used)                               // [used, n]
	weights := o.GetRows(o.Reshape3D(probs, 1, m.Experts, n), chosen) // [1, used, n]
	if m.Gating == GatingSoftmaxWeight {
		weights = o.Reshape3D(o.SoftMax(o.Reshape2D(weights, m.Used, n)), 1, m.Used, n)
	}
	if m.Norm {
		w := o.Reshape2D(weights, m.Used, n)
		sum := o.Clamp(o.SumRows(w), minWeightSum, float32(math.Inf(1))) // [1, n]
		weights = o.Reshape3D(o.Div(w, sum), 1, m.Used, n)
	}
	if m.Scale != 0 && m.Scale != 1 {
		weights = o.Scale(weights, m.Scale)
	}
	xe := o.Reshape3D(x, m.Dim, 1, n)
	biased := func(y, bias Tensor) Tensor {
		if bias != 0 {
			y = o.AddID(y, bias, chosen)
		}
		return y
	}
	up, gate := m.gateUp(o, xe, chosen, n)
	up, gate = biased(up, m.UpBias), biased(gate, m.GateBias)
	var act Tensor
	if m.OAI {
		act = o.SwiGLUOAI(gate, up, m.Alpha, m.Limit)
	} else {
		act = o.SwiGLU(gate, up)
	}
	out := o.Mul(biased(o.MulMatID(m.Down, act, chosen), m.DownBias), weights) // [dim, used, n]
	if m.Used == 1 {
		return o.Reshape2D(out, m.Dim, n)
	}
	sum := o.Slice(out, m.Dim, m.Used, n, 0)
	for i := 1; i < m.Used; i++ {
		sum = o.Add(sum, o.Slice(out, m.Dim, m.Used, n, i))
	}
	return sum
}

// gateUp is the chosen experts' up and gate projections of xe, each
// [FFN, used, n]: two products, or one of GateUp whose halves they are
// (views, as llama.cpp's build_moe_ffn splits it).
func (m MoE) gateUp(o Ops, xe, chosen Tensor, n int) (up, gate Tensor) {
	if m.GateUp == 0 {
		return o.MulMatID(m.Up, xe, chosen), o.MulMatID(m.Gate, xe, chosen)
	}
	gu := o.MulMatID(m.GateUp, xe, chosen) // [2·FFN, used, n]
	f := m.FFN
	return o.View3D(gu, f, m.Used, n, 2*f, 2*f*m.Used, f), o.View3D(gu, f, m.Used, n, 2*f, 2*f*m.Used, 0)
}

// ExpertSpecs are layer prefix p's experts' matrices as c stores them:
// ffn_gate_exps, ffn_down_exps and ffn_up_exps, or ffn_gate_up_exps and
// ffn_down_exps (FusedGateUpExperts).
func ExpertSpecs(c Config, p string) []TensorSpec {
	down := TensorSpec{Name: p + "ffn_down_exps.weight", Shape: []int{c.ExpertFFN, c.Dim, c.Experts}, Matrix: true}
	if c.FusedGateUpExperts {
		return []TensorSpec{{Name: p + "ffn_gate_up_exps.weight", Shape: []int{c.Dim, 2 * c.ExpertFFN, c.Experts}, Matrix: true}, down}
	}
	return []TensorSpec{
		{Name: p + "ffn_gate_exps.weight", Shape: []int{c.Dim, c.ExpertFFN, c.Experts}, Matrix: true},
		down,
		{Name: p + "ffn_up_exps.weight", Shape: []int{c.Dim, c.ExpertFFN, c.Experts}, Matrix: true},
	}
}

// BindMoE is the MoE of layer prefix p's experts, bound through b as c
// stores them (ExpertSpecs), its routers' selection bias bias (or 0).
func BindMoE(c Config, b *Binder, p string, bias Tensor) MoE {
	router, down := b.Get(p+"ffn_gate_inp.weight"), b.Get(p+"ffn_down_exps.weight")
	if c.FusedGateUpExperts {
		m := MoEOf(c, router, 0, 0, down, bias)
		m.GateUp = b.Get(p + "ffn_gate_up_exps.weight")
		return m
	}
	return MoEOf(c, router, b.Get(p+"ffn_gate_exps.weight"), b.Get(p+"ffn_up_exps.weight"), down, bias)
}

// FusedGateUp reports whether a file stores the experts of layer i (one
// with experts) fused (ffn_gate_up_exps.weight), for ReadConfig.
func FusedGateUp(file File, layer int) bool {
	return file.Shape(fmt.Sprintf("blk.%d.ffn_gate_up_exps.weight", layer)) != nil
}

// Nodes bounds the graph nodes Build adds, views and reshapes included.
func (m MoE) Nodes() int { return 48 + 2*m.Used }

package arch

import "math"

// GroupOps are the operations grouped expert selection adds to MoEOps
// (MoE.Groups: DeepSeek-V3's).
type GroupOps interface {
	// Reshape4D views x, contiguous, as [ne0, ne1, ne2, ne3].
	Reshape4D(x Tensor, ne0, ne1, ne2, ne3 int) Tensor
	// Fill is a tensor of x's shape whose every element is v.
	Fill(x Tensor, v float32) Tensor
	// SetRows is dst [w, rows, n] with, for every column j of ids [k, n],
	// its j-th matrix's rows ids[·, j] replaced by src [w, k, n]'s.
	SetRows(dst, src, ids Tensor) Tensor
}

// groupSelection masks the experts' selection scores sel [Experts, n] to
// the GroupsUsed best of Groups equal groups, a group scored by the sum
// of its two best experts' scores, as llama.cpp's build_moe_ffn does: the
// other groups' experts score -∞, so that TopK chooses among the best
// groups only.
func (m MoE) groupSelection(o Ops, sel Tensor, n int) Tensor {
	per := m.Experts / m.Groups
	groups := o.Reshape3D(sel, per, m.Groups, n)                                   // [per, groups, n]
	best := o.GetRows(o.Reshape4D(groups, 1, per, m.Groups, n), o.TopK(groups, 2)) // [1, 2, groups, n]
	scores := o.Reshape2D(o.SumRows(o.Reshape3D(best, 2, m.Groups, n)), m.Groups, n)
	chosen := o.TopK(scores, m.GroupsUsed) // [groupsUsed, n]
	kept := o.SetRows(o.Fill(groups, float32(math.Inf(-1))), o.GetRows(groups, chosen), chosen)
	return o.Reshape2D(kept, m.Experts, n)
}

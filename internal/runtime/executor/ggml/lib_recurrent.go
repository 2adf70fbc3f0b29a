//go:build linux && (amd64 || arm64)

package ggml

// recurrentAPI is the part of ggml's C API hybrid models' recurrent
// layers and M-RoPE call (arch.RecurrentOps; graph_recurrent.go) besides
// mlaAPI's concat and 4-D reshape, bound with the rest in Library.bind.
type recurrentAPI struct {
	ssmConv       func(ctx cCtx, sx, c cTensor) cTensor
	gatedDeltaNet func(ctx cCtx, q, k, v, g, beta, state cTensor, snapshots int64) cTensor
	softplus      func(cCtx, cTensor) cTensor
	silu          func(cCtx, cTensor) cTensor
	view4d        func(ctx cCtx, a cTensor, ne0, ne1, ne2, ne3 int64, nb1, nb2, nb3, offset uintptr) cTensor
	ropeMulti     func(ctx cCtx, a, pos, freqFactors cTensor, nDims int32, sections *int32, mode, nCtxOrig int32, freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) cTensor
	repeat4d      func(ctx cCtx, a cTensor, ne0, ne1, ne2, ne3 int64) cTensor
	nelements     func(a cTensor) int64
	nbytes        func(a cTensor) uintptr
	typeSize      func(typ int32) uintptr
	// viewInit and tensorCopy copy a state's rows between device slots
	// (copyStates): on a GPU a device-side copy.
	viewInit   func(t cTensor) int32
	tensorCopy func(src, dst cTensor)
}

func (a *recurrentAPI) bind(sym func(fptr any, name string)) {
	sym(&a.ssmConv, "ggml_ssm_conv")
	sym(&a.gatedDeltaNet, "ggml_gated_delta_net")
	sym(&a.softplus, "ggml_softplus")
	sym(&a.silu, "ggml_silu")
	sym(&a.view4d, "ggml_view_4d")
	sym(&a.ropeMulti, "ggml_rope_multi")
	sym(&a.repeat4d, "ggml_repeat_4d")
	sym(&a.nelements, "ggml_nelements")
	sym(&a.nbytes, "ggml_nbytes")
	sym(&a.typeSize, "ggml_type_size")
	sym(&a.viewInit, "ggml_backend_view_init")
	sym(&a.tensorCopy, "ggml_backend_tensor_copy")
}

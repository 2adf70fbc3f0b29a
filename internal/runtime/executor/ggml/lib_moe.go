//go:build linux && (amd64 || arm64)

package ggml

// moeAPI is the part of ggml's C API mixture-of-experts MLPs call
// (arch.MoEOps; graph_moe.go), bound with the rest in Library.bind.
type moeAPI struct {
	softMax     func(cCtx, cTensor) cTensor
	sigmoid     func(cCtx, cTensor) cTensor
	argsortTopK func(cCtx, cTensor, int32) cTensor
	sumRows     func(cCtx, cTensor) cTensor
	div         func(cCtx, cTensor, cTensor) cTensor
	clamp       func(cCtx, cTensor, float32, float32) cTensor
	scale       func(cCtx, cTensor, float32) cTensor
	mulMatID    func(cCtx, cTensor, cTensor, cTensor) cTensor
}

func (a *moeAPI) bind(sym func(fptr any, name string)) {
	sym(&a.softMax, "ggml_soft_max")
	sym(&a.sigmoid, "ggml_sigmoid")
	sym(&a.argsortTopK, "ggml_argsort_top_k")
	sym(&a.sumRows, "ggml_sum_rows")
	sym(&a.div, "ggml_div")
	sym(&a.clamp, "ggml_clamp")
	sym(&a.scale, "ggml_scale")
	sym(&a.mulMatID, "ggml_mul_mat_id")
}

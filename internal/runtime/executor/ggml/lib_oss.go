//go:build linux && (amd64 || arm64)

package ggml

// ossAPI is the part of ggml's C API gpt-oss's operations call
// (arch.GptOssOps; graph_oss.go), bound with the rest in Library.bind.
type ossAPI struct {
	swigluOAI func(ctx cCtx, gate, up cTensor, alpha, limit float32) cTensor
	addID     func(ctx cCtx, a, b, ids cTensor) cTensor
	// softMaxAddSinks and flashAttnAddSinks set a soft_max_ext's or a
	// flash_attn_ext's sinks (they return nothing: the node is changed in
	// place).
	softMaxAddSinks   func(t, sinks cTensor)
	flashAttnAddSinks func(t, sinks cTensor)
}

func (a *ossAPI) bind(sym func(fptr any, name string)) {
	sym(&a.swigluOAI, "ggml_swiglu_oai")
	sym(&a.addID, "ggml_add_id")
	sym(&a.softMaxAddSinks, "ggml_soft_max_add_sinks")
	sym(&a.flashAttnAddSinks, "ggml_flash_attn_ext_add_sinks")
}

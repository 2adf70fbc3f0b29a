//go:build linux && (amd64 || arm64)

package ggml

// mlaAPI is the part of ggml's C API deepseek2 calls besides the rest:
// multi-head latent attention's concat (arch.MLAOps; graph_mla.go) and
// grouped expert selection's fill and 4-D reshape (arch.GroupOps;
// graph_group.go), bound with the rest in Library.bind.
type mlaAPI struct {
	concat    func(ctx cCtx, a, b cTensor, dim int32) cTensor
	fill      func(ctx cCtx, a cTensor, v float32) cTensor
	reshape4d func(ctx cCtx, a cTensor, ne0, ne1, ne2, ne3 int64) cTensor
}

func (a *mlaAPI) bind(sym func(fptr any, name string)) {
	sym(&a.concat, "ggml_concat")
	sym(&a.fill, "ggml_fill")
	sym(&a.reshape4d, "ggml_reshape_4d")
}

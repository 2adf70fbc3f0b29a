//go:build linux && (amd64 || arm64)

package ggml

// mlaAPI is the part of ggml's C API multi-head latent attention calls
// (arch.MLAOps; graph_mla.go), bound with the rest in Library.bind.
type mlaAPI struct {
	concat func(ctx cCtx, a, b cTensor, dim int32) cTensor
}

func (a *mlaAPI) bind(sym func(fptr any, name string)) {
	sym(&a.concat, "ggml_concat")
}

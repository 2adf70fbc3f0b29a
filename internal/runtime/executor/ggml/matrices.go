package ggml

import "github.com/kvpilot/kvpilot/internal/runtime/model"

// matrices are the weights multiplied by the activations (the candidates
// for an extra buffer type): every 2-D tensor of the architecture but the
// token embedding, which get_rows reads and no extra type runs (a tied
// head gets a copy of its own there), and the 3-D stacks of a mixture of
// experts' matrices (mul_mat_id's).
func matrices(w *model.Weights) (ms []*model.Tensor) {
	for _, t := range w.Tensors() {
		if (len(t.Shape) == 2 || len(t.Shape) == 3) && t != w.TokenEmbedding {
			ms = append(ms, t)
		}
	}
	return ms
}

package ggml

import (
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// matrices are the weights multiplied by the activations (the candidates
// for an extra buffer type): every 2-D tensor of the architecture but the
// token embedding, which get_rows reads and no extra type runs (a tied
// head gets a copy of its own there), and the 3-D stacks of a mixture of
// experts' matrices (mul_mat_id's, named *_exps). Other 3-D matrices
// (MLA's per-head attn_k_b and attn_v_b, which a mul_mat broadcasts over
// the heads) stay in the default buffer, as llama.cpp leaves them: the
// extra types run only 2-D mul_mats.
func matrices(w *model.Weights) (ms []*model.Tensor) {
	for _, t := range w.Tensors() {
		experts := len(t.Shape) == 3 && strings.Contains(t.Name, "_exps.")
		if (len(t.Shape) == 2 || experts) && t != w.TokenEmbedding {
			ms = append(ms, t)
		}
	}
	return ms
}

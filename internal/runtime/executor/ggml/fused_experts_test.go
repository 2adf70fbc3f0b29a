//go:build linux && (amd64 || arm64)

package ggml

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// fuseGateUp is m with its experts' gate and up projections in one
// ffn_gate_up_exps tensor a layer, each expert's gate rows then its up
// rows (arch.Config.FusedGateUpExperts), every other tensor m's.
func fuseGateUp(t *testing.T, m *model.Model) *model.Model {
	t.Helper()
	cfg := m.Config
	cfg.FusedGateUpExperts = true
	fused := model.Random(cfg, 1) // its tensors' contents are replaced
	byName := map[string]*model.Tensor{}
	for _, tt := range m.Weights.Tensors() {
		byName[tt.Name] = tt
	}
	fusedTensors := 0
	for _, tt := range fused.Weights.Tensors() {
		p, ok := strings.CutSuffix(tt.Name, "ffn_gate_up_exps.weight")
		if !ok {
			tt.Type, tt.Data = byName[tt.Name].Type, byName[tt.Name].Data
			continue
		}
		gate, up := byName[p+"ffn_gate_exps.weight"], byName[p+"ffn_up_exps.weight"]
		rowBytes, err := gate.Type.RowBytes(gate.Shape[0])
		if err != nil {
			t.Fatal(err)
		}
		expert := gate.Shape[1] * rowBytes
		var data []byte
		for e := range gate.Shape[2] {
			data = append(data, gate.Data[e*expert:(e+1)*expert]...)
			data = append(data, up.Data[e*expert:(e+1)*expert]...)
		}
		tt.Type, tt.Data = gate.Type, data
		fusedTensors++
	}
	if fusedTensors == 0 {
		t.Fatal("no ffn_gate_up_exps tensor")
	}
	return fused
}

// TestFusedGateUpExperts: deepseek2 and qwen35moe models whose experts'
// gate and up projections are one tensor (ffn_gate_up_exps, one
// mul_mat_id whose halves are the gate and up) give the tokens and logits
// of the same weights stored apart, bit for bit, from the file too (the
// loader reads the layout from the tensors it finds).
func TestFusedGateUpExperts(t *testing.T) {
	for _, cfg := range []model.Config{deepseek2Config(), qwen35moeConfig()} {
		t.Run(cfg.Arch, func(t *testing.T) {
			m := randomModel(t, cfg, model.Q8_0, 9)
			fused := exectest.WriteAndLoad(t, fuseGateUp(t, m))
			if !fused.Config.FusedGateUpExperts {
				t.Fatal("the file's fused experts read back apart")
			}
			prompt := make([]int32, 30)
			rng := rand.New(rand.NewPCG(5, 6))
			for i := range prompt {
				prompt[i] = int32(rng.IntN(cfg.VocabSize))
			}
			wantToks, wantLogits := greedy(t, newTestExec(t, m, 64), prompt, 10)
			gotToks, gotLogits := greedy(t, newTestExec(t, fused, 64), prompt, 10)
			if diff := cmp.Diff(wantToks, gotToks); diff != "" {
				t.Errorf("greedy tokens (-apart +fused):\n%s", diff)
			}
			if !slices.EqualFunc(wantLogits, gotLogits, slices.Equal) {
				t.Errorf("logits differ by up to %g", maxDiff([][][]float32{wantLogits}, [][][]float32{gotLogits}))
			}
		})
	}
}

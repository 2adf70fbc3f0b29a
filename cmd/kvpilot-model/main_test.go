package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

func TestWriteAndInfo(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--builtin", "tiny"}, "llama vocab 258, dim 128, 4 layers"},
		{[]string{"--layers", "1", "--dim", "64", "--heads", "4", "--kv-heads", "1", "--ffn", "64", "--vocab", "300", "--dtype", "q8_0", "--arch", "qwen2", "--qkv-bias", "--tied"},
			"qwen2 vocab 300, dim 64, 1 layers, 4 heads (1 kv, head dim 16), ffn 64, context 4096, rope theta 10000, tied head, qkv bias"},
		{[]string{"--layers", "2", "--dim", "128", "--heads", "4", "--kv-heads", "2", "--head-dim", "64", "--ffn", "192", "--dtype", "f16", "--arch", "qwen3", "--tied", "--rope-theta", "1000000"},
			"qwen3 vocab 258, dim 128, 2 layers, 4 heads (2 kv, head dim 64), ffn 192, context 4096, rope theta 1e+06, tied head"},
		{[]string{"--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--ffn", "96", "--dtype", "q8_0", "--arch", "qwen3moe", "--experts", "8", "--experts-used", "2", "--expert-ffn", "32"},
			"qwen3moe vocab 258, dim 64, 2 layers, 4 heads (2 kv, head dim 16), ffn 96, context 4096, rope theta 10000, 8 experts (2 used, ffn 32)"},
		{[]string{"--layers", "3", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--ffn", "96", "--dtype", "f16", "--arch", "glm4moe", "--qkv-bias", "--experts", "8", "--experts-used", "2", "--expert-ffn", "32", "--shared-experts", "1", "--dense-layers", "1", "--expert-weights-norm", "--expert-weights-scale", "2.5"},
			"glm4moe vocab 258, dim 64, 3 layers, 4 heads (2 kv, head dim 32), ffn 96, context 4096, rope theta 10000, qkv bias, 8 experts (2 used, ffn 32), 1 shared, 1 leading dense layers"},
		{[]string{"--layers", "3", "--dim", "64", "--heads", "4", "--ffn", "96", "--dtype", "q8_0", "--arch", "deepseek2", "--q-lora-rank", "64", "--kv-lora-rank", "64", "--rope-dims", "32",
			"--key-length-mla", "96", "--value-length-mla", "64", "--experts", "8", "--experts-used", "2", "--expert-ffn", "32", "--shared-experts", "1", "--dense-layers", "1",
			"--expert-gating", "sigmoid", "--expert-selection-bias", "--expert-weights-norm", "--expert-weights-scale", "1.8", "--rope-scaling", "yarn", "--rope-scaling-factor", "4", "--rope-orig-ctx", "1024", "--yarn-log-mul", "0.0707",
			"--expert-groups", "4", "--expert-groups-used", "2"},
			"deepseek2 vocab 258, dim 64, 3 layers, 4 heads (1 kv, head dim 96), ffn 96, context 4096, rope theta 10000, 8 experts (2 used, ffn 32), 1 shared, 1 leading dense layers, expert selection bias, experts in 4 groups (2 used), latent attention (q rank 64, kv rank 64, key 96, value 64), rope over 32 of 96 dims"},
		{[]string{"--layers", "2", "--dim", "64", "--heads", "4", "--ffn", "96", "--arch", "deepseek2", "--kv-lora-rank", "32", "--rope-dims", "16", "--key-length-mla", "48", "--value-length-mla", "32",
			"--experts", "4", "--experts-used", "2", "--shared-experts", "1", "--dense-layers", "1", "--fused-gate-up-exps"},
			"4 experts (2 used, ffn 48), 1 shared, 1 leading dense layers, experts' gate and up fused"},
		{[]string{"--layers", "1", "--dim", "64", "--heads", "4", "--ffn", "64", "--arch", "qwen3", "--context", "8192", "--rope-scaling", "yarn", "--rope-scaling-factor", "4", "--rope-orig-ctx", "2048"},
			`rope scaling "yarn" factor 4 (original context 2048, attention factor 0)`},
		{[]string{"--layers", "1", "--dim", "64", "--heads", "4", "--ffn", "64", "--rope-scaling", "linear", "--rope-scaling-factor", "2", "--rope-attn-factor", "0.5"},
			`llama vocab 258, dim 64, 1 layers, 4 heads (4 kv, head dim 16), ffn 64, context 4096, rope theta 10000, rope scaling "linear" factor 2 (original context 0, attention factor 0.5)`},
		{[]string{"--layers", "1", "--dim", "64", "--heads", "4", "--ffn", "64", "--arch", "mistral3", "--context", "8192", "--rope-scaling", "yarn", "--rope-scaling-factor", "16",
			"--rope-orig-ctx", "512", "--yarn-beta-fast", "32", "--yarn-beta-slow", "1", "--yarn-log-mul", "1", "--attn-temp-scale", "0.1"},
			`mistral3 vocab 258, dim 64, 1 layers, 4 heads (4 kv, head dim 16), ffn 64, context 8192, rope theta 10000, rope scaling "yarn" factor 16 (original context 512, attention factor 0), yarn beta fast 32, beta slow 1, log multiplier 1, attention temperature scale 0.1 every 512 positions`},
		{[]string{"--layers", "1", "--dim", "64", "--heads", "4", "--ffn", "64", "--rope-freqs", "--rope-theta", "500000"},
			"llama vocab 258, dim 64, 1 layers, 4 heads (4 kv, head dim 16), ffn 64, context 4096, rope theta 500000, rope frequency factors"},
		{[]string{"--layers", "3", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--ffn", "64", "--dtype", "q8_0", "--arch", "gpt-oss", "--experts", "8", "--experts-used", "2", "--expert-ffn", "32", "--sliding-window", "32", "--rope-theta", "150000",
			"--context", "131072", "--rope-scaling", "yarn", "--rope-scaling-factor", "32", "--rope-orig-ctx", "4096"},
			"gpt-oss vocab 258, dim 64, 3 layers, 4 heads (2 kv, head dim 32), ffn 64, context 131072, rope theta 150000, qkv bias, 8 experts (2 used, ffn 32), sliding window 32 in 2 of 3 layers"},
		{[]string{"--layers", "2", "--dim", "64", "--heads", "4", "--ffn", "64", "--dtype", "f16", "--arch", "gpt-oss", "--experts", "4", "--experts-used", "2", "--expert-ffn", "32", "--sliding-window", "8", "--expert-dtype", "mxfp4"},
			"MXFP4:6"},
		{[]string{"--layers", "4", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--ffn", "64", "--dtype", "f16", "--arch", "qwen3next", "--experts", "8", "--experts-used", "2", "--expert-ffn", "32",
			"--ssm-key-heads", "1", "--ssm-value-heads", "4", "--ssm-state-size", "16"},
			"qwen3next vocab 258, dim 64, 4 layers, 4 heads (2 kv, head dim 32), ffn 64, context 4096, rope theta 10000, 8 experts (2 used, ffn 32), rope over 8 of 32 dims"},
	} {
		out := filepath.Join(dir, "m.gguf")
		var stdout bytes.Buffer
		if err := run(append([]string{"write", "--out", out}, tc.args...), &stdout, &stdout); err != nil {
			t.Fatalf("write %v: %v", tc.args, err)
		}
		stdout.Reset()
		if err := run([]string{"info", out}, &stdout, &stdout); err != nil {
			t.Fatalf("info: %v", err)
		}
		if !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("info of %v:\n%s\nlacks %q", tc.args, stdout.String(), tc.want)
		}
	}
	for _, args := range [][]string{
		{"write"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--heads", "3", "--kv-heads", "2"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--dtype", "q4_k"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--vocab", "100"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "qwen3moe"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "qwen3moe", "--experts", "4", "--experts-used", "5"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--experts", "4", "--experts-used", "2"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "glm4moe", "--experts", "4", "--experts-used", "2"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--rope-scaling", "longrope", "--rope-scaling-factor", "4"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--rope-scaling-factor", "-1"},
		// The llama family rotates whole heads: the file would not load.
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--rope-dims", "8"},
		// llama reads no attention temperature (mistral3 does).
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--attn-temp-scale", "0.1"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "gpt-oss", "--experts", "4", "--experts-used", "2"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--sliding-window", "32"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "deepseek2", "--experts", "4", "--experts-used", "2", "--shared-experts", "1"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "deepseek2", "--kv-lora-rank", "32", "--rope-dims", "16", "--key-length-mla", "48", "--value-length-mla", "32", "--experts", "4", "--experts-used", "2", "--shared-experts", "1", "--head-dim", "32"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--kv-lora-rank", "32"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "glm4moe", "--experts", "4", "--experts-used", "2", "--shared-experts", "1", "--expert-selection-bias"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--expert-gating", "relu"},
		// llama.cpp reads glm4moe's experts apart only.
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "glm4moe", "--experts", "4", "--experts-used", "2", "--shared-experts", "1", "--fused-gate-up-exps"},
		// Groups are deepseek2's; glm4moe refuses them (the file would not load).
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "glm4moe", "--experts", "8", "--experts-used", "2", "--shared-experts", "1", "--expert-groups", "4", "--expert-groups-used", "2"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "deepseek2", "--kv-lora-rank", "32", "--rope-dims", "16", "--key-length-mla", "48", "--value-length-mla", "32", "--experts", "4", "--experts-used", "2", "--shared-experts", "1", "--expert-groups", "4", "--expert-groups-used", "1"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--expert-dtype", "mxfp4"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "qwen3moe", "--experts", "4", "--experts-used", "2", "--expert-dtype", "q4_0"},
		// qwen3next rotates by NEOX RoPE and scales no expert weights.
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "qwen3next", "--experts", "4", "--experts-used", "2", "--rope-sections", "2"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "qwen3next", "--experts", "4", "--experts-used", "2", "--expert-weights-scale", "2"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "qwen3next"},
		{"write", "--out", filepath.Join(dir, "x.gguf"), "--arch", "qwen35", "--ssm-fused-qkvz"},
		{"info", filepath.Join(dir, "missing.gguf")},
		{"frobnicate"},
	} {
		if err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestWriteFusedQKVZ: --ssm-fused-qkvz writes a qwen3next whose recurrent
// layers project through one ssm_in, which the loader reads back as such.
func TestWriteFusedQKVZ(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.gguf")
	args := []string{"write", "--out", out, "--layers", "4", "--dim", "64", "--heads", "4", "--ffn", "64", "--arch", "qwen3next", "--experts", "4", "--experts-used", "2", "--ssm-fused-qkvz"}
	if err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Open(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.Config.Recurrent.FusedQKVZ {
		t.Error("the file reads back without a fused ssm_in")
	}
	names := map[string]bool{}
	for _, tn := range m.Weights.Tensors() {
		names[tn.Name] = true
	}
	if !names["blk.0.ssm_in.weight"] || names["blk.0.attn_qkv.weight"] {
		t.Errorf("blk.0 has ssm_in %v, attn_qkv %v; want only ssm_in", names["blk.0.ssm_in.weight"], names["blk.0.attn_qkv.weight"])
	}
}

// TestWriteSplit: --split-max-tensors writes the model in parts named as
// gguf-split names them, no whole file, and info reads the model from its
// first part.
func TestWriteSplit(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.gguf")
	var stdout bytes.Buffer
	if err := run([]string{"write", "--out", out, "--builtin", "tiny", "--split-max-tensors", "10"}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, "m-00001-of-00004.gguf") // tiny: 39 tensors
	if !strings.Contains(stdout.String(), "wrote 4 parts") || !strings.Contains(stdout.String(), first) {
		t.Errorf("write said:\n%s", stdout.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"m-00001-of-00004.gguf", "m-00002-of-00004.gguf", "m-00003-of-00004.gguf", "m-00004-of-00004.gguf"}; !slices.Equal(names, want) {
		t.Errorf("files %v, want %v", names, want)
	}
	stdout.Reset()
	if err := run([]string{"info", first}, &stdout, &stdout); err != nil || !strings.Contains(stdout.String(), "llama vocab 258, dim 128, 4 layers") {
		t.Errorf("info: %v\n%s", err, stdout.String())
	}
}

package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGGUFRoundTrip(t *testing.T) {
	base := Random(smallConfig(), 7)
	qwen := smallConfig()
	qwen.Arch, qwen.QKVBias, qwen.TiedEmbeddings = ArchQwen2, true, true
	qwen3 := smallConfig()
	qwen3.Arch, qwen3.HeadDim, qwen3.TiedEmbeddings, qwen3.RopeTheta, qwen3.NormEps = ArchQwen3, 32, true, 1e6, 1e-6
	// Experts' stacked matrices are 3-D: [Dim, ExpertFFN, Experts].
	moe := qwen3
	moe.Arch, moe.Experts, moe.ExpertsUsed, moe.ExpertFFN = ArchQwen3MoE, 4, 2, 32
	moe.ExpertGating, moe.ExpertWeightsNorm = arch.GatingSoftmax, true
	for _, tc := range []struct {
		name string
		m    *Model
		typ  DType
	}{
		{"f32", base, F32},
		{"f16", base, F16},
		{"bf16", base, BF16},
		{"q8_0", base, Q8_0},
		{"qwen2-tied-bias", Random(qwen, 3), Q8_0},
		{"qwen3-head-norms", Random(qwen3, 5), F16},
		{"qwen3moe-experts-f16", Random(moe, 5), F16},
		{"qwen3moe-experts-q8_0", Random(moe, 5), Q8_0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := tc.m.Convert(tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			var done, total int64
			out, err := Load(writeFile(t, ggufBytes(t, in)), func(d, tot int64) { done, total = d, tot })
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			sameModel(t, in, out)
			if done != total || total == 0 {
				t.Errorf("progress ended at %d of %d", done, total)
			}
			// The written template comes back as the model's own Jinja
			// template and renders as the built-in did.
			chat := &Chat{Messages: []Message{{Role: "user", Content: "hi"}}, AddGenerationPrompt: true}
			a, errA := in.ChatTemplate.Render(chat)
			b, errB := out.ChatTemplate.Render(chat)
			if out.ChatTemplate.Name() != "jinja" || errA != nil || errB != nil || a != b {
				t.Errorf("chat template %s rendered %q, loaded %s rendered %q (%v, %v)", in.ChatTemplate.Name(), a, out.ChatTemplate.Name(), b, errA, errB)
			}
		})
	}
}

func TestConvertError(t *testing.T) {
	cfg := smallConfig()
	cfg.FFN = 40 // not a multiple of Q8_0's 32-element blocks
	if _, err := Random(cfg, 1).Convert(Q8_0); err == nil || !strings.Contains(err.Error(), "multiple of 32") {
		t.Fatalf("Convert(Q8_0) of ffn 40: got %v, want a block-size error", err)
	}
}

func TestOpen(t *testing.T) {
	m, err := Open("builtin:tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.VocabSize != ByteVocabSize || m.Config.BOS != ByteBOS {
		t.Errorf("tiny: vocab %d bos %d", m.Config.VocabSize, m.Config.BOS)
	}
	again, _ := Builtin("tiny")
	if !bytes.Equal(m.Weights.Layers[0].Q.Data, again.Weights.Layers[0].Q.Data) {
		t.Error("builtin:tiny is not deterministic")
	}
	if _, err := Open("builtin:huge", nil); err == nil {
		t.Error("builtin:huge: no error")
	}
	p := writeFile(t, ggufBytes(t, m))
	loaded, err := Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Close(); err != nil {
		t.Fatal(err)
	}
}

// patch returns a copy of b with the little-endian value v written at off.
func patch(b []byte, off int, v uint32) []byte {
	c := bytes.Clone(b)
	binary.LittleEndian.PutUint32(c[off:], v)
	return c
}

func TestLoadErrors(t *testing.T) {
	good := ggufBytes(t, Random(smallConfig(), 1))
	bad := Random(smallConfig(), 1)
	bad.Weights.Layers[1].Up.Shape = []int{64, 95}
	bad.Weights.Layers[1].Up.Data = bad.Weights.Layers[1].Up.Data[:64*95*4]
	badShape := ggufBytes(t, bad)
	gpt := Random(smallConfig(), 1)
	gpt.Config.Arch = "gptneox"
	// A template the engine cannot parse fails the load rather than
	// falling back to a built-in prompt.
	badTemplate := Random(smallConfig(), 1)
	badTemplate.ChatTemplate = ChatML{Source: "<|im_start|>{% for m in messages %}{{ m.content }"}
	unclosed := Random(smallConfig(), 1)
	unclosed.ChatTemplate = ChatML{Source: "<|im_start|>\n{% if messages %}{{ messages[0].content }}"}

	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
		path string
		want string
	}{
		{name: "missing", path: filepath.Join(dir, "nope.gguf"), want: "no such file"},
		{name: "directory", path: dir, want: "not a regular file"},
		{name: "empty", data: []byte{}, want: "empty"},
		{name: "magic", data: append([]byte("GGML"), good[4:]...), want: "not a GGUF file"},
		{name: "version", data: patch(good, 4, 9), want: "unsupported GGUF version 9"},
		{name: "header only", data: good[:20], want: "truncated"},
		{name: "metadata cut", data: good[:200], want: "truncated"},
		{name: "data cut", data: good[:len(good)-100], want: "truncated"},
		{name: "huge tensor count", data: patch(good, 8, 0xffffff), want: "tensor count"},
		{name: "tensor shape", data: badShape, want: "blk.1.ffn_up.weight has shape [64 95], want [64 96]"},
		{name: "chat template syntax", data: ggufBytes(t, badTemplate), want: "tokenizer.chat_template: parse chat template: line 1: unexpected '}'"},
		{name: "chat template unclosed", data: ggufBytes(t, unclosed), want: "tokenizer.chat_template: parse chat template: line 2: 'if' block is never closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path
			if p == "" {
				p = writeFile(t, tc.data)
			}
			_, err := Load(p, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %q lacks %q or the path", err, tc.want)
			}
		})
	}
	var err error
	for n := 0; n < len(good); n += 97 {
		if _, err = fromGGUF(good[:n], nil, LoadOptions{}); err == nil {
			t.Fatalf("file cut at %d of %d bytes loaded", n, len(good))
		}
	}
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("cut file: %v does not wrap ErrTruncated", err)
	}
}

func TestWriteUnsupportedArch(t *testing.T) {
	m := Random(smallConfig(), 1)
	m.Config.Arch = "gptneox"
	if err := WriteGGUF(&bytes.Buffer{}, m); err == nil || !strings.Contains(err.Error(), "unsupported architecture") {
		t.Fatalf("got %v", err)
	}
}

func FuzzGGUFReader(f *testing.F) {
	// Small seeds: Go's mutator slows down sharply on large inputs.
	cfg := Config{VocabSize: ByteVocabSize, Dim: 32, Layers: 1, Heads: 2, KVHeads: 1, FFN: 32, ContextLen: 64, TiedEmbeddings: true}
	q8, err := Random(cfg, 1).Convert(Q8_0)
	if err != nil {
		f.Fatal(err)
	}
	good := ggufBytes(f, q8)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:64])
	f.Add(patch(good, 16, 1<<30))
	f.Add([]byte("GGUF"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := fromGGUF(data, nil, LoadOptions{})
		if err != nil {
			return
		}
		// A file that loads must be usable.
		m.Tokenizer.Decode(m.Tokenizer.Encode("fuzz ✓", true))
		for _, tn := range m.Weights.Tensors() {
			tn.Row(tn.Rows()-1, make([]float32, tn.Cols()))
		}
	})
}

// TestBlockQuantizedTypesReadAsBytes: Q4_0 and the K-quants are read (their
// sizes known, their bytes kept as stored) for the ggml executor, though
// this package neither decodes nor encodes them.
func TestBlockQuantizedTypesReadAsBytes(t *testing.T) {
	for _, tc := range []struct {
		typ        DType
		cols, want int
	}{
		{Q4_0, 64, 2 * 18}, {Q4_K, 512, 2 * 144}, {Q5_K, 256, 176}, {Q6_K, 256, 210},
	} {
		if got, err := tc.typ.RowBytes(tc.cols); err != nil || got != tc.want {
			t.Errorf("%s.RowBytes(%d) = %d, %v; want %d", tc.typ, tc.cols, got, err, tc.want)
		}
		if _, err := tc.typ.RowBytes(tc.cols + 16); err == nil {
			t.Errorf("%s.RowBytes(%d): want an error for a partial block", tc.typ, tc.cols+16)
		}
		if !tc.typ.Supported() || tc.typ.Decodable() {
			t.Errorf("%s: supported %v, decodable %v; want true, false", tc.typ, tc.typ.Supported(), tc.typ.Decodable())
		}
		if _, err := Encode(tc.typ, make([]float32, tc.cols)); err == nil {
			t.Errorf("Encode(%s): want an error", tc.typ)
		}
	}
	if DType(3).Supported() {
		t.Error("Q4_1 reported as supported")
	}

	// A file whose matrices are Q4_K loads with its bytes as written.
	cfg := Config{Arch: ArchLlama, VocabSize: 300, Dim: 256, Layers: 1, Heads: 4, KVHeads: 2, FFN: 256, ContextLen: 64}
	m := Random(cfg, 2)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range m.Weights.Tensors() {
		if len(tt.Shape) != 2 {
			continue
		}
		rb, _ := Q4_K.RowBytes(tt.Cols())
		tt.Type, tt.Data = Q4_K, make([]byte, rb*tt.Rows())
		for i := range tt.Data {
			tt.Data[i] = byte(rng.Uint32())
		}
	}
	out, err := Load(writeFile(t, ggufBytes(t, m)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	inT, outT := m.Weights.Tensors(), out.Weights.Tensors()
	for i := range inT {
		if inT[i].Type != outT[i].Type || !bytes.Equal(inT[i].Data, outT[i].Data) {
			t.Errorf("tensor %s: %s became %s or its bytes changed", inT[i].Name, inT[i].Type, outT[i].Type)
		}
	}
}

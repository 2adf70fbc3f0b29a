package model

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
)

// vocabTestSep separates the cases of a .gguf.inp file, as llama.cpp's
// tests/test-tokenizer-0.cpp reads them.
const vocabTestSep = "\n__ggml_vocab_test__\n"

// vocabRefused names the vocabularies of llama.cpp's models/ whose
// tokenizer kvpilot refuses, with what the load error must name.
var vocabRefused = map[string]string{
	"bert-bge":       `tokenizer model "bert"`,
	"nomic-bert-moe": `tokenizer model "t5"`,
}

// vocabTokenizers caches LoadTokenizer's results by path: the vocabularies
// take a second or more to load (Gemma 4's has 262k tokens, 514k merges).
var vocabTokenizers sync.Map

type loadedTokenizer struct {
	tok Tokenizer
	err error
}

func loadVocab(path string) (Tokenizer, error) {
	if v, ok := vocabTokenizers.Load(path); ok {
		l := v.(loadedTokenizer)
		return l.tok, l.err
	}
	tok, err := LoadTokenizer(path)
	vocabTokenizers.Store(path, loadedTokenizer{tok, err})
	return tok, err
}

// vocabCase is one case of a .gguf.inp/.gguf.out pair.
type vocabCase struct {
	text string
	want []int32
}

// readVocabCases reads the cases of a vocab file as test-tokenizer-0.cpp
// does: the input split at each separator (none after the last), one line
// of space-separated ids per case.
func readVocabCases(t *testing.T, gguf string) []vocabCase {
	t.Helper()
	inp, err := os.ReadFile(gguf + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(gguf + ".out")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for rest := string(inp); rest != ""; {
		text, after, found := strings.Cut(rest, vocabTestSep)
		texts = append(texts, text)
		if !found {
			break
		}
		rest = after
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d inputs, %d outputs", gguf, len(texts), len(lines))
	}
	cases := make([]vocabCase, len(texts))
	for i, line := range lines {
		cases[i].text = texts[i]
		for _, f := range strings.Fields(line) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", gguf, i+1, err)
			}
			cases[i].want = append(cases[i].want, int32(id))
		}
	}
	return cases
}

// TestTokenizerVocabs holds every tokenizer to llama.cpp's own test
// vocabularies: each models/ggml-vocab-*.gguf loads through LoadTokenizer
// and tokenizes every case of its .inp file to exactly the ids of its .out
// file (no BOS, control tokens as text, as test-tokenizer-0 runs them) and
// decodes back to the text, or is one kvpilot refuses, at load, naming what
// it does not support.
func TestTokenizerVocabs(t *testing.T) {
	src := llamacpp.Source(t)
	files, err := filepath.Glob(filepath.Join(src, "models", "ggml-vocab-*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		llamacpp.Missing(t, "no models/ggml-vocab-*.gguf in %s", src)
	}
	var summary []string
	seen := map[string]bool{}
	for _, path := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ggml-vocab-"), ".gguf")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			tok, err := loadVocab(path)
			if want, refused := vocabRefused[name]; refused {
				if err == nil {
					t.Fatalf("loaded; want it refused naming %s", want)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not name %s", err, want)
				}
				summary = append(summary, fmt.Sprintf("%s: refused (%v)", name, err))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path + ".inp"); os.IsNotExist(err) {
				summary = append(summary, name+": loads (no cases)")
				return
			}
			enc, ok := tok.(interface {
				encode(text string, addBOS, control bool) []int32
			})
			if !ok {
				t.Fatalf("tokenizer %T has no encode", tok)
			}
			cases := readVocabCases(t, path)
			pass := 0
			for _, c := range cases {
				got := enc.encode(c.text, false, false)
				if !slices.Equal(got, c.want) {
					t.Errorf("%q: got %v, want %v", c.text, got, c.want)
					continue
				}
				if dec := tok.Decode(got); dec != c.text {
					t.Errorf("%q decodes to %q", c.text, dec)
					continue
				}
				pass++
			}
			summary = append(summary, fmt.Sprintf("%s: %d/%d cases", name, pass, len(cases)))
		})
	}
	// The vocabularies of llama.cpp v0.5.0 with cases: none may go
	// missing unnoticed.
	for _, name := range []string{"command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2", "llama-bpe",
		"llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder"} {
		if !seen[name] {
			t.Errorf("no models/ggml-vocab-%s.gguf in %s", name, src)
		}
	}
	t.Logf("llama.cpp vocab tests:\n%s", strings.Join(summary, "\n"))
}

// TestUnknownPreTokenizerRefused: a tokenizer.ggml.pre kvpilot does not know
// is a load error that names it and lists the known ones, never a silent
// fallback to another model's splitting.
func TestUnknownPreTokenizerRefused(t *testing.T) {
	tokens := make([]string, 256)
	for b := range 256 {
		tokens[b] = string(byteToRune[b])
	}
	f := &ggufFile{kv: map[string]any{
		"tokenizer.ggml.model":  "gpt2",
		"tokenizer.ggml.tokens": tokens,
		"tokenizer.ggml.merges": []string{},
		"tokenizer.ggml.pre":    "made-up-pre",
	}}
	_, err := tokenizerFromGGUF(f)
	if err == nil {
		t.Fatal("unknown pre-tokenizer loaded")
	}
	for _, want := range []string{`"made-up-pre"`, "tokenizer.ggml.pre", "gpt-2", "llama-bpe", "qwen35", "gpt-4o", "tekken", "kimi-k2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	// llama.cpp's own names load; "" is its default.
	for _, pre := range []string{"", "default", "gpt-2", "qwen35", "deepseek-v3", "glm4", "minimax-m2"} {
		f.kv["tokenizer.ggml.pre"] = pre
		if _, err := tokenizerFromGGUF(f); err != nil {
			t.Errorf("pre %q: %v", pre, err)
		}
	}
}

// TestGemma4TokenizerRoundTrip: Gemma 4's tokenizer reads back from the
// metadata WriteGGUF writes for it (tokenizer.ggml.model "gemma4", its
// merges and byte tokens).
func TestGemma4TokenizerRoundTrip(t *testing.T) {
	path := filepath.Join(llamacpp.Source(t), "models", "ggml-vocab-gemma-4.gguf")
	tok, err := loadVocab(path)
	if err != nil {
		t.Fatal(err)
	}
	bpe := tok.(*BPETokenizer)
	f := &ggufFile{kv: map[string]any{"tokenizer.ggml.bos_token_id": uint32(bpe.bos)}}
	for _, kv := range bpe.ggufMetadata() {
		f.kv[kv.key] = kv.value
	}
	back, err := tokenizerFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	text := "Hello, y'all!\n\n  café 😁 ?我想在apple工作1314151天～\x01"
	want := tok.Encode(text, true)
	if got := back.Encode(text, true); !slices.Equal(got, want) {
		t.Fatalf("read back: %v, want %v", got, want)
	}
	if want[0] != bpe.bos {
		t.Errorf("first token %d, want BOS %d (llama.cpp always adds it for Gemma 4)", want[0], bpe.bos)
	}
	if dec := back.Decode(want[1:]); dec != text {
		t.Errorf("decodes to %q", dec)
	}
}

// TestPreTokenizerFallback: a model whose tokenizer.ggml.pre is unknown is
// refused, or, with LoadOptions.PreTokenizerFallback, split as that names
// and marked so; a fallback kvpilot does not know is refused too.
func TestPreTokenizerFallback(t *testing.T) {
	m := Random(smallConfig(), 1)
	m.Tokenizer.(*BPETokenizer).pre = "made-up-pre"
	data := ggufBytes(t, m)
	if _, err := fromGGUF(data, nil, LoadOptions{}); err == nil || !strings.Contains(err.Error(), `"made-up-pre"`) {
		t.Fatalf("without a fallback: %v, want an error naming the pre-tokenizer", err)
	}
	back, err := fromGGUF(data, nil, LoadOptions{PreTokenizerFallback: "gpt-2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"made-up-pre"`, `"gpt-2"`} {
		if !strings.Contains(back.PreTokenizerFallback, want) {
			t.Errorf("PreTokenizerFallback %q does not name %s", back.PreTokenizerFallback, want)
		}
	}
	if got := back.Tokenizer.(*BPETokenizer).pre; got != "made-up-pre" {
		t.Errorf("pre written back as %q, want the file's", got)
	}
	if _, err := fromGGUF(data, nil, LoadOptions{PreTokenizerFallback: "bogus"}); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("fallback bogus: %v, want an error naming it", err)
	}
	ok, err := fromGGUF(ggufBytes(t, Random(smallConfig(), 1)), nil, LoadOptions{PreTokenizerFallback: "gpt-2"})
	if err != nil || ok.PreTokenizerFallback != "" {
		t.Errorf("a known pre-tokenizer with a fallback set: %v, %q", err, ok.PreTokenizerFallback)
	}
}

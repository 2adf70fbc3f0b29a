package model

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/llamacpp"
)

// longTokenizerInputs are the texts of BenchmarkTokenizeLong, 1 MiB each:
// one word with no space or newline (a single pre-token for every
// pre-tokenizer, the whole input of a SentencePiece merge), the same
// character repeated (merges chain into the longest runs the vocabulary
// has), and ordinary code (the Go standard library's net/http, the same
// bytes for any commit of this repository).
func longTokenizerInputs(b *testing.B) map[string]string {
	const size = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	word := make([]byte, size)
	for i := range word {
		word[i] = byte('a' + rng.IntN(26))
	}
	files, err := filepath.Glob(filepath.Join(runtime.GOROOT(), "src", "net", "http", "*.go"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no Go source under GOROOT for the code input: %v", err)
	}
	var code strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		code.Write(data)
		if code.Len() >= size {
			break
		}
	}
	if code.Len() < size {
		b.Fatalf("only %d bytes of code under %s", code.Len(), runtime.GOROOT())
	}
	return map[string]string{
		"word":   string(word),
		"repeat": strings.Repeat("a", size),
		"code":   code.String()[:size],
	}
}

// BenchmarkTokenizeLong tokenizes 1 MiB inputs with llama.cpp's test
// vocabularies (byte-level BPE with Llama 3's pre-tokenizer, SentencePiece
// with Llama 2's scores) and the built-in byte vocabulary: the memory a
// long prompt costs the pod while it is preprocessed (B/op) and whether
// merging grows linearly with a word's length (ns/op).
func BenchmarkTokenizeLong(b *testing.B) {
	inputs := longTokenizerInputs(b)
	vocabs := map[string]func(b *testing.B) Tokenizer{
		"bytes": func(*testing.B) Tokenizer { return NewByteTokenizer(ByteVocabSize) },
	}
	for _, name := range []string{"llama-bpe", "llama-spm"} {
		vocabs[name] = func(b *testing.B) Tokenizer {
			tok, err := loadVocab(filepath.Join(llamacpp.Source(b), "models", "ggml-vocab-"+name+".gguf"))
			if err != nil {
				b.Fatal(err)
			}
			return tok
		}
	}
	for _, vocab := range []string{"llama-bpe", "llama-spm", "bytes"} {
		for _, input := range []string{"word", "repeat", "code"} {
			b.Run(vocab+"/"+input, func(b *testing.B) {
				tok := vocabs[vocab](b)
				text := inputs[input]
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				var n int
				for b.Loop() {
					n = len(tok.Encode(text, false))
				}
				b.ReportMetric(float64(n), "tokens")
			})
		}
	}
}

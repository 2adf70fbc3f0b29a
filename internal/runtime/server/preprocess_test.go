package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/codec"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// processCPU is the user and system CPU time this process used so far.
func processCPU(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// badWordsAtBodyLimit is a completion request with 300k bad words (about
// 3 MiB, under the body limit), some repeated, as real lists have.
func badWordsAtBodyLimit() string {
	var b strings.Builder
	b.WriteString(`{"prompt":"Hello","max_tokens":2,"bad_words":[`)
	for i := range 300_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"w%d"`, i%250_000)
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestBadWordsAtBodyLimit: a request with 300k bad words is tokenized,
// compiled and answered. What it costs is BenchmarkBadWordsAtBodyLimit's
// (about 1.1 s of CPU on the 2-core development machines; the pairwise
// de-duplication this replaced took minutes); the compile's linearity is
// sampling's TestBadWordsCompileLinear.
func TestBadWordsAtBodyLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("300k words; not in -short (race) runs")
	}
	env, _ := newCPUEnv(t)
	if r := env.post("/v1/completions", badWordsAtBodyLimit()); r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

// BenchmarkBadWordsAtBodyLimit: the CPU time of a request with 300k bad
// words (user and system, all goroutines: the shared test machine's load
// stretches wall time without the server doing more work).
func BenchmarkBadWordsAtBodyLimit(b *testing.B) {
	env, _ := newCPUEnv(b)
	body := badWordsAtBodyLimit()
	cpu0 := processCPU(b)
	for b.Loop() {
		if r := env.post("/v1/completions", body); r.status != http.StatusOK {
			b.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	b.ReportMetric((processCPU(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
}

// leavingCodec is a codec whose client leaves while the first text is
// tokenized; it counts the texts tokenized.
type leavingCodec struct {
	codec.Codec
	leave   context.CancelFunc
	encoded int
}

func (c *leavingCodec) Encode(text string, addSpecial bool) []int32 {
	c.encoded++
	c.leave()
	return c.Codec.Encode(text, addSpecial)
}

// TestBadWordsStopWhenTheClientLeaves: a client that leaves while its
// bad_words are tokenized stops the tokenizing at the next word, however
// few and long the words (each is at most openai.MaxBadWordBytes).
func TestBadWordsStopWhenTheClientLeaves(t *testing.T) {
	m, err := model.Open("builtin:tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &leavingCodec{Codec: codec.Model{Tokenizer: m.Tokenizer, Template: m.ChatTemplate}, leave: cancel}
	s := &Server{cfg: Config{Codec: c}}
	words := make([]string, 60)
	for i := range words {
		words[i] = fmt.Sprintf("w%d-", i) + strings.Repeat("z", 1000)
	}
	if _, apiErr := s.compileBadWords(ctx, words); apiErr == nil || apiErr.Status != statusClientClosed {
		t.Fatalf("compileBadWords after the client left: %v, want the request cancelled", apiErr)
	}
	// The word in hand, with and without its leading space.
	if c.encoded > 2 {
		t.Errorf("%d texts tokenized after the client left while the first was", c.encoded-1)
	}
}

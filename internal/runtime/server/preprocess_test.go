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
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBadWordsAtBodyLimit: 300k bad words (about 3 MiB, under the body
// limit) are tokenized and compiled in a few seconds of CPU at most (about
// 1.1 s on the 2-core development machines). The pairwise de-duplication
// this replaced took minutes, and kept burning CPU after the client left:
// the bound catches that with room for a slower machine, where 1 s did
// not (1.06-1.12 s here on the code before and after this bound).
func TestBadWordsAtBodyLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("a timed test; skipped in -short (race) runs")
	}
	env, _ := newCPUEnv(t)
	var b strings.Builder
	b.WriteString(`{"prompt":"Hello","max_tokens":2,"bad_words":[`)
	for i := range 300_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"w%d"`, i%250_000) // some repeated, as real lists have
	}
	b.WriteString(`]}`)
	// CPU time, not wall time: the shared test machine's load stretches
	// the latter without the server doing more work.
	start, cpu0 := time.Now(), processCPU(t)
	r := env.post("/v1/completions", b.String())
	elapsed, used := time.Since(start), processCPU(t)-cpu0
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	t.Logf("300k bad_words: %v wall, %v CPU", elapsed.Round(time.Millisecond), used.Round(time.Millisecond))
	if used > 5*time.Second {
		t.Errorf("a request with 300k bad_words took %v of CPU, want < 5s", used)
	}
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

package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// TestSamplingWorkersChangeNoToken: the same requests (temperature, top-p,
// top-k, penalties, logprobs, min_tokens, seeds) give the same tokens and
// logprobs whether the loop draws every token itself or goroutines draw
// them ahead of it (sampleAhead).
func TestSamplingWorkersChangeNoToken(t *testing.T) {
	run := func(workers int) (map[string][]int32, map[string][]float32) {
		o := defaultOpts()
		x := newKVExec(o.numBlocks, o.blockSize, testVocab)
		x.logits = true
		e, err := New(Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 64, MaxModelLen: 512, VocabSize: testVocab, SamplingWorkers: workers,
			KV:  kvcache.Config{NumBlocks: o.numBlocks, BlockSize: o.blockSize, EnablePrefixCache: true},
			EOS: []int32{x.eos}, Decoder: letters{eos: x.eos}}, x)
		if err != nil {
			t.Fatal(err)
		}
		params := []Params{
			{Temperature: 5},
			{Temperature: 5, TopP: 0.9},
			{Temperature: 3, TopK: 8},
			{Temperature: 4, PresencePenalty: 0.7, FrequencyPenalty: 0.3},
			{Temperature: 5, Logprobs: true, TopLogprobs: 3},
			{Temperature: 5, MinTokens: 6},
			{},
			{Logprobs: true},
		}
		streams := map[string]*Stream{}
		for i := range 16 {
			p := params[i%len(params)]
			p.MaxTokens, p.Seed, p.HasSeed = 12, uint64(100+i), true
			r := &Request{ID: fmt.Sprintf("r%02d", i), Prompt: prompt(3+i%5, uint64(i)), Params: p}
			streams[r.ID] = mustSubmit(t, e, r)
		}
		for range 200 {
			e.Step(context.Background())
			if r, w := e.Pending(); r+w == 0 {
				break
			}
		}
		toks, lps := map[string][]int32{}, map[string][]float32{}
		for id, s := range streams {
			tk, _, lp, _, err := s.WaitAll(context.Background())
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			toks[id] = tk
			for _, l := range lp {
				lps[id] = append(lps[id], l.Logprob)
			}
		}
		return toks, lps
	}
	wantToks, wantLps := run(1)
	gotToks, gotLps := run(4)
	if diff := cmp.Diff(wantToks, gotToks); diff != "" {
		t.Errorf("tokens with 4 sampling goroutines differ from the loop's own (-loop +goroutines):\n%s", diff)
	}
	if diff := cmp.Diff(wantLps, gotLps); diff != "" {
		t.Errorf("logprobs differ (-loop +goroutines):\n%s", diff)
	}
}

// TestSamplingAheadDoesNotAllocate: a steady-state step whose tokens four
// goroutines draw ahead of the loop allocates nothing.
func TestSamplingAheadDoesNotAllocate(t *testing.T) {
	o := defaultOpts()
	x := newKVExec(o.numBlocks, o.blockSize, testVocab)
	x.logits = true
	e, err := New(Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 64, MaxModelLen: 1024, VocabSize: testVocab, SamplingWorkers: 4,
		KV:  kvcache.Config{NumBlocks: o.numBlocks, BlockSize: o.blockSize},
		EOS: []int32{x.eos}, Decoder: letters{eos: x.eos}}, x)
	if err != nil {
		t.Fatal(err)
	}
	var streams []*Stream
	for i := range 8 {
		r := &Request{Prompt: prompt(5, uint64(i)), Params: Params{MaxTokens: 400, IgnoreEOS: true, Temperature: 0.9, TopP: 0.9, Logprobs: true, TopLogprobs: 2}}
		streams = append(streams, mustSubmit(t, e, r))
	}
	ctx := context.Background()
	drain, cancel := context.WithCancel(ctx)
	cancel()
	step := func() {
		e.Step(ctx)
		for _, s := range streams {
			_, _ = s.Next(drain)
		}
	}
	for range 40 {
		step()
	}
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Errorf("a steady-state step with sampling goroutines allocates %v times, want 0", a)
	}
	if len(e.samplers) != 4 {
		t.Errorf("%d samplers, want 4 (the loop and three goroutines)", len(e.samplers))
	}
}

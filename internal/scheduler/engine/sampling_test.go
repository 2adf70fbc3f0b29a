package engine

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

func TestLogprobsMatchGreedyChoices(t *testing.T) {
	o := defaultOpts()
	o.logits = true
	env := newEnv(t, o)
	r := req("lp", prompt(6, 3), 12)
	r.Params.IgnoreEOS = true
	r.Params.Logprobs, r.Params.TopLogprobs = true, 3
	s := mustSubmit(t, env.e, r)
	env.runUntilIdle(t, 100)
	ctx := context.Background()
	toks, _, lps, _, err := s.WaitAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 12 || len(lps) != 4*len(toks) {
		t.Fatalf("%d tokens, %d logprob entries: want 12 and 4 per token", len(toks), len(lps))
	}
	for i, tok := range toks {
		e := lps[4*i : 4*i+4]
		if e[0].ID != tok || e[1].ID != tok || e[0].Logprob != e[1].Logprob {
			t.Errorf("token %d = %d: entries %+v, want the chosen token first and as the top-1", i, tok, e)
		}
		sum := 0.0
		for j, x := range e[1:] {
			if x.Logprob > 0 || (j > 0 && x.Logprob > e[j].Logprob) {
				t.Errorf("token %d: top logprobs %+v not <= 0 and descending", i, e[1:])
			}
			sum += math.Exp(float64(x.Logprob))
		}
		if sum > 1+1e-5 {
			t.Errorf("token %d: top-3 probabilities sum to %v > 1", i, sum)
		}
	}
}

func TestLogitProcessorsReachTheSampler(t *testing.T) {
	o := defaultOpts()
	o.logits = true
	env := newEnv(t, o)
	run := func(p Params) []int32 {
		t.Helper()
		r := req("p", prompt(5, 9), 10)
		p.MaxTokens, p.IgnoreEOS = 10, true
		r.Params = p
		s := mustSubmit(t, env.e, r)
		env.runUntilIdle(t, 100)
		toks, _, _ := collect(t, s)
		return toks
	}
	plain := run(Params{})
	// The executor's winner has logit 10 and the rest at most 0.875: a
	// bias of +20 on one id makes it win every step.
	for i, tok := range run(Params{LogitBias: []sampling.Bias{{ID: 5, Value: 20}}}) {
		if tok != 5 {
			t.Fatalf("with a +20 bias on token 5, token %d is %d", i, tok)
		}
	}
	// A presence penalty above the winner's margin: no token twice.
	seen := map[int32]bool{}
	for _, tok := range run(Params{PresencePenalty: 20}) {
		if seen[tok] {
			t.Fatalf("presence penalty 20: token %d repeated", tok)
		}
		seen[tok] = true
	}
	// Banning the plain run's first token as a bad word changes that step.
	if got := run(Params{BadWords: badWords(t, []int32{plain[0]})}); got[0] == plain[0] {
		t.Errorf("bad word %d still generated first", plain[0])
	}
}

// samplingExec is a kvExec that says it draws its own tokens.
type samplingExec struct{ *kvExec }

func (samplingExec) SamplesTokens() bool { return true }

func TestExecutorThatSamplesRefusesLogitFeatures(t *testing.T) {
	o := defaultOpts()
	x := newKVExec(o.numBlocks, o.blockSize, testVocab)
	e, err := New(Config{MaxModelLen: 512, VocabSize: testVocab,
		KV:      kvcache.Config{NumBlocks: o.numBlocks, BlockSize: o.blockSize},
		Decoder: letters{eos: x.eos}}, samplingExec{x})
	if err != nil {
		t.Fatal(err)
	}
	for field, p := range map[string]Params{
		"logprobs":           {Logprobs: true},
		"presence_penalty":   {PresencePenalty: 1},
		"repetition_penalty": {RepetitionPenalty: 1.1},
		"logit_bias":         {LogitBias: []sampling.Bias{{ID: 1, Value: 1}}},
		"bad_words":          {BadWords: badWords(t, []int32{1})},
		"min_p":              {MinP: 0.1},
	} {
		p.MaxTokens = 4
		_, err := e.Submit(context.Background(), &Request{Prompt: []int32{1}, Params: p})
		var inv *InvalidRequestError
		if !errors.As(err, &inv) || inv.Field != field {
			t.Errorf("%s: Submit error %v, want an invalid-request error naming it", field, err)
		}
	}
	// Out-of-vocabulary ids are refused whatever the executor.
	for field, p := range map[string]Params{
		"logit_bias":     {LogitBias: []sampling.Bias{{ID: testVocab, Value: 1}}},
		"bad_words":      {BadWords: badWords(t, []int32{-1})},
		"stop_token_ids": {StopTokenIDs: []int32{testVocab + 3}},
	} {
		p.MaxTokens = 4
		_, err := e.Submit(context.Background(), &Request{Prompt: []int32{1}, Params: p})
		var inv *InvalidRequestError
		if !errors.As(err, &inv) || inv.Field != field {
			t.Errorf("%s: Submit error %v, want an invalid-request error naming it", field, err)
		}
	}
}

// TestSteadyStateStepDoesNotAllocateWithProcessors: an iteration that
// applies every logit processor and computes logprobs allocates nothing
// once buffers have grown.
func TestSteadyStateStepDoesNotAllocateWithProcessors(t *testing.T) {
	o := defaultOpts()
	o.logits = true
	env := newEnv(t, o)
	var streams []*Stream
	for i := range 4 {
		r := req("a", prompt(9, uint64(i)), 300)
		r.Params = Params{MaxTokens: 300, IgnoreEOS: true, Temperature: 0.8, TopK: 20, MinP: 0.01,
			RepetitionPenalty: 1.1, FrequencyPenalty: 0.2, PresencePenalty: 0.1,
			LogitBias: []sampling.Bias{{ID: 3, Value: 1}}, BadWords: badWords(t, []int32{7, 8}),
			Logprobs: true, TopLogprobs: 5}
		streams = append(streams, mustSubmit(t, env.e, r))
	}
	ctx := context.Background()
	drain, cancel := context.WithCancel(ctx)
	cancel()
	step := func() {
		env.e.Step(ctx)
		for _, s := range streams {
			if _, err := s.Next(drain); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
	}
	for range 40 {
		step()
	}
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Errorf("a steady-state step allocates %v times, want 0", a)
	}
}

func badWords(t *testing.T, words ...[]int32) *sampling.BadWords {
	t.Helper()
	b, err := sampling.CompileBadWords(context.Background(), words)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// argmaxRecorder records, for every sampled sequence of every batch, the
// ArgmaxOnly flag the engine set, by the request's prompt length.
type argmaxRecorder struct {
	*kvExec
	seen map[int][]bool
}

func (r *argmaxRecorder) Execute(ctx context.Context, b *batch.Batch, out *batch.Output) error {
	for _, s := range b.Seqs {
		if s.Sample {
			r.seen[s.PromptLen] = append(r.seen[s.PromptLen], s.ArgmaxOnly)
		} else if s.ArgmaxOnly {
			r.seen[s.PromptLen] = append(r.seen[s.PromptLen], true) // a contract violation: shows as an extra entry
		}
	}
	return r.kvExec.Execute(ctx, b, out)
}

// TestArgmaxOnlyWhenTheEngineReadsNothingElse: the engine marks a sampled
// sequence ArgmaxOnly exactly when it would take the row's largest logit
// and read nothing else: greedy, without logprobs, logit processors, an
// output constraint or tokens banned until min_tokens.
func TestArgmaxOnlyWhenTheEngineReadsNothingElse(t *testing.T) {
	o := defaultOpts()
	x := newKVExec(o.numBlocks, o.blockSize, testVocab)
	x.logits = true
	rec := &argmaxRecorder{kvExec: x, seen: map[int][]bool{}}
	e, err := New(Config{MaxNumSeqs: 16, MaxNumBatchedTokens: 64, MaxModelLen: 512, VocabSize: testVocab,
		KV:  kvcache.Config{NumBlocks: o.numBlocks, BlockSize: o.blockSize},
		EOS: []int32{x.eos}, Decoder: letters{eos: x.eos}}, rec)
	if err != nil {
		t.Fatal(err)
	}
	v := grammar.NewVocab(testVocab, letters{eos: x.eos}.TokenBytes)
	g, err := grammar.Regex(`[a-z]+`)
	if err != nil {
		t.Fatal(err)
	}
	all := func(b bool) []bool { return []bool{b, b, b, b} }
	cases := []struct {
		name string
		p    Params
		con  bool
		want []bool
	}{
		{"greedy", Params{}, false, all(true)},
		{"top_k 1", Params{Temperature: 1, TopK: 1}, false, all(true)},
		{"temperature", Params{Temperature: 0.7}, false, all(false)},
		{"logprobs", Params{Logprobs: true}, false, all(false)},
		{"logit_bias", Params{LogitBias: []sampling.Bias{{ID: 3, Value: 1}}}, false, all(false)},
		{"presence_penalty", Params{PresencePenalty: 0.5}, false, all(false)},
		{"min_tokens", Params{MinTokens: 2}, false, []bool{false, false, true, true}},
		{"min_tokens, ignore_eos", Params{MinTokens: 2, IgnoreEOS: true}, false, all(true)},
		{"constraint", Params{}, true, all(false)},
	}
	var streams []*Stream
	for i, c := range cases {
		p := c.p
		p.MaxTokens, p.IgnoreEOS = 4, true
		if c.name == "min_tokens" {
			p.IgnoreEOS = false // EOS is banned until 2 tokens (the executor never picks it)
		}
		r := &Request{ID: c.name, Prompt: prompt(3+i, uint64(i)), Params: p} // the prompt's length names the case
		if c.con {
			r.Constraint = g.NewMatcher(v, []int32{x.eos})
		}
		streams = append(streams, mustSubmit(t, e, r))
	}
	for range 50 {
		e.Step(context.Background())
		if r, w := e.Pending(); r+w == 0 {
			break
		}
	}
	for i, c := range cases {
		collect(t, streams[i])
		if diff := cmp.Diff(c.want, rec.seen[3+i]); diff != "" {
			t.Errorf("%s: ArgmaxOnly per sampled step (-want +got):\n%s", c.name, diff)
		}
	}
}

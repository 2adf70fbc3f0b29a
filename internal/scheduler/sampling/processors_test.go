package sampling

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProcessors checks each processor's effect on the logits against its
// definition, and that Restore gives the original logits back.
func TestProcessors(t *testing.T) {
	base := []float32{4, -2, 1, 0.5, 3, 2}
	tests := []struct {
		name string
		p    Params
		h    History
		want []float32
	}{
		{"none", Params{}, History{Output: []int32{0, 0}}, base},
		{"repetition divides positive, multiplies negative, once per distinct token",
			Params{RepetitionPenalty: 2}, History{Prompt: []int32{1, 0}, Output: []int32{0, 0, 4}},
			[]float32{2, -4, 1, 0.5, 1.5, 2}},
		{"frequency counts output occurrences only",
			Params{FrequencyPenalty: 0.5}, History{Prompt: []int32{5}, Output: []int32{0, 2, 0, 0}},
			[]float32{2.5, -2, 0.5, 0.5, 3, 2}},
		{"presence once per distinct output token",
			Params{PresencePenalty: 1}, History{Output: []int32{0, 0, 3}},
			[]float32{3, -2, 1, -0.5, 3, 2}},
		{"negative penalties encourage",
			Params{PresencePenalty: -1, FrequencyPenalty: -1}, History{Output: []int32{1, 1}},
			[]float32{4, 1, 1, 0.5, 3, 2}},
		{"logit bias, out-of-vocabulary ignored",
			Params{LogitBias: []Bias{{2, 10}, {1, -100}, {99, 5}, {-1, 5}}}, History{},
			[]float32{4, -102, 11, 0.5, 3, 2}},
		{"bad words: single token always, longer after their prefix",
			Params{BadWords: mustBadWords([][]int32{{5}, {3, 0}, {2, 4}})}, History{Output: []int32{1, 3}},
			[]float32{negInf, -2, 1, 0.5, 3, negInf}},
		{"bans", Params{}, History{Banned: []int32{0, 4, 77}},
			[]float32{negInf, -2, 1, 0.5, negInf, 2}},
		{"all in order: repetition, frequency, bias",
			Params{RepetitionPenalty: 2, FrequencyPenalty: 1, LogitBias: []Bias{{0, 1}}}, History{Output: []int32{0}},
			[]float32{2, -2, 1, 0.5, 3, 2}},
	}
	var s Sampler
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logits := slices.Clone(base)
			s.Process(logits, &tc.p, &tc.h)
			if diff := cmp.Diff(tc.want, logits); diff != "" {
				t.Errorf("processed logits (-want +got):\n%s", diff)
			}
			s.Restore(logits)
			if diff := cmp.Diff(base, logits); diff != "" {
				t.Errorf("restored logits (-want +got):\n%s", diff)
			}
			if slices.ContainsFunc(s.counts, func(c int32) bool { return c != 0 }) {
				t.Error("counts scratch not left zeroed")
			}
		})
	}
}

// TestProcessorsSteerGreedy: each processor moves the greedy choice the
// way it should.
func TestProcessorsSteerGreedy(t *testing.T) {
	logits := []float32{3, 2, 1, 0}
	h := History{Output: []int32{0, 0}}
	var s Sampler
	rng := NewRNG(1)
	for _, tc := range []struct {
		name string
		p    Params
		want int32
	}{
		{"plain", Params{}, 0},
		{"frequency", Params{FrequencyPenalty: 0.6}, 1},
		{"presence", Params{PresencePenalty: 1.5}, 1},
		{"repetition", Params{RepetitionPenalty: 2}, 1},
		{"bias", Params{LogitBias: []Bias{{3, 5}}}, 3},
		{"bad word", Params{BadWords: mustBadWords([][]int32{{0, 0, 0}})}, 1},
	} {
		if got := s.SampleHistory(logits, &tc.p, &rng, &h); got != tc.want {
			t.Errorf("%s: sampled %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestMinP(t *testing.T) {
	// Probabilities relative to the top: 1, e^-1 ≈ 0.37, e^-2, e^-3.
	logits := []float32{3, 2, 1, 0}
	for _, tc := range []struct {
		p    Params
		want []int32
	}{
		{Params{Temperature: 1, MinP: 0.3}, []int32{0, 1}},
		{Params{Temperature: 1, MinP: 0.5}, []int32{0}},
		{Params{Temperature: 1, MinP: 0.1}, []int32{0, 1, 2}},
		{Params{Temperature: 1, MinP: 0.1, TopK: 3}, []int32{0, 1, 2}},
		{Params{Temperature: 1, MinP: 0.3, TopK: 3}, []int32{0, 1}},
		// Temperature scales first: at T=2 the ratios are 1, e^-0.5 ≈ 0.61, e^-1, e^-1.5.
		{Params{Temperature: 2, MinP: 0.5}, []int32{0, 1}},
		{Params{Temperature: 2, MinP: 0.3, TopP: 0.6}, []int32{0, 1}}, // kept 1, .61, .37: p(0) ≈ .51
	} {
		var s Sampler
		if diff := cmp.Diff(tc.want, drawnIDs(&s, logits, &tc.p, 3, 2000)); diff != "" {
			t.Errorf("%+v: drawn ids (-want +got):\n%s", tc.p, diff)
		}
	}
}

func TestLogprobs(t *testing.T) {
	logits := []float32{1, 3, nan, 2, float32(math.Inf(-1))}
	var s Sampler
	lse, top := s.Logprobs(logits, 3, nil)
	want := math.Log(math.Exp(1) + math.Exp(3) + math.Exp(2))
	if math.Abs(lse-want) > 1e-6 {
		t.Errorf("normaliser = %v, want %v", lse, want)
	}
	ids := []int32{top[0].ID, top[1].ID, top[2].ID}
	if diff := cmp.Diff([]int32{1, 3, 0}, ids); diff != "" {
		t.Errorf("top ids (-want +got):\n%s", diff)
	}
	sum := 0.0
	for i, x := range top {
		if math.Abs(float64(x.Logprob)-(float64(logits[x.ID])-want)) > 1e-6 {
			t.Errorf("top[%d] = %+v, want logprob %v", i, x, float64(logits[x.ID])-want)
		}
		sum += math.Exp(float64(x.Logprob))
	}
	if math.Abs(sum-1) > 1e-6 {
		t.Errorf("probabilities of every finite token sum to %v, want 1", sum)
	}
	// More than the vocabulary: every token, sorted.
	_, all := s.Logprobs(logits, 10, nil)
	if len(all) != len(logits) || all[0].ID != 1 {
		t.Errorf("top 10 of 5 = %+v", all)
	}
	if lse, top := s.Logprobs([]float32{negInf, nan}, 2, nil); !math.IsInf(lse, -1) || len(top) != 0 {
		t.Errorf("all -Inf: normaliser %v, top %v", lse, top)
	}
}

func TestProcessedSampleDoesNotAllocate(t *testing.T) {
	logits := peaked(32000, 7)
	prompt := make([]int32, 500)
	output := make([]int32, 300)
	for i := range prompt {
		prompt[i] = int32(i * 37 % 32000)
	}
	for i := range output {
		output[i] = int32(i * 101 % 32000)
	}
	h := History{Prompt: prompt, Output: output, Banned: []int32{2, 5}}
	var s Sampler
	var lps []TokenLogprob
	for _, p := range allModes() {
		p.RepetitionPenalty, p.FrequencyPenalty, p.PresencePenalty, p.MinP = 1.2, 0.3, 0.2, 0.05
		p.LogitBias = []Bias{{7, 3}, {9, -3}}
		p.BadWords = mustBadWords([][]int32{{4}, {output[len(output)-1], 6}})
		rng := NewRNG(1)
		step := func() {
			_, lps = s.Logprobs(logits, 5, lps[:0])
			s.SampleHistory(logits, &p, &rng, &h)
		}
		step() // grow the scratch space
		if a := testing.AllocsPerRun(20, step); a != 0 {
			t.Errorf("%+v: processed Sample allocates %v times per call, want 0", p, a)
		}
	}
}

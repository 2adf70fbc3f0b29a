package openai

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/kvpilot/kvpilot/internal/scheduler/sampling"
)

// Limits of the sampling fields.
const (
	// MaxN bounds n and best_of: each choice is a sequence in the engine.
	MaxN = 128
	// MaxTopLogprobs bounds top_logprobs (chat) and logprobs (completions),
	// as vLLM's default max_logprobs does.
	MaxTopLogprobs = 20
	// MaxLogitBias bounds a logit_bias value's magnitude, as OpenAI does.
	MaxLogitBias = 100
	// MaxLogitBiasEntries bounds logit_bias: each entry is applied at every
	// step of every choice.
	MaxLogitBiasEntries = 4096
	// MaxStopStrings and MaxStopBytes bound stop: every output byte
	// advances one matcher per stop string, inside the engine's iteration
	// that every request shares.
	MaxStopStrings = 256
	MaxStopBytes   = 64 << 10
	// MaxBadWordBytes bounds each bad_words entry: a word is tokenized
	// in one piece that a client leaving cannot stop, and a decoding step
	// costs the longest word's tokens.
	MaxBadWordBytes = 64 << 10
)

// Sampling are the sampling fields beyond OpenAI's basic ones, shared by
// both endpoints (vLLM's names and meanings).
type Sampling struct {
	PresencePenalty   *float64  `json:"presence_penalty"`
	FrequencyPenalty  *float64  `json:"frequency_penalty"`
	RepetitionPenalty *float64  `json:"repetition_penalty"`
	MinP              *float64  `json:"min_p"`
	LogitBias         LogitBias `json:"logit_bias"`
	StopTokenIDs      TokenIDs  `json:"stop_token_ids"`
	BadWords          []string  `json:"bad_words"`
	// AllowedTokenIDs restricts the output to these tokens (vLLM's; its
	// end-of-sequence only when listed).
	AllowedTokenIDs TokenIDs `json:"allowed_token_ids"`
	// ReturnTokenIDs adds the prompt's and each choice's token ids to the
	// response (vLLM's prompt_token_ids and token_ids).
	ReturnTokenIDs bool `json:"return_token_ids"`
	// TruncatePromptTokens keeps only the prompt's last k tokens; -1 keeps
	// the last max_model_len.
	TruncatePromptTokens *int `json:"truncate_prompt_tokens"`
}

func (s *Sampling) validate(n int) *Error {
	finite := func(v *float64) bool { return v == nil || !(math.IsNaN(*v) || math.IsInf(*v, 0)) }
	switch {
	case n < 1 || n > MaxN:
		return BadRequest("n", "n must be in [1, %d], got %d", MaxN, n)
	case !finite(s.PresencePenalty) || (s.PresencePenalty != nil && math.Abs(*s.PresencePenalty) > 2):
		return BadRequest("presence_penalty", "presence_penalty must be in [-2, 2], got %g", *s.PresencePenalty)
	case !finite(s.FrequencyPenalty) || (s.FrequencyPenalty != nil && math.Abs(*s.FrequencyPenalty) > 2):
		return BadRequest("frequency_penalty", "frequency_penalty must be in [-2, 2], got %g", *s.FrequencyPenalty)
	case s.RepetitionPenalty != nil && !(*s.RepetitionPenalty > 0 && *s.RepetitionPenalty <= math.MaxFloat32):
		return BadRequest("repetition_penalty", "repetition_penalty must be > 0, got %g", *s.RepetitionPenalty)
	case s.MinP != nil && !(*s.MinP >= 0 && *s.MinP <= 1):
		return BadRequest("min_p", "min_p must be in [0, 1], got %g", *s.MinP)
	case s.TruncatePromptTokens != nil && *s.TruncatePromptTokens < 1 && *s.TruncatePromptTokens != -1:
		return BadRequest("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 or >= 1, got %d", *s.TruncatePromptTokens)
	}
	if len(s.LogitBias) > MaxLogitBiasEntries {
		return BadRequest("logit_bias", "logit_bias has %d entries; at most %d", len(s.LogitBias), MaxLogitBiasEntries)
	}
	// Keys that spell one token differently ("65", "065", "+65") would
	// add up past the bound; each token takes one bias.
	keyOf := make(map[int64]string, len(s.LogitBias))
	for _, k := range slices.Sorted(maps.Keys(s.LogitBias)) {
		v := s.LogitBias[k]
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return BadRequest("logit_bias", "logit_bias key %q is not a token id", k)
		}
		if other, dup := keyOf[id]; dup {
			return BadRequest("logit_bias", "logit_bias keys %q and %q both name token %d; give each token one bias", other, k, id)
		}
		keyOf[id] = k
		if !(math.Abs(v) <= MaxLogitBias) {
			return BadRequest("logit_bias", "logit_bias of token %s must be in [-100, 100], got %g", k, v)
		}
	}
	if s.AllowedTokenIDs != nil && len(s.AllowedTokenIDs) == 0 {
		return BadRequest("allowed_token_ids", "allowed_token_ids is empty: no token could be generated")
	}
	for i, w := range s.BadWords {
		switch {
		case w == "":
			return BadRequest("bad_words", "bad_words[%d] is empty", i)
		case len(w) > MaxBadWordBytes:
			return BadRequest("bad_words", "bad_words[%d] is %d bytes; at most %d", i, len(w), MaxBadWordBytes)
		}
	}
	return nil
}

// Biases returns logit_bias as the sampler takes it, in token id order.
func (s *Sampling) Biases() []sampling.Bias {
	if len(s.LogitBias) == 0 {
		return nil
	}
	out := make([]sampling.Bias, 0, len(s.LogitBias))
	for k, v := range s.LogitBias {
		id, _ := strconv.ParseInt(k, 10, 32) // validated
		out = append(out, sampling.Bias{ID: int32(id), Value: float32(v)})
	}
	slices.SortFunc(out, func(a, b sampling.Bias) int { return int(a.ID) - int(b.ID) })
	return out
}

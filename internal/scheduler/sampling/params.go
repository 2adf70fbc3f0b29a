// Package sampling picks a request's next token from the model's logits:
// logit processors (penalties, logit bias, bad words, bans) first, then
// greedily or by a seeded random draw after temperature, top-k, min-p and
// top-p. It also computes log-probabilities of the model's distribution.
//
// The engine keeps one Sampler (scratch space) and one RNG per request, so a
// request with a seed produces the same tokens whatever else is in the batch.
package sampling

// Params are a request's sampling settings.
type Params struct {
	// Temperature divides the logits. 0 (or less) picks the most likely
	// token (greedy decoding).
	Temperature float32
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP. 0 or 1 (or anything outside (0, 1)) turns it off.
	TopP float32
	// TopK keeps the TopK most likely tokens. 0 (or less) turns it off; 1 is
	// greedy decoding.
	TopK int
	// MinP drops tokens whose probability (after temperature) is below MinP
	// times the most likely token's. 0 (or anything outside (0, 1]) turns it
	// off.
	MinP float32
	// Seed seeds the request's RNG (NewRNG) when HasSeed is set; otherwise
	// the engine seeds it from its own source.
	Seed    uint64
	HasSeed bool

	// Logit processors, applied by Process in this order.

	// RepetitionPenalty divides the positive logits and multiplies the
	// negative ones of every token in the prompt or the output (vLLM's and
	// CTRL's definition). 0 or 1 turns it off.
	RepetitionPenalty float32
	// FrequencyPenalty is subtracted from a token's logit once per time it
	// occurs in the output; PresencePenalty once if it occurs at all.
	FrequencyPenalty float32
	PresencePenalty  float32
	// LogitBias is added to the named tokens' logits.
	LogitBias []Bias
	// BadWords are token sequences never generated: the last token of each
	// is banned whenever the output ends with the ones before it.
	BadWords *BadWords
}

// Bias is one logit_bias entry.
type Bias struct {
	ID    int32
	Value float32
}

// greedy reports whether p picks the most likely token without a draw.
func (p *Params) greedy() bool {
	return !(p.Temperature > 0) || p.TopK == 1
}

// Greedy reports whether p picks the most likely token without a draw.
func (p *Params) Greedy() bool { return p.greedy() }

// topP reports whether p restricts the draw to a nucleus.
func (p *Params) topP() bool {
	return p.TopP > 0 && p.TopP < 1
}

// minP reports whether p drops unlikely tokens relative to the top one.
func (p *Params) minP() bool {
	return p.MinP > 0 && p.MinP <= 1
}

// processes reports whether p has a logit processor that reads the history.
func (p *Params) processes() bool {
	return (p.RepetitionPenalty > 0 && p.RepetitionPenalty != 1) || p.FrequencyPenalty != 0 ||
		p.PresencePenalty != 0 || len(p.LogitBias) > 0 || p.BadWords.Len() > 0
}

// Processes reports whether p changes the logits before the draw (any logit
// processor is set).
func (p *Params) Processes() bool { return p.processes() }

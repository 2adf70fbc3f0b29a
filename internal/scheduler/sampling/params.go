// Package sampling picks a request's next token from the model's logits:
// greedily, or by a seeded random draw after temperature, top-k and top-p.
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
	// Seed seeds the request's RNG (NewRNG) when HasSeed is set; otherwise
	// the engine seeds it from its own source.
	Seed    uint64
	HasSeed bool
}

// greedy reports whether p picks the most likely token without a draw.
func (p *Params) greedy() bool {
	return !(p.Temperature > 0) || p.TopK == 1
}

// topP reports whether p restricts the draw to a nucleus.
func (p *Params) topP() bool {
	return p.TopP > 0 && p.TopP < 1
}

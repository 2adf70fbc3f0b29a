package sampling

// History is what the logit processors read about a sequence.
type History struct {
	// Prompt and Output are the sequence's tokens so far.
	Prompt, Output []int32
	// Banned are ids never drawn this step (the engine bans EOS and stop
	// ids until min_tokens is reached).
	Banned []int32
}

// Process applies p's logit processors to logits in place: the repetition
// penalty, frequency and presence penalties, logit bias, bad words, then the
// bans of h. Every change is recorded and Restore undoes it, so the
// executor's logits come back as they were. Ids outside the vocabulary are
// ignored. Call Restore after the draw, also when nothing was changed.
//
// This is the one place where logits change before the draw: a token mask
// (constrained decoding) goes between Process and Draw and records its
// changes with Set so that Restore undoes them too.
func (s *Sampler) Process(logits []float32, p *Params, h *History) {
	s.saved = s.saved[:0]
	if p.processes() {
		s.penalize(logits, p, h)
		for _, b := range p.LogitBias {
			if inVocab(b.ID, logits) {
				s.Set(logits, b.ID, logits[b.ID]+b.Value)
			}
		}
		p.BadWords.each(h.Output, func(id int32) {
			if inVocab(id, logits) {
				s.Set(logits, id, negInf)
			}
		})
	}
	for _, id := range h.Banned {
		if inVocab(id, logits) {
			s.Set(logits, id, negInf)
		}
	}
}

// Set writes v over logits[id] (a valid id), recording the old value for
// Restore.
func (s *Sampler) Set(logits []float32, id int32, v float32) {
	s.saved = append(s.saved, savedLogit{id: id, v: logits[id]})
	logits[id] = v
}

// Restore undoes every change since Process, in reverse so that an id
// changed twice gets its original value back.
func (s *Sampler) Restore(logits []float32) {
	for i := len(s.saved) - 1; i >= 0; i-- {
		logits[s.saved[i].id] = s.saved[i].v
	}
	s.saved = s.saved[:0]
}

// penalize applies the repetition penalty to each distinct token of the
// prompt and output, then the frequency and presence penalties to each
// distinct output token. Counting uses a vocabulary-sized scratch array
// that is left zeroed again, so the cost is linear in the sequence length,
// not in the vocabulary.
func (s *Sampler) penalize(logits []float32, p *Params, h *History) {
	if len(s.counts) < len(logits) {
		s.counts = make([]int32, len(logits))
	}
	counts := s.counts
	if rp := p.RepetitionPenalty; rp > 0 && rp != 1 {
		for _, seq := range [2][]int32{h.Prompt, h.Output} {
			for _, t := range seq {
				if !inVocab(t, logits) || counts[t] != 0 {
					continue
				}
				counts[t] = 1
				if v := logits[t]; v > 0 {
					s.Set(logits, t, v/rp)
				} else {
					s.Set(logits, t, v*rp)
				}
			}
		}
		for _, seq := range [2][]int32{h.Prompt, h.Output} {
			for _, t := range seq {
				if inVocab(t, logits) {
					counts[t] = 0
				}
			}
		}
	}
	if p.FrequencyPenalty == 0 && p.PresencePenalty == 0 {
		return
	}
	for _, t := range h.Output {
		if inVocab(t, logits) {
			counts[t]++
		}
	}
	for _, t := range h.Output {
		if !inVocab(t, logits) || counts[t] == 0 {
			continue
		}
		s.Set(logits, t, logits[t]-p.FrequencyPenalty*float32(counts[t])-p.PresencePenalty)
		counts[t] = 0
	}
}

func inVocab(id int32, logits []float32) bool { return id >= 0 && int(id) < len(logits) }

package batch

import "fmt"

// Limits are what an executor can address: its KV storage and its model.
type Limits struct {
	BlockSize, NumBlocks, ContextLen, VocabSize int
}

// Validate checks a batch against an executor's limits before anything is
// read or written, and returns its token count. Executors call it first:
// the engine never builds a batch that fails it, but a kernel given a bad
// index would corrupt memory (or, in ggml, abort the process) rather than
// return an error.
func Validate(b *Batch, out *Output, lim Limits) (int, error) {
	if b.BlockSize != lim.BlockSize {
		return 0, fmt.Errorf("batch block size %d, executor %d", b.BlockSize, lim.BlockSize)
	}
	if len(out.Logits) < len(b.Seqs) {
		return 0, fmt.Errorf("output has %d logit slots for %d sequences", len(out.Logits), len(b.Seqs))
	}
	n := 0
	for i := range b.Seqs {
		sq := &b.Seqs[i]
		end := sq.Pos + len(sq.Tokens)
		switch {
		case sq.Pos < 0:
			return 0, fmt.Errorf("seq %d: negative position %d", sq.SeqID, sq.Pos)
		case sq.Sample && len(sq.Tokens) == 0:
			return 0, fmt.Errorf("seq %d: sampling with no tokens", sq.SeqID)
		case end > lim.ContextLen:
			return 0, fmt.Errorf("seq %d: position %d beyond the context length %d", sq.SeqID, end, lim.ContextLen)
		case len(sq.Blocks)*lim.BlockSize < end:
			return 0, fmt.Errorf("seq %d: %d blocks cover %d positions, need %d", sq.SeqID, len(sq.Blocks), len(sq.Blocks)*lim.BlockSize, end)
		}
		for _, id := range sq.Blocks[:(end+lim.BlockSize-1)/lim.BlockSize] {
			if id < 0 || int(id) >= lim.NumBlocks {
				return 0, fmt.Errorf("seq %d: block %d outside 0…%d", sq.SeqID, id, lim.NumBlocks-1)
			}
		}
		for _, tok := range sq.Tokens {
			if tok < 0 || int(tok) >= lim.VocabSize {
				return 0, fmt.Errorf("seq %d: token %d outside the vocabulary of %d", sq.SeqID, tok, lim.VocabSize)
			}
		}
		n += len(sq.Tokens)
	}
	return n, nil
}

// ShareLogits points out.Logits at the rows of logits, one row of vocab
// floats per sequence with Sample set, in batch order (see the Executor
// contract: the engine uses them only until the next Execute). Each row's
// capacity ends at its own end, so an append cannot spill into the next.
func ShareLogits(b *Batch, out *Output, logits []float32, vocab int) {
	k := 0
	for i := range b.Seqs {
		if !b.Seqs[i].Sample {
			continue
		}
		out.Logits[i] = logits[k*vocab : (k+1)*vocab : (k+1)*vocab]
		k++
	}
}

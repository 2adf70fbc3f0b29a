package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// kvExec is a deterministic test executor that really uses the KV blocks:
// processing token t at position p writes mix(t, p) into the slot the block
// table names, and the next token is a hash of every slot the sequence can
// see. A wrong block table, a prefix-cache block with the wrong content or
// a block reused while still referenced changes the output, so equal outputs
// prove the engine kept every sequence's KV intact.
type kvExec struct {
	blockSize int
	vocab     int
	eos       int32
	// eosMod: the hash mod eosMod == 0 yields EOS (0 = never).
	eosMod uint64
	// logits: return logits (one-hot on the chosen token) instead of ids.
	logits bool

	mu    sync.Mutex
	slots []uint64
	calls int
	// failOn: calls numbers that return an error.
	failOn map[int]bool
	// block, when set, makes Execute wait for ctx or the channel.
	block chan struct{}
	// checkErr records contract violations seen by the executor.
	checkErr error
	logitBuf [][]float32

	// host is the host tier's slots (ReserveHostBlocks); copiedOut and
	// copiedIn count blocks moved; failCopy makes CopyBlocks fail.
	host                []uint64
	copiedOut, copiedIn int
	failCopy            bool

	// pending are copies started by overlapExec.StartCopyBlocks; Execute
	// reports a batch block they name, and they land only at Wait, after
	// the iteration (the latest a real executor may land them), so a copy
	// the iteration needed is missing from the KV it reads, and a block it
	// wrote before its copy-out is copied out with the wrong contents.
	pending    []kvcache.Transfer
	overlapped int // transfers that ran beside an iteration
}

var _ batch.BlockCopier = (*kvExec)(nil)

// overlapExec is kvExec with overlapping copies (batch.OverlappingCopier),
// budget blocks each way beside an iteration (0: no limit).
type overlapExec struct {
	*kvExec
	budget int
}

func (x overlapExec) CopyBudget(*batch.Batch) int { return x.budget }

var _ batch.OverlappingCopier = overlapExec{}

func (x overlapExec) StartCopyBlocks(_ context.Context, ts []kvcache.Transfer) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.pending) > 0 {
		x.checkErr = cmp.Or(x.checkErr, errors.New("StartCopyBlocks before the last started copies were waited for"))
	}
	x.pending = append(x.pending[:0], ts...)
}

func (x overlapExec) WaitCopyBlocks(ctx context.Context) error {
	x.mu.Lock()
	ts := slices.Clone(x.pending)
	x.pending = x.pending[:0]
	x.overlapped += len(ts)
	x.mu.Unlock()
	return x.CopyBlocks(ctx, ts)
}

func (x *kvExec) ReserveHostBlocks(n, blockSize int) error {
	if blockSize != x.blockSize {
		return fmt.Errorf("host blocks of %d tokens, device blocks of %d", blockSize, x.blockSize)
	}
	x.host = make([]uint64, n*x.blockSize)
	return nil
}

// CopyBlocks moves whole blocks of slots between the device and the host, in
// order, so a wrong or reordered transfer changes the KV a sequence reads.
func (x *kvExec) CopyBlocks(_ context.Context, ts []kvcache.Transfer) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.failCopy {
		return errors.New("injected copy failure")
	}
	bs := x.blockSize
	for _, t := range ts {
		dev := x.slots[int(t.Device)*bs : int(t.Device+1)*bs]
		host := x.host[int(t.Host)*bs : int(t.Host+1)*bs]
		switch t.Kind {
		case kvcache.CopyOut:
			copy(host, dev)
			x.copiedOut++
		case kvcache.CopyIn:
			copy(dev, host)
			x.copiedIn++
		default:
			return fmt.Errorf("transfer of kind %v", t.Kind)
		}
	}
	return nil
}

func newKVExec(numBlocks, blockSize, vocab int) *kvExec {
	return &kvExec{
		blockSize: blockSize, vocab: vocab, eos: int32(vocab - 1), eosMod: 23,
		slots: make([]uint64, numBlocks*blockSize),
	}
}

func (x *kvExec) numCalls() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.calls
}

func (x *kvExec) Execute(ctx context.Context, b *batch.Batch, out *batch.Output) error {
	x.mu.Lock()
	x.calls++
	call := x.calls
	fail := x.failOn[call]
	blk := x.block
	x.mu.Unlock()
	if blk != nil {
		select {
		case <-blk:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("injected executor failure")
	}
	x.mu.Lock()
	for _, t := range x.pending {
		for i := range b.Seqs {
			if slices.Contains(b.Seqs[i].Blocks, t.Device) {
				x.checkErr = cmp.Or(x.checkErr, fmt.Errorf("seq %d's block %d is in a %v that runs beside the iteration", b.Seqs[i].SeqID, t.Device, t.Kind))
			}
		}
	}
	x.mu.Unlock()
	if b.BlockSize != x.blockSize {
		x.violation(fmt.Errorf("batch block size %d, want %d", b.BlockSize, x.blockSize))
	}
	total := 0
	for i := range b.Seqs {
		s := &b.Seqs[i]
		total += len(s.Tokens)
		end := s.Pos + len(s.Tokens)
		if need := (end + x.blockSize - 1) / x.blockSize; len(s.Blocks) < need {
			x.violation(fmt.Errorf("seq %d: %d blocks cover fewer than %d tokens", s.SeqID, len(s.Blocks), end))
			continue
		}
		for j, t := range s.Tokens {
			p := s.Pos + j
			x.slots[int(s.Blocks[p/x.blockSize])*x.blockSize+p%x.blockSize] = mix64(uint64(t)+1, uint64(p))
		}
		if !s.Sample {
			continue
		}
		var h uint64 = 1469598103934665603
		for p := range end {
			h = mix64(h, x.slots[int(s.Blocks[p/x.blockSize])*x.blockSize+p%x.blockSize])
		}
		tok := int32(h % uint64(x.vocab-1))
		if x.eosMod > 0 && (h>>32)%x.eosMod == 0 {
			tok = x.eos
		}
		if x.logits {
			if len(x.logitBuf) <= i {
				x.logitBuf = append(x.logitBuf, make([][]float32, i+1-len(x.logitBuf))...)
			}
			if x.logitBuf[i] == nil {
				x.logitBuf[i] = make([]float32, x.vocab)
			}
			l := x.logitBuf[i]
			for k := range l {
				l[k] = float32((h>>uint(k%29))&7) / 8 // noise below the winner
			}
			l[tok] = 10
			out.Logits[i] = l
		} else {
			out.Tokens[i] = tok
			out.Sampled[i] = true
		}
	}
	if total != b.NumTokens {
		x.violation(fmt.Errorf("NumTokens %d, sum %d", b.NumTokens, total))
	}
	return nil
}

func (x *kvExec) violation(err error) {
	x.mu.Lock()
	if x.checkErr == nil {
		x.checkErr = err
	}
	x.mu.Unlock()
}

func mix64(a, b uint64) uint64 {
	x := a ^ (b + 0x9e3779b97f4a7c15 + (a << 6) + (a >> 2))
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// letters decodes token id t as one lowercase letter, or "" for EOS.
type letters struct{ eos int32 }

var alphabet = []byte("abcdefghijklmnopqrstuvwxyz")

func (l letters) TokenBytes(id int32) []byte {
	if id == l.eos {
		return nil
	}
	i := int(id) % len(alphabet)
	return alphabet[i : i+1]
}

package engine

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// stateExec is kvExec keeping states in slots slots (batch.StateKeeper);
// it checks that every state copy says the position of the state it
// moves: a save, where its sequence's tokens end; a restore, where the
// sequence it resumes starts.
type stateExec struct {
	*kvExec
	slots           int
	saves, restores int
	// err is the first copy that did not say its position.
	err error
}

func (x *stateExec) StateSlots() int { return x.slots }

var _ batch.StateKeeper = (*stateExec)(nil)

func (x *stateExec) Execute(ctx context.Context, b *batch.Batch, out *batch.Output) error {
	for _, cp := range b.StateSaves {
		ok := false
		for _, sq := range b.Seqs {
			ok = ok || (sq.State == cp.From && sq.Pos+len(sq.Tokens) == cp.Pos)
		}
		if !ok || cp.Pos%b.BlockSize != 0 {
			x.err = cmp.Or(x.err, fmt.Errorf("save %+v: no sequence of the batch ends there in that slot", cp))
			continue
		}
		x.saves++
	}
	for _, cp := range b.StateCopies {
		for _, sq := range b.Seqs {
			if sq.State == cp.To {
				if sq.Pos != cp.Pos {
					x.err = cmp.Or(x.err, fmt.Errorf("restore %+v: its sequence resumes at %d", cp, sq.Pos))
					continue
				}
				x.restores++
			}
		}
	}
	return x.kvExec.Execute(ctx, b, out)
}

// TestStateCopiesSayTheirPosition: the engine's state saves and restores
// carry the position of the state (batch.StateCopy.Pos), which an
// executor keeping windows copies the window of.
func TestStateCopiesSayTheirPosition(t *testing.T) {
	x := &stateExec{kvExec: newKVExec(256, 4, testVocab), slots: 8}
	e, err := New(Config{
		MaxNumSeqs: 4, MaxNumBatchedTokens: 16, MaxModelLen: 512, VocabSize: testVocab,
		KV:  kvcache.Config{NumBlocks: 256, BlockSize: 4, EnablePrefixCache: true},
		EOS: []int32{x.eos}, Decoder: letters{eos: x.eos}, Logger: slog.New(slog.DiscardHandler),
	}, x)
	if err != nil {
		t.Fatal(err)
	}
	p := prompt(37, 1)
	for i := range 2 {
		s := mustSubmit(t, e, req(fmt.Sprint("r", i), p, 9))
		for range 100 {
			if run, wait := e.Pending(); run == 0 && wait == 0 {
				break
			}
			e.Step(context.Background())
		}
		collect(t, s)
	}
	if x.err != nil {
		t.Error(x.err)
	}
	if x.saves == 0 || x.restores == 0 {
		t.Errorf("%d saves, %d restores: the test must see both", x.saves, x.restores)
	}
}

// Package exectest holds what the executors' tests share: running one batch
// and keeping its logits, block tables, a model written to and mapped from
// a GGUF file, and the errors every executor must give for a batch or a
// host-tier copy it cannot address (batch.Validate, batch.ValidateTransfers).
// Only tests import it.
package exectest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Contiguous is the block table first, first+1, … (n blocks).
func Contiguous(first, n int) []kvcache.BlockID {
	ids := make([]kvcache.BlockID, n)
	for i := range ids {
		ids[i] = kvcache.BlockID(first + i)
	}
	return ids
}

// Execute runs seqs as one batch of blockSize-token blocks and returns each
// sequence's logits. The rows may be the executor's own memory, overwritten
// by its next step (batch.ShareLogits): Execute returns copies, so that two
// steps compared are two results.
func Execute(t testing.TB, e batch.Executor, blockSize int, seqs []batch.Seq) [][]float32 {
	t.Helper()
	b := &batch.Batch{Seqs: seqs, BlockSize: blockSize}
	for _, s := range seqs {
		b.NumTokens += len(s.Tokens)
	}
	out := &batch.Output{Logits: make([][]float32, len(seqs)), Tokens: make([]int32, len(seqs)), Sampled: make([]bool, len(seqs))}
	if err := e.Execute(context.Background(), b, out); err != nil {
		t.Fatal(err)
	}
	for i, l := range out.Logits {
		out.Logits[i] = slices.Clone(l)
	}
	return out.Logits
}

// ErrorCase is a sequence an executor must refuse with an error containing
// Want.
type ErrorCase struct {
	Name string
	Seq  batch.Seq
	Want string
}

// CheckExecuteErrors runs, one batch each, sequences that e (4 blocks of
// blockSize tokens, a vocabulary of at most 300) must refuse — a block out
// of range, too few blocks, a token out of the vocabulary, then the extra
// cases — and a batch under a cancelled context.
func CheckExecuteErrors(t *testing.T, e batch.Executor, blockSize int, extra ...ErrorCase) {
	t.Helper()
	cases := append([]ErrorCase{
		{"block out of range", batch.Seq{Tokens: []int32{1}, Blocks: []kvcache.BlockID{4}, Sample: true}, "block 4 outside"},
		{"too few blocks", batch.Seq{Tokens: []int32{1, 2, 3, 4, 5}, Blocks: []kvcache.BlockID{0}}, "1 blocks cover 4 positions, need 5"},
		{"token out of vocab", batch.Seq{Tokens: []int32{300}, Blocks: []kvcache.BlockID{0}}, "token 300 outside"},
	}, extra...)
	for _, tc := range cases {
		b := &batch.Batch{Seqs: []batch.Seq{tc.Seq}, BlockSize: blockSize}
		err := e.Execute(context.Background(), b, &batch.Output{Logits: make([][]float32, 1)})
		if err == nil || !strings.Contains(err.Error(), tc.Want) {
			t.Errorf("%s: got %v, want %q", tc.Name, err, tc.Want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := &batch.Batch{Seqs: []batch.Seq{{Tokens: []int32{1}, Blocks: []kvcache.BlockID{0}, Sample: true}}, BlockSize: blockSize}
	if err := e.Execute(ctx, b, &batch.Output{Logits: make([][]float32, 1)}); err != context.Canceled {
		t.Errorf("cancelled context: got %v", err)
	}
}

// CheckCopyBlocksRejectsOutOfRange: e (8 device blocks of blockSize tokens)
// refuses a host tier of another block size, and, with 2 host blocks, a
// copy from a device block or to a host slot that does not exist.
func CheckCopyBlocksRejectsOutOfRange(t *testing.T, e batch.BlockCopier, blockSize int) {
	t.Helper()
	if err := e.ReserveHostBlocks(2, blockSize+1); err == nil {
		t.Fatal("ReserveHostBlocks accepted a block size other than the device's")
	}
	if err := e.ReserveHostBlocks(2, blockSize); err != nil {
		t.Fatal(err)
	}
	for _, x := range []kvcache.Transfer{
		{Kind: kvcache.CopyOut, Device: 8, Host: 0},
		{Kind: kvcache.CopyIn, Device: 0, Host: 2},
	} {
		if err := e.CopyBlocks(context.Background(), []kvcache.Transfer{x}); err == nil {
			t.Errorf("CopyBlocks(%+v) succeeded", x)
		}
	}
}

// WriteAndLoad writes m to a GGUF file in a temporary directory and loads
// it back (mapped); the loaded model is closed when the test ends.
func WriteAndLoad(t testing.TB, m *model.Model) *model.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteGGUF(f, m); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	loaded, err := model.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loaded.Close() })
	return loaded
}

// WriteSplitAndLoad writes m in parts of at most maxTensors tensors each
// (model.WriteSplitGGUF, llama.cpp's gguf-split layout) in a temporary
// directory and loads it from its first part (every part mapped); the
// loaded model is closed when the test ends.
func WriteSplitAndLoad(t testing.TB, m *model.Model, maxTensors int) *model.Model {
	t.Helper()
	paths, err := model.WriteSplitGGUF(filepath.Join(t.TempDir(), "m"), m, maxTensors)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2 {
		t.Fatalf("%d part: a split test needs several", len(paths))
	}
	loaded, err := model.Load(paths[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loaded.Close() })
	return loaded
}

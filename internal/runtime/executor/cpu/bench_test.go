package cpu

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// benchConfig is a ~110M-parameter llama (GPT-2-small-like widths, tied head).
var benchConfig = model.Config{
	VocabSize: 32000, Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FFN: 2048, ContextLen: 2048, TiedEmbeddings: true,
}

var benchModel = sync.OnceValue(func() *model.Model { return model.Random(benchConfig, 1) })

// benchmarkDecode measures decode steps of batch sequences, each with
// benchContext positions already in KV (filled directly: what they hold
// does not change the work).
func benchmarkDecode(b *testing.B, batchSize int) {
	const benchContext, blockSize = 128, 16
	blocksPerSeq := benchContext/blockSize + 1
	e, err := New(benchModel(), batchSize*blocksPerSeq, blockSize, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for li := range e.kCache {
		for i := range e.kCache[li] {
			e.kCache[li][i] = float32(i%7) * 0.1
			e.vCache[li][i] = float32(i%5) * 0.1
		}
	}
	seqs := make([]batch.Seq, batchSize)
	for i := range seqs {
		seqs[i] = batch.Seq{SeqID: uint64(i), Tokens: []int32{int32(i)}, Pos: benchContext, Blocks: contiguous(i*blocksPerSeq, blocksPerSeq), Sample: true}
	}
	bt := &batch.Batch{Seqs: seqs, NumTokens: batchSize, BlockSize: blockSize}
	out := &batch.Output{Logits: make([][]float32, batchSize)}
	ctx := context.Background()
	if err := e.Execute(ctx, bt, out); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := e.Execute(ctx, bt, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batchSize*b.N)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(float64(benchModel().Config.NumParams())/1e6, "Mparams")
}

func BenchmarkDecodeBatch1(b *testing.B)  { benchmarkDecode(b, 1) }
func BenchmarkDecodeBatch8(b *testing.B)  { benchmarkDecode(b, 8) }
func BenchmarkDecodeBatch32(b *testing.B) { benchmarkDecode(b, 32) }

// BenchmarkMatmul measures the f32 kernel alone (768 → 2048, one thread)
// at several token counts: GMAC/s per token count shows what batching buys
// per weight read.
func BenchmarkMatmul(b *testing.B) {
	const k, n = 768, 2048
	w := &matrix{rows: n, cols: k, f32: make([]float32, n*k)}
	for i := range w.f32 {
		w.f32[i] = float32(i%13) * 0.01
	}
	for _, tokens := range []int{1, 4, 32} {
		b.Run(fmt.Sprintf("tokens=%d", tokens), func(b *testing.B) {
			j := &matmulJob{w: w, x: make([]float32, tokens*k), out: make([]float32, tokens*n), tokens: tokens}
			for b.Loop() {
				j.run(0, 0, n)
			}
			b.ReportMetric(float64(k*n*tokens*b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

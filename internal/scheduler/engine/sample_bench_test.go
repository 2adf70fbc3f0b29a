package engine

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// rowsExec hands every sampled sequence one of a few fixed rows of logits
// (the engine restores them after sampling): an executor that costs
// nothing, so that a step's time is the engine's, sampling included.
type rowsExec struct{ rows [][]float32 }

func (x rowsExec) Execute(_ context.Context, b *batch.Batch, out *batch.Output) error {
	for i := range b.Seqs {
		if b.Seqs[i].Sample {
			out.Logits[i] = x.rows[i]
		}
	}
	return nil
}

// BenchmarkSampledStep times a step of 128 decoding sequences over a
// 151,936-token vocabulary (Qwen2's), greedy and with temperature, top-k
// and top-p, the executor costing nothing: what sampling adds to a step.
func BenchmarkSampledStep(b *testing.B) {
	const vocab, running = 151936, 128
	// A row per sequence (the executor contract: rows do not overlap),
	// shaped like a model's: a spread of small logits, a few large ones.
	rows := make([][]float32, running)
	for r := range rows {
		rows[r] = make([]float32, vocab)
		for k := range rows[r] {
			rows[r][k] = float32((k*7919+r*31)%1000)/500 - 1
		}
		for j := range 20 {
			rows[r][(r*977+j*4099)%vocab] = 8 + float32(j)/4
		}
	}
	for _, mode := range []struct {
		name string
		p    Params
	}{
		{"greedy", Params{}},
		{"temperature 0.7, top-p 0.95", Params{Temperature: 0.7, TopP: 0.95}},
		{"temperature 0.8, top-k 40, top-p 0.95, logprobs", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, Logprobs: true, TopLogprobs: 5}},
	} {
		for _, workers := range []int{1, 0} {
			name := mode.name + ", the loop alone"
			if workers == 0 {
				name = fmt.Sprintf("%s, %d goroutines", mode.name, runtime.GOMAXPROCS(0))
			}
			b.Run(name, func(b *testing.B) { benchmarkSampledStep(b, rows, mode.p, workers) })
		}
	}
}

// benchmarkSampledStep times steps of len(rows) sequences drawing with
// params from their rows, on workers sampling goroutines.
func benchmarkSampledStep(b *testing.B, rows [][]float32, params Params, workers int) {
	running := len(rows)
	e, err := New(Config{
		MaxNumSeqs: running, MaxNumBatchedTokens: 8192, MaxQueue: running, MaxModelLen: 1 << 20, VocabSize: len(rows[0]), SamplingWorkers: workers,
		KV:  kvcache.Config{NumBlocks: running * 1024, BlockSize: 16},
		EOS: []int32{0}, Decoder: letters{eos: 0}, Clock: clock.NewVirtual(time.Unix(0, 0)),
	}, rowsExec{rows})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range running {
		p := params
		p.MaxTokens, p.IgnoreEOS, p.Seed, p.HasSeed = 1<<19, true, uint64(i+1), true
		if _, err := e.Submit(ctx, &Request{Prompt: []int32{1, 2, 3, int32(i)}, Params: p}); err != nil {
			b.Fatal(err)
		}
	}
	e.Step(ctx) // prefill
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if r := e.Step(ctx); r.Sampled != running {
			b.Fatalf("sampled %d", r.Sampled)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/step")
}

package simulator

import (
	"context"
	"fmt"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/clock"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Setup is the simulated replica both batching strategies run on.
type Setup struct {
	Accelerator string // sim profile, e.g. "H100-SXM"
	Model       string // sim geometry, e.g. "llama-3.1-8b"
	MemFraction float64
	BlockSize   int
	// MaxNumSeqs and MaxNumBatchedTokens bound continuous batching.
	MaxNumSeqs, MaxNumBatchedTokens int
	MaxModelLen                     int
	// FullSWACache pages every sliding-window layer (--swa-cache full);
	// by default a model with sliding layers (gpt-oss) keeps them in
	// per-sequence rings as state slots, as the runtime does (--swa-cache
	// window, sim.Geometry.WindowCache).
	FullSWACache bool
}

// DefaultSetup is an H100 serving Llama-3.1-8B with vLLM-like limits.
func DefaultSetup() Setup {
	return Setup{Accelerator: "H100-SXM", Model: "llama-3.1-8b", MemFraction: 0.9, BlockSize: 16,
		MaxNumSeqs: 256, MaxNumBatchedTokens: 2048, MaxModelLen: 8192}
}

func (s Setup) build(outputLen sim.LengthDist) (*sim.Executor, *clock.Virtual, int, error) {
	return s.buildWith(outputLen, nil)
}

// buildWith is build with the shared host links the device's copies cross.
func (s Setup) buildWith(outputLen sim.LengthDist, links []*sim.HostLink) (*sim.Executor, *clock.Virtual, int, error) {
	acc, err := sim.LookupAccelerator(s.Accelerator)
	if err != nil {
		return nil, nil, 0, err
	}
	geo, err := sim.LookupGeometry(s.Model)
	if err != nil {
		return nil, nil, 0, err
	}
	geo = geo.WithWindowCache(!s.FullSWACache)
	// A hybrid model's recurrent states and the window cache's rings take
	// their share of the memory (two slots a sequence, as the runtime
	// sizes them).
	blocks, slots, err := sim.StateSlotsForDevice(acc, geo, 1, s.MemFraction, s.BlockSize, s.MaxNumSeqs)
	if err != nil {
		return nil, nil, 0, err
	}
	clk := clock.NewVirtual(time.Unix(0, 0))
	x, err := sim.New(sim.Options{Accelerator: acc, Geometry: geo, Virtual: clk, OutputLen: outputLen, HostLinks: links, StateSlots: slots})
	return x, clk, blocks, err
}

// syntheticPrompt makes n token ids from a seed (never EOS).
func syntheticPrompt(v *sim.Vocabulary, n int, seed uint64) []int32 {
	p := make([]int32, n)
	for i := range p {
		seed = seed*6364136223846793005 + 1442695040888963407
		p[i] = int32((seed >> 33) % uint64(v.Size()-1))
	}
	return p
}

// RunContinuous replays reqs through the real engine (continuous batching,
// paged KV, chunked prefill) on the sim executor in virtual time.
func RunContinuous(reqs []Request, s Setup) (*Result, error) {
	x, clk, blocks, err := s.build(OutputLenBySeed{})
	if err != nil {
		return nil, err
	}
	start := clk.Now()
	eng, err := engine.New(engine.Config{
		MaxNumSeqs: s.MaxNumSeqs, MaxNumBatchedTokens: s.MaxNumBatchedTokens,
		MaxQueue: len(reqs) + 1, MaxModelLen: s.MaxModelLen, VocabSize: x.Vocabulary().Size(),
		KV:  kvcache.Config{NumBlocks: blocks, BlockSize: s.BlockSize, EnablePrefixCache: true},
		EOS: []int32{x.EOS()}, Decoder: x.Vocabulary(), Clock: clk,
	}, x)
	if err != nil {
		return nil, err
	}
	type live struct {
		st  *engine.Stream
		arr time.Duration
	}
	var active []live
	res := &Result{Name: "continuous"}
	ctx := context.Background()
	// A done context makes Stream.Next non-blocking.
	drainCtx, cancel := context.WithCancel(ctx)
	cancel()
	next := 0
	for res.Requests < len(reqs) {
		now := clk.Now().Sub(start)
		for next < len(reqs) && reqs[next].Arrival <= now {
			r := reqs[next]
			st, err := eng.Submit(ctx, &engine.Request{
				ID:     fmt.Sprint(r.ID),
				Prompt: syntheticPrompt(x.Vocabulary(), r.PromptLen, r.Seed),
				Params: engine.Params{MaxTokens: min(r.MaxTokens, s.MaxModelLen-r.PromptLen), Seed: r.Seed, HasSeed: true},
			})
			if err != nil {
				return nil, fmt.Errorf("submit %d: %w", r.ID, err)
			}
			active = append(active, live{st, r.Arrival})
			next++
		}
		if run, wait := eng.Pending(); run+wait == 0 {
			if next < len(reqs) {
				clk.Set(start.Add(reqs[next].Arrival))
				continue
			}
			return nil, fmt.Errorf("engine idle with %d of %d requests unfinished", len(reqs)-res.Requests, len(reqs))
		}
		if r := eng.Step(ctx); r.Err != nil {
			return nil, r.Err
		}
		j := 0
		for _, a := range active {
			finished := false
			for {
				c, err := a.st.Next(drainCtx)
				if err != nil {
					break
				}
				if c.Done {
					finished = true
					res.Requests++
					res.OutTokens += int64(c.Usage.CompletionTokens)
					res.Latencies = append(res.Latencies, clk.Now().Sub(start)-a.arr)
					break
				}
			}
			if !finished {
				active[j] = a
				j++
			}
		}
		active = active[:j]
	}
	res.Duration = clk.Now().Sub(start) - reqs[0].Arrival
	return res, nil
}

// RunStatic replays reqs with static batching, the baseline continuous
// batching replaces: a batch of up to batchSize arrived requests is formed
// when the previous one ends, each reserves KV for prompt + max_tokens up
// front, the whole batch is prefilled, then decodes until its longest
// member finishes (finished members are padding), and every member's result
// is returned when the batch ends. Step times come from the same cost model.
func RunStatic(reqs []Request, s Setup, batchSize int) (*Result, error) {
	x, _, blocks, err := s.build(OutputLenBySeed{})
	if err != nil {
		return nil, err
	}
	capacity := blocks * s.BlockSize
	res := &Result{Name: fmt.Sprintf("static(batch=%d)", batchSize)}
	var now time.Duration
	one := []int32{0}
	var b batch.Batch
	next := 0
	for next < len(reqs) {
		if reqs[next].Arrival > now {
			now = reqs[next].Arrival
		}
		// Form the batch: arrived requests, FCFS, within size and KV.
		members := []Request{}
		reserved := 0
		for next < len(reqs) && reqs[next].Arrival <= now && len(members) < batchSize {
			r := reqs[next]
			need := r.PromptLen + min(r.MaxTokens, s.MaxModelLen-r.PromptLen)
			if reserved+need > capacity && len(members) > 0 {
				break
			}
			reserved += need
			members = append(members, r)
			next++
		}
		// Prefill.
		b.Seqs = b.Seqs[:0]
		b.NumTokens = 0
		longest := 0
		for _, r := range members {
			b.Seqs = append(b.Seqs, batch.Seq{Tokens: make([]int32, r.PromptLen), Sample: true})
			b.NumTokens += r.PromptLen
			longest = max(longest, min(r.OutputLen, r.MaxTokens, s.MaxModelLen-r.PromptLen))
		}
		now += x.StepTime(&b)
		// Decode until the longest member is done.
		for k := 1; k < longest; k++ {
			b.NumTokens = len(members)
			for i, r := range members {
				b.Seqs[i] = batch.Seq{Tokens: one, Pos: r.PromptLen + k - 1, Sample: true}
			}
			now += x.StepTime(&b)
		}
		for _, r := range members {
			res.Requests++
			res.OutTokens += int64(min(r.OutputLen, r.MaxTokens, s.MaxModelLen-r.PromptLen))
			res.Latencies = append(res.Latencies, now-r.Arrival)
		}
	}
	res.Duration = now - reqs[0].Arrival
	return res, nil
}

package simulator

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
)

// Request is one generated request.
type Request struct {
	ID        int
	Arrival   time.Duration // since the start of the run
	PromptLen int
	// OutputLen is the natural output length (the sim executor ends the
	// request with EOS there); MaxTokens caps it.
	OutputLen int
	MaxTokens int
	Seed      uint64
}

// ShareGPT describes the request-length distribution: log-normal lengths
// with ShareGPT's published means (vLLM paper, Kwon et al. 2023: 161 input
// and 338 output tokens on average) and a heavy tail (σ = 1).
var ShareGPT = struct {
	Prompt, Output sim.LogNormal
}{
	Prompt: sim.LogNormal{Mean: 161, Sigma: 1.0, Min: 4, Max: 4096},
	Output: sim.LogNormal{Mean: 338, Sigma: 1.0, Min: 4, Max: 2048},
}

// Poisson generates n requests with exponential inter-arrival times at rate
// per second, lengths from ShareGPT, deterministic for a seed.
func Poisson(n int, rate float64, seed uint64) []Request {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]Request, n)
	var t float64
	for i := range out {
		t += rng.ExpFloat64() / rate
		s := rng.Uint64()
		out[i] = Request{
			ID:        i,
			Arrival:   time.Duration(t * float64(time.Second)),
			PromptLen: ShareGPT.Prompt.Sample(s ^ 0xabc),
			OutputLen: ShareGPT.Output.Sample(s),
			MaxTokens: ShareGPT.Output.Max,
			Seed:      s,
		}
	}
	return out
}

// OutputLenBySeed is the sim executor's length distribution: it must give
// the same length the workload recorded for each request's seed.
type OutputLenBySeed struct{}

// Sample implements sim.LengthDist.
func (OutputLenBySeed) Sample(seed uint64) int { return ShareGPT.Output.Sample(seed) }

// Result summarises a run.
type Result struct {
	Name      string
	Requests  int
	Duration  time.Duration // first arrival to last completion (virtual)
	OutTokens int64
	Latencies []time.Duration // end-to-end, per request
}

// Throughput is completed requests per second.
func (r *Result) Throughput() float64 { return float64(r.Requests) / r.Duration.Seconds() }

// TokenThroughput is output tokens per second.
func (r *Result) TokenThroughput() float64 { return float64(r.OutTokens) / r.Duration.Seconds() }

// Percentile of the end-to-end latencies (q in [0, 1]).
func (r *Result) Percentile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), r.Latencies...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	i := int(math.Ceil(q*float64(len(l)))) - 1
	return l[max(0, min(i, len(l)-1))]
}

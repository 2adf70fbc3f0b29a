package kvcache

import (
	"fmt"
	"testing"
)

// workload is a set of chat-like requests: prompts that share a system
// prompt, each followed by decoded tokens that depend only on the prompt, so
// repeating a request hits its prompt and output in the cache.
type workload struct {
	m       *Manager
	prompts [][]int32 // each with spare capacity for the decoded tokens
	decode  int
	next    SeqID
	offload bool // each request's program pauses after it: Offload its context
}

func newWorkload(tb testing.TB, numBlocks, hostBlocks, numPrompts, system, unique, decode int) *workload {
	w := &workload{
		m:       newManager(tb, Config{NumBlocks: numBlocks, EnablePrefixCache: true, HostBlocks: hostBlocks}),
		decode:  decode,
		offload: hostBlocks > 0,
	}
	for p := range numPrompts {
		buf := make([]int32, system+unique, system+unique+decode)
		for i := range buf {
			if i < system {
				buf[i] = int32(i)
			} else {
				buf[i] = int32(100000 + p*unique + i)
			}
		}
		w.prompts = append(w.prompts, buf)
	}
	return w
}

// request runs one request to completion: Admit with the whole prompt as one
// chunk, then one Grow and Commit per decoded token, then Free. It reports
// whether the request found room.
func (w *workload) request(i int) bool {
	m := w.m
	tokens := w.prompts[i%len(w.prompts)]
	seq := w.next
	w.next++
	if _, ok := m.Admit(seq, tokens, len(tokens)); !ok {
		return false
	}
	m.Commit(seq, tokens, len(tokens))
	for d := range w.decode {
		tokens = append(tokens, int32(len(tokens)*31+d))
		if !m.Grow(seq, len(tokens)) {
			break
		}
		m.Commit(seq, tokens, len(tokens))
	}
	m.Free(seq, false)
	if w.offload {
		m.Offload(tokens)
		m.ClearTransfers() // the executor's copies are not part of the manager's cost
	}
	return true
}

var allocFreeCases = []struct {
	name                                    string
	numBlocks, prompts, system, unique, dec int
	hostBlocks                              int
}{
	// 64 prompts fit: prompts and outputs hit the cache.
	{name: "hot", numBlocks: 4096, prompts: 64, system: 128, unique: 128, dec: 32},
	// 1024 prompts in 512 blocks: every request evicts and re-registers.
	{name: "churn", numBlocks: 512, prompts: 1024, system: 128, unique: 128, dec: 32},
	// Paused programs: every request's context goes to the host tier and its
	// next request restores it.
	{name: "host-tier", numBlocks: 512, prompts: 64, system: 128, unique: 128, dec: 32, hostBlocks: 2048},
}

// BenchmarkAllocFree measures whole request cycles (Admit, Grow and Commit per
// decoded token, Free); ops/s counts cycles.
func BenchmarkAllocFree(b *testing.B) {
	for _, tc := range allocFreeCases {
		b.Run(tc.name, func(b *testing.B) {
			w := newWorkload(b, tc.numBlocks, tc.hostBlocks, tc.prompts, tc.system, tc.unique, tc.dec)
			for i := range 4 * tc.prompts {
				w.request(i) // warm the cache and the pools
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if !w.request(n) {
					b.Fatal("request found no room")
				}
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "ops/s")
			st := w.m.Stats()
			b.ReportMetric(st.HitRate(), "hit-rate")
		})
	}
}

// BenchmarkPrefixHit measures admitting (and freeing) a prompt whose prefix is
// cached, and the lookup alone.
func BenchmarkPrefixHit(b *testing.B) {
	for _, n := range []int{256, 2048, 16384} {
		m := newManager(b, Config{NumBlocks: 2048, EnablePrefixCache: true})
		prompt := make([]int32, n)
		for i := range prompt {
			prompt[i] = int32(i * 7)
		}
		if _, ok := m.Admit(0, prompt, n); !ok {
			b.Fatal("Admit: no room")
		}
		m.Commit(0, prompt, n)
		m.Free(0, false)
		want := (n - 1) / DefaultBlockSize * DefaultBlockSize
		b.Run(fmt.Sprintf("admit/tokens=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			seq := SeqID(1)
			for b.Loop() {
				if cached, ok := m.Admit(seq, prompt, n); !ok || cached != want {
					b.Fatalf("Admit = %d, %v; want %d, true", cached, ok, want)
				}
				m.Free(seq, false)
				seq++
			}
			b.ReportMetric(float64(want)*float64(b.N)/b.Elapsed().Seconds(), "hit-tokens/s")
		})
		b.Run(fmt.Sprintf("lookup/tokens=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := m.CachedPrefix(prompt); got != want {
					b.Fatalf("CachedPrefix = %d, want %d", got, want)
				}
			}
		})
	}
}

// TestSteadyStateAllocatesNothing counts every allocation of many request
// cycles after warm-up; benchmarks round allocs/op down, this does not.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("counts allocations over thousands of requests")
	}
	for _, tc := range allocFreeCases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorkload(t, tc.numBlocks, tc.hostBlocks, tc.prompts, tc.system, tc.unique, tc.dec)
			for i := range 4 * tc.prompts {
				w.request(i)
			}
			// AllocsPerRun averages over the runs (rounding down), so a
			// stray allocation elsewhere in the process (the test
			// framework, the runtime) cannot fail it, while one allocation
			// per request still does.
			const requests = 5000
			i := 0
			if n := testing.AllocsPerRun(requests, func() { w.request(i); i++ }); n != 0 {
				t.Fatalf("%v allocations per request, want 0", n)
			}
		})
	}
}

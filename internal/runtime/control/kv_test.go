package control

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/kvstream"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/cpu"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

const (
	kvBlockSize   = 4
	kvMaxModelLen = 200
)

// kvPod is a pod's engine (cpu executor, its loop running), program
// table and KV transfer.
type kvPod struct {
	eng *engine.Engine
	tab *programs.Table
	kv  *KVTransfer
	reg *prometheus.Registry
}

func newKVPod(t *testing.T, m *model.Model, name string) *kvPod {
	t.Helper()
	x, err := cpu.New(m, 64, kvBlockSize, cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	eng, err := engine.New(engine.Config{MaxModelLen: kvMaxModelLen, VocabSize: m.Config.VocabSize, EOS: m.Config.EOS, Decoder: m.Tokenizer,
		KV: kvcache.Config{NumBlocks: 64, BlockSize: kvBlockSize, EnablePrefixCache: true}}, x)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Stop(context.Background()) })
	tab := programs.New(programs.Config{Pod: name, Addr: name + ":8000"})
	reg := prometheus.NewRegistry()
	met, err := NewKVMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return &kvPod{eng: eng, tab: tab, kv: &KVTransfer{Engine: eng, Table: tab, MaxChainTokens: kvMaxModelLen, Metrics: met}, reg: reg}
}

// kvTestModel is a small random-weight model with KV contents to move.
func kvTestModel() *model.Model {
	return model.Random(model.Config{VocabSize: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96}, 21)
}

// serve is the pod's control API with the KV endpoint, behind the token.
func (p *kvPod) serve(t *testing.T) *httptest.Server {
	mux := Routes(p.tab)
	p.kv.AddRoutes(mux)
	srv := httptest.NewServer(Authorize(testToken, mux))
	t.Cleanup(srv.Close)
	return srv
}

// generate runs one greedy request of program id and returns its tokens
// and how many prompt tokens were cached; the table records the context.
func (p *kvPod) generate(t *testing.T, id string, prompt []int32, n int) ([]int32, int) {
	t.Helper()
	r := p.tab.Route(id, false)
	if r.Kind != programs.Local {
		t.Fatalf("route %v", r.Kind)
	}
	p.tab.Started(r.Ticket, int64(len(prompt)), "salt-"+id)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := p.eng.Submit(ctx, &engine.Request{ID: id, Prompt: prompt, CacheSalt: "salt-" + id,
		Params: engine.Params{MaxTokens: n, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	var toks []int32
	for {
		c, err := st.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, c.TokenIDs...)
		if c.Done {
			if c.Err != nil {
				t.Fatal(c.Err)
			}
			full := append(slices.Clone(prompt), toks...)
			p.tab.End(r.Ticket, int64(len(full)), 0, full)
			return toks, c.Usage.CachedTokens
		}
	}
}

// kvCountReaches is kvCount once it reaches want, or after 5 s.
func kvCountReaches(t *testing.T, p *kvPod, name, dir string, want float64) float64 {
	t.Helper()
	var n float64
	poll.Wait(5*time.Second, func() bool { n = kvCount(t, p, name, dir); return n >= want })
	return n
}

func kvCount(t *testing.T, p *kvPod, name, dir string) float64 {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if mt.GetLabel()[0].GetValue() == dir {
				return mt.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A program's KV moves from pod A to pod B over A's control API: B's next
// request of the program hits the moved chain and generates what it would
// have on A; without the token the transfer is refused (401) and nothing
// moves; a stream cut short leaves B a shorter prefix and the request
// recomputes the rest, with the same tokens.
func TestKVTransferBetweenPods(t *testing.T) {
	m := kvTestModel()
	rng := rand.New(rand.NewPCG(5, 6))
	first := make([]int32, 37)
	for i := range first {
		first[i] = int32(rng.IntN(300))
	}
	const gen = 6

	// The reference: both steps on one pod.
	ref := newKVPod(t, m, "ref")
	out1, _ := ref.generate(t, "p", first, gen)
	next := append(append(slices.Clone(first), out1...), 1, 2, 3)
	want, refCached := ref.generate(t, "p", next, gen)
	chain := (len(first) + gen) / kvBlockSize
	if refCached != chain*kvBlockSize {
		t.Fatalf("on one pod the second step found %d tokens cached, want %d", refCached, chain*kvBlockSize)
	}

	a := newKVPod(t, m, "a")
	srvA := a.serve(t)
	addrA := strings.TrimPrefix(srvA.URL, "http://")
	a.generate(t, "p", first, gen)
	ctx := context.Background()

	t.Run("unauthenticated", func(t *testing.T) {
		b := newKVPod(t, m, "b")
		got, err := b.kv.Fetch(ctx, controlclient.New("wrong", 5*time.Second), addrA, "p")
		if !controlclient.IsUnauthorized(err) || got != 0 {
			t.Fatalf("fetch with a wrong token: %d blocks, %v", got, err)
		}
		resp, err := http.Get(srvA.URL + wire.KVPath + "?program=p")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET without a token: %s", resp.Status)
		}
		if st := b.eng.KVStats(); st.Imported != 0 {
			t.Fatalf("a refused transfer imported %d blocks", st.Imported)
		}
		if f := kvCount(t, b, "kvpilot_kv_transfer_failures_total", "in"); f != 1 {
			t.Fatalf("failures counted: %v", f)
		}
	})

	t.Run("unknown program", func(t *testing.T) {
		b := newKVPod(t, m, "b")
		_, err := b.kv.Fetch(ctx, controlclient.New(testToken, 5*time.Second), addrA, "nope")
		var se *controlclient.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusNotFound {
			t.Fatalf("fetch of an unknown program: %v", err)
		}
	})

	t.Run("whole", func(t *testing.T) {
		b := newKVPod(t, m, "b")
		got, err := b.kv.Fetch(ctx, controlclient.New(testToken, 5*time.Second), addrA, "p")
		if err != nil || got != chain {
			t.Fatalf("fetch: %d blocks of %d, %v", got, chain, err)
		}
		toks, cached := b.generate(t, "p", next, gen)
		if cached != chain*kvBlockSize || !slices.Equal(toks, want) {
			t.Fatalf("on B: %v with %d cached, on one pod %v with %d", toks, cached, want, chain*kvBlockSize)
		}
		if n := kvCount(t, b, "kvpilot_kv_transfer_blocks_total", "in"); n != float64(chain) {
			t.Fatalf("B counted %v blocks in", n)
		}
		// A counts what it sent once its handler returns, which can be
		// after B has read the last byte.
		if n := kvCountReaches(t, a, "kvpilot_kv_transfer_blocks_total", "out", float64(chain)); n < float64(chain) {
			t.Fatalf("A counted %v blocks out", n)
		}
		if by := kvCount(t, b, "kvpilot_kv_transfer_bytes_total", "in"); by != float64(chain*2*2*kvBlockSize*32*4) {
			t.Fatalf("B counted %v bytes in", by)
		}
	})

	t.Run("cut short", func(t *testing.T) {
		// A proxy that passes A's answer on but stops 3 blocks' worth of
		// bytes before its end.
		cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), r.Method, srvA.URL+r.URL.RequestURI(), nil)
			req.Header = r.Header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(body[:len(body)-3*2*2*kvBlockSize*32*4])
		}))
		defer cut.Close()
		b := newKVPod(t, m, "b")
		got, err := b.kv.Fetch(ctx, controlclient.New(testToken, 5*time.Second), strings.TrimPrefix(cut.URL, "http://"), "p")
		if !errors.Is(err, io.ErrUnexpectedEOF) || got >= chain {
			t.Fatalf("fetch of a cut stream: %d of %d blocks, %v", got, chain, err)
		}
		toks, cached := b.generate(t, "p", next, gen)
		if cached != got*kvBlockSize || !slices.Equal(toks, want) {
			t.Fatalf("on B after a cut transfer: %v with %d cached (%d blocks arrived), on one pod %v", toks, cached, got, want)
		}
		if f := kvCount(t, b, "kvpilot_kv_transfer_failures_total", "in"); f != 1 {
			t.Fatalf("failures counted: %v", f)
		}
	})
}

// A fetch takes a chain no longer than the pod's max model length: a
// source announcing more (a peer with a longer --max-model-len, or a
// broken one) is refused before anything is imported, since no request
// here could use such a chain; a chain of exactly that length is taken.
func TestKVFetchRefusesChainsLongerThanTheContext(t *testing.T) {
	b := newKVPod(t, kvTestModel(), "b")
	format, ok := b.eng.BlockFormat()
	if !ok {
		t.Fatal("the cpu executor moves no blocks")
	}
	maxBlocks := kvMaxModelLen / kvBlockSize
	peer := func(blocks int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			toks := make([]int32, blocks*kvBlockSize)
			for i := range toks {
				toks[i] = int32(i % 300)
			}
			enc, err := kvstream.NewEncoder(w, &kvstream.Header{Format: format, Salt: 9, Tokens: toks})
			if err != nil {
				t.Error(err)
				return
			}
			chunk := kvstream.ChunkBlocks(format)
			for sent := 0; sent < blocks; sent += chunk {
				n := min(chunk, blocks-sent)
				if err := enc.Chunk(n, make([]byte, n*format.BlockBytes())); err != nil {
					return
				}
			}
			_ = enc.End()
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	c := controlclient.New(testToken, 5*time.Second)
	got, err := b.kv.Fetch(context.Background(), c, peer(maxBlocks+1), "long")
	if !errors.Is(err, kvstream.ErrTooLong) || got != 0 {
		t.Fatalf("a chain of %d blocks on a pod of %d tokens: %d blocks, %v; want ErrTooLong", maxBlocks+1, kvMaxModelLen, got, err)
	}
	if st := b.eng.KVStats(); st.Imported != 0 || st.Cached != 0 {
		t.Fatalf("a refused chain changed the cache: %+v", st)
	}
	if got, err := b.kv.Fetch(context.Background(), c, peer(maxBlocks), "fits"); err != nil || got != maxBlocks {
		t.Fatalf("a chain of %d blocks, the pod's whole context: %d blocks, %v", maxBlocks, got, err)
	}
	unbounded := &KVTransfer{Engine: b.eng, Table: b.tab}
	if got, err := unbounded.Fetch(context.Background(), c, peer(1), "any"); !errors.Is(err, kvstream.ErrTooLong) || got != 0 {
		t.Fatalf("a transfer without a chain bound took %d blocks, %v", got, err)
	}
}

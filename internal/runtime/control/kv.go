package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvpilot/kvpilot/internal/runtime/control/controlclient"
	"github.com/kvpilot/kvpilot/internal/runtime/control/kvstream"
	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// KVEngine is what moving KV needs of the engine (engine.Engine): blocks,
// and for a hybrid model (BlockFormat's StateBytes > 0) the recurrent-state
// checkpoint that resumes them.
type KVEngine interface {
	BlockFormat() (batch.BlockFormat, bool)
	CachedChainBlocks(salt kvcache.Salt, tokens []int32) int
	ExportBlocks(ctx context.Context, salt kvcache.Salt, tokens []int32, from, n int, dst []byte) (int, []byte, error)
	ImportBlocks(ctx context.Context, format batch.BlockFormat, salt kvcache.Salt, tokens []int32, from, n int, data []byte) (int, error)
	ExportState(ctx context.Context, salt kvcache.Salt, tokens []int32, maxBlocks int, dst []byte) (int, []byte, error)
	ImportState(ctx context.Context, format batch.BlockFormat, salt kvcache.Salt, tokens []int32, k int, data []byte) error
}

// KVTransfer moves programs' KV between this pod and the others: it serves
// the blocks of the programs this pod ran (AddRoutes) and fetches those of
// programs that resume here (Fetch).
type KVTransfer struct {
	Engine KVEngine
	Table  *programs.Table
	// MaxChainTokens bounds the chain a fetch takes: this pod's max model
	// length, since no program's context here is longer, so more could only
	// fill the cache with blocks no request uses. A source announcing more
	// is refused before anything is imported; 0 refuses every fetch.
	MaxChainTokens int
	Metrics        *KVMetrics // nil: none
	Logger         *slog.Logger
}

// AddRoutes adds the KV endpoint to a control API mux (Routes'), to be
// served behind Authorize.
func (k *KVTransfer) AddRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+wire.KVPath, k.serve)
}

func (k *KVTransfer) log() *slog.Logger {
	if k.Logger == nil {
		return slog.Default()
	}
	return k.Logger
}

// serve streams program's cached chain, chunk by chunk: each chunk holds
// the engine between two iterations only while it is read, and the write
// deadline moves on with each chunk, so a long context streams within the
// server's bounds; a client that leaves stops the stream.
func (k *KVTransfer) serve(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("program")
	if id == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "kv: the program query parameter is required", "field": "program"})
		return
	}
	format, ok := k.Engine.BlockFormat()
	if !ok {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "kv: this pod's executor cannot move KV blocks"})
		return
	}
	cacheSalt, tokens, ok := k.Table.KVContext(id)
	salt := kvcache.SaltOf(cacheSalt)
	n := 0
	if ok {
		n = k.Engine.CachedChainBlocks(salt, tokens)
	}
	if n == 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("kv: no cached KV of program %q on this pod", id)})
		return
	}
	tokens = tokens[:n*format.BlockSize]
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	sent, states, err := k.stream(r.Context(), w, rc, format, salt, tokens)
	k.Metrics.observe("out", sent, sent*format.BlockBytes()+states*format.StateBytes, err)
	if err != nil {
		k.log().Warn("KV transfer to another pod cut short", "program", id, "blocks", sent, "of", n, "err", err)
	}
}

// stream writes the chain's blocks and, for a hybrid model, the deepest
// recurrent-state checkpoint among them; it returns the blocks and states
// sent.
func (k *KVTransfer) stream(ctx context.Context, w io.Writer, rc *http.ResponseController, format batch.BlockFormat,
	salt kvcache.Salt, tokens []int32) (sent, states int, err error) {
	// Headers, token ids and each chunk get WriteTimeout each.
	_ = rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	enc, err := kvstream.NewEncoder(w, &kvstream.Header{Format: format, Salt: salt, Tokens: tokens})
	if err != nil {
		return 0, 0, err
	}
	total, chunk := len(tokens)/format.BlockSize, kvstream.ChunkBlocks(format)
	var buf []byte
	for sent < total {
		if err := ctx.Err(); err != nil {
			return sent, 0, err
		}
		n, data, err := k.Engine.ExportBlocks(ctx, salt, tokens, sent, min(chunk, total-sent), buf)
		if err != nil {
			return sent, 0, err
		}
		if n == 0 {
			break // evicted since the header: the receiver gets a shorter chain
		}
		_ = rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
		if err := enc.Chunk(n, data); err != nil {
			return sent, 0, err
		}
		sent += n
		buf = data
	}
	if format.StateBytes > 0 && sent > 0 {
		// Read after the blocks: the checkpoint the stream ends with is
		// the deepest one still here within what was sent.
		after, data, err := k.Engine.ExportState(ctx, salt, tokens, sent, buf)
		if err != nil {
			return sent, 0, err
		}
		if after > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
			if err := enc.State(after, data); err != nil {
				return sent, 0, err
			}
			states = 1
		}
	}
	if err := enc.End(); err != nil {
		return sent, states, err
	}
	return sent, states, rc.Flush()
}

// Fetch pulls program id's KV from the pod whose control API is at addr
// into this pod's engine, chunk by chunk as it arrives (memory is bounded
// by one chunk). It returns how many blocks are now cached here. A failed,
// refused or cut transfer is not fatal: what arrived whole is a usable
// prefix, and the program's next request recomputes the rest. The
// transfer stops when ctx is done, when the source leaves, or when this
// pod's cache has no room for more without evicting other programs'
// offloaded KV (kvcache.Manager.Import); a chain longer than
// MaxChainTokens is refused whole.
//
// A hybrid model's program (a format with recurrent states) resumes only
// from a recurrent-state checkpoint: the stream's state is installed as
// one (engine.ImportState) once the blocks it follows are here; a stream
// that brings none, or a state this pod has no checkpoint slot for, is an
// error, since the blocks alone resume nothing.
func (k *KVTransfer) Fetch(ctx context.Context, c *controlclient.Client, addr, id string) (int, error) {
	got, bytes, err := k.fetch(ctx, c, addr, id)
	k.Metrics.observe("in", got, bytes, err)
	return got, err
}

// fetch is Fetch; it also returns the bytes of the blocks and states
// taken.
func (k *KVTransfer) fetch(ctx context.Context, c *controlclient.Client, addr, id string) (blocks, bytes int, err error) {
	own, ok := k.Engine.BlockFormat()
	if !ok {
		return 0, 0, errors.New("kv fetch: this pod's executor cannot move KV blocks")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // closes the connection: the source stops
	u := "http://" + addr + wire.KVPath + "?program=" + url.QueryEscape(id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := c.Send(req)
	if err != nil {
		return 0, 0, fmt.Errorf("kv fetch %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, 0, &controlclient.StatusError{Method: http.MethodGet, URL: addr + wire.KVPath, Code: resp.StatusCode, Status: resp.Status,
			Message: strings.TrimSpace(string(msg))}
	}
	dec, err := kvstream.NewBoundedDecoder(resp.Body, k.MaxChainTokens)
	if err != nil {
		return 0, 0, fmt.Errorf("kv fetch %s: %w", addr, err)
	}
	h := dec.Header()
	if err := own.Compatible(h.Format); err != nil {
		return 0, 0, fmt.Errorf("kv fetch %s: refusing the blocks: %w", addr, err)
	}
	have, states, full, stateAfter := 0, 0, true, 0
	taken := func() int { return have*h.Format.BlockBytes() + states*h.Format.StateBytes }
	for {
		fr, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return have, taken(), fmt.Errorf("kv fetch %s: after %d blocks: %w", addr, have, err)
		}
		if fr.StateAfter > 0 {
			if stateAfter = fr.StateAfter; stateAfter > have {
				continue // its blocks found no room here
			}
			if err := k.Engine.ImportState(ctx, h.Format, h.Salt, h.Tokens, fr.StateAfter, fr.Data); err != nil {
				return have, taken(), fmt.Errorf("kv fetch %s: %w", addr, err)
			}
			states++
			continue
		}
		if !full {
			continue // past the room here: only a state may still follow
		}
		got, err := k.Engine.ImportBlocks(ctx, h.Format, h.Salt, h.Tokens, have, fr.Blocks, fr.Data)
		have += got
		if err != nil {
			return have, taken(), fmt.Errorf("kv fetch %s: %w", addr, err)
		}
		full = got == fr.Blocks
	}
	switch {
	case h.Format.StateBytes == 0 || states > 0 || have == 0:
	case stateAfter > have:
		return have, taken(), fmt.Errorf("kv fetch %s: room here for %d blocks of a hybrid model, its recurrent state follows %d", addr, have, stateAfter)
	default:
		return have, taken(), fmt.Errorf("kv fetch %s: %d blocks of a hybrid model came without the recurrent state that resumes them", addr, have)
	}
	return have, taken(), nil
}

// KVMetrics count the blocks moved between pods.
type KVMetrics struct {
	blocks, bytes, transfers, failures *prometheus.CounterVec
}

// NewKVMetrics registers the KV transfer metrics on reg.
func NewKVMetrics(reg prometheus.Registerer) (*KVMetrics, error) {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"direction"})
	}
	m := &KVMetrics{
		blocks:    vec("kvpilot_kv_transfer_blocks_total", "KV blocks moved between pods: out (served to another pod), in (fetched into this one)."),
		bytes:     vec("kvpilot_kv_transfer_bytes_total", "Bytes of KV block contents (and hybrid models' recurrent states) moved between pods, by direction."),
		transfers: vec("kvpilot_kv_transfers_total", "Programs' KV transfers between pods, by direction."),
		failures:  vec("kvpilot_kv_transfer_failures_total", "KV transfers between pods that failed or were cut short (the rest is recomputed), by direction."),
	}
	for _, c := range []prometheus.Collector{m.blocks, m.bytes, m.transfers, m.failures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register KV transfer metrics: %w", err)
		}
	}
	return m, nil
}

// observe counts a transfer of blocks blocks, bytes bytes in all (their
// contents and any recurrent states).
func (m *KVMetrics) observe(dir string, blocks, bytes int, err error) {
	if m == nil {
		return
	}
	m.transfers.WithLabelValues(dir).Inc()
	m.blocks.WithLabelValues(dir).Add(float64(blocks))
	m.bytes.WithLabelValues(dir).Add(float64(bytes))
	if err != nil {
		m.failures.WithLabelValues(dir).Inc()
	}
}

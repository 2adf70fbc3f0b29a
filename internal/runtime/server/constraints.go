package server

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
	"github.com/kvpilot/kvpilot/internal/util/membudget"
)

// The compile cache bounds: an agent sends the same schema or tool list
// every turn, and a cached grammar keeps its automaton and token masks,
// so later requests pay neither compilation nor mask computation. A
// refusal is cached too (its error holds the message, never the
// compile's structures), so a client repeating a schema the server
// refuses costs one compile.
const (
	grammarCacheEntries = 64
	grammarCacheBytes   = 512 << 20
)

// SchemaDroppedHeader names, comma-separated, the JSON-schema keywords a
// request's schemas carried that the constrained decoder could not
// enforce and dropped (tool parameters; response_format without strict).
const SchemaDroppedHeader = "X-Kvpilot-Schema-Dropped"

// grammars compiles output constraints for the served model. The
// vocabulary trie is built on the first constrained request (a 150k
// vocabulary takes a fraction of a second), not at startup.
type grammars struct {
	size    int
	decoder engine.TokenDecoder

	once  sync.Once
	vocab *grammar.Vocab
	// special are the vocabularies with some special tokens (guarded by
	// mu), by vocabularyWith's key.
	special map[string]*grammar.Vocab

	mu    sync.Mutex
	cache map[string]*list.Element
	lru   *list.List // of *grammarEntry, most recent first
	// inflight are the keys being compiled, each closed when done.
	inflight map[string]chan struct{}
	// budget is the pod's preprocessing memory: a compile draws its
	// automaton and its start mask on a claim of its own, given back when
	// the compile ends (the grammar cache bounds what it keeps).
	budget *membudget.Budget

	// Set only by tests, before the first request: onWait sees a request
	// start waiting on another's compile of key, onCompile a compile
	// start (with its context), onCompiled a compile end (with its
	// error, before anything is cached).
	onWait     func(key string)
	onCompile  func(ctx context.Context, key string)
	onCompiled func(key string, err error)
}

type grammarEntry struct {
	key     string
	g       *grammar.Grammar
	dropped []string
	err     error
}

// compiled is a constraint ready to decode with.
type compiled struct {
	g *grammar.Grammar
	// dropped are the schema keywords left unenforced.
	dropped []string
}

// prepareMemory is what a compile's start mask (grammar.Prepare) may
// take, drawn on the budget before it runs: a mask at the work bound of a
// decoding step allocates up to 25 MB (BenchmarkMaskAtBound).
const prepareMemory = 32 << 20

func newGrammars(vocabSize int, dec engine.TokenDecoder, budget *membudget.Budget) *grammars {
	if budget == nil {
		budget = membudget.New(0)
	}
	return &grammars{size: vocabSize, decoder: dec, cache: map[string]*list.Element{}, lru: list.New(),
		inflight: map[string]chan struct{}{}, budget: budget}
}

func (gs *grammars) vocabulary() *grammar.Vocab {
	gs.once.Do(func() { gs.vocab = grammar.NewVocab(gs.size, gs.decoder.TokenBytes) })
	return gs.vocab
}

// get returns the cached compile of key, or compiles it. Requests for a
// key being compiled wait for that compile (each as long as its own ctx
// lasts) instead of compiling it again. A compile cut short by its ctx is
// not cached; those waiting on it then compile it themselves.
func (gs *grammars) get(ctx context.Context, key string, compile func(context.Context) (*grammar.Grammar, []string, error)) (compiled, error) {
	return gs.getWith(ctx, key, nil, compile)
}

// getWith is get for a grammar decoded with the vocabulary that spells
// specials as themselves (vocabularyWith); key must tell such grammars
// apart, as a grammar is bound to one vocabulary.
func (gs *grammars) getWith(ctx context.Context, key string, specials []string, compile func(context.Context) (*grammar.Grammar, []string, error)) (compiled, error) {
	for {
		gs.mu.Lock()
		if e, ok := gs.cache[key]; ok {
			gs.lru.MoveToFront(e)
			ge := e.Value.(*grammarEntry)
			gs.mu.Unlock()
			return compiled{ge.g, ge.dropped}, ge.err
		}
		wait, busy := gs.inflight[key]
		if !busy {
			wait = make(chan struct{})
			gs.inflight[key] = wait
		}
		gs.mu.Unlock()
		if !busy {
			return gs.compileInto(ctx, key, specials, wait, compile)
		}
		if gs.onWait != nil {
			gs.onWait(key)
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return compiled{}, ctx.Err()
		}
	}
}

// compileInto compiles key, caches what is not cut short by ctx, and
// releases those waiting on done. The compile includes the start
// position's token mask (grammar.Prepare), built under the work bound of
// a decoding step: a grammar whose rule stacks multiply past it from the
// start is refused here, with a 400, instead of failing in the engine,
// and the first step of a request finds its mask ready.
func (gs *grammars) compileInto(ctx context.Context, key string, specials []string, done chan struct{}, compile func(context.Context) (*grammar.Grammar, []string, error)) (compiled, error) {
	released := false
	defer func() {
		// A compile that panicked still releases those waiting on it (the
		// panic goes on to the server's recovery): they compile the key
		// themselves instead of waiting on it for as long as they last.
		if !released {
			gs.mu.Lock()
			delete(gs.inflight, key)
			close(done)
			gs.mu.Unlock()
		}
	}()
	claim := gs.budget.Claim()
	defer claim.Release()
	cctx := membudget.WithClaim(ctx, claim)
	if gs.onCompile != nil {
		gs.onCompile(cctx, key)
	}
	g, dropped, err := compile(cctx)
	if gs.onCompiled != nil {
		gs.onCompiled(key, err)
	}
	if err == nil && gs.size > 0 && gs.decoder != nil { // no vocabulary otherwise (tests of the cache)
		if err = claim.Grow(prepareMemory); err == nil {
			err = g.Prepare(gs.vocabularyFor(specials))
		}
		if err != nil {
			g, dropped = nil, nil
		}
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	released = true
	delete(gs.inflight, key)
	close(done)
	// Neither a compile cut short nor one the budget refused says
	// anything about the constraint: the next request compiles it again.
	if err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, membudget.ErrExhausted)) {
		return compiled{}, err
	}
	gs.cache[key] = gs.lru.PushFront(&grammarEntry{key: key, g: g, dropped: dropped, err: err})
	gs.evictLocked()
	return compiled{g, dropped}, err
}

// evictLocked drops the least recently used entries past the entry
// bound, and past the byte bound (grammars grow their masks as they are
// used, so their sizes are read again at each insertion). The newest
// entry stays. MemoryBytes does not wait for a grammar busy computing a
// mask on the engine's goroutine, so neither does this, nor the requests
// queued on gs.mu behind it.
func (gs *grammars) evictLocked() {
	for gs.lru.Len() > grammarCacheEntries {
		gs.removeLocked(gs.lru.Back())
	}
	var total int64
	for e := gs.lru.Front(); e != nil; e = e.Next() {
		if g := e.Value.(*grammarEntry).g; g != nil {
			total += g.MemoryBytes()
		}
	}
	for total > grammarCacheBytes && gs.lru.Len() > 1 {
		last := gs.lru.Back()
		if g := last.Value.(*grammarEntry).g; g != nil {
			total -= g.MemoryBytes()
		}
		gs.removeLocked(last)
	}
}

func (gs *grammars) removeLocked(e *list.Element) {
	gs.lru.Remove(e)
	delete(gs.cache, e.Value.(*grammarEntry).key)
}

// compileOutput compiles a response_format / guided_* / grammar
// constraint; errors are 400s naming the field. It stops when ctx (the
// request's) ends.
func (gs *grammars) compileOutput(ctx context.Context, c *openai.OutputConstraint) (compiled, *openai.Error) {
	if gs.size <= 0 {
		return compiled{}, openai.BadRequest(c.Param, "structured outputs need the model's vocabulary size, which this server was not given")
	}
	key := c.Key()
	if c.Kind == openai.ConstraintJSONSchema {
		// Schemas that differ only in spacing share an entry.
		if canon, err := grammar.CanonicalJSON(c.Schema); err == nil {
			key = c.Kind + "\x00" + map[bool]string{true: "lenient", false: "strict"}[c.Lenient] + "\x00" + canon
		}
	}
	out, err := gs.get(ctx, key, func(ctx context.Context) (*grammar.Grammar, []string, error) {
		switch c.Kind {
		case openai.ConstraintJSONObject:
			return grammar.AnyJSONObject(), nil, nil
		case openai.ConstraintJSONSchema:
			return grammar.CompileJSONSchema(ctx, c.Schema, grammar.SchemaOptions{Lenient: c.Lenient})
		case openai.ConstraintRegex:
			g, err := grammar.CompileRegex(ctx, c.Regex)
			return g, nil, err
		case openai.ConstraintChoice:
			g, err := grammar.CompileChoice(ctx, c.Choices)
			return g, nil, err
		case openai.ConstraintGrammar:
			g, err := grammar.CompileGBNF(ctx, c.Grammar)
			return g, nil, err
		}
		return nil, nil, errors.New("unknown constraint kind " + c.Kind)
	})
	if err != nil {
		return compiled{}, constraintError(c.Param, err)
	}
	return out, nil
}

// constraintError is the answer to a compile that failed: 503 when the
// pod's preprocessing budget refused it (the constraint may compile
// later), else a 400 naming param.
func constraintError(param string, err error) *openai.Error {
	if errors.Is(err, membudget.ErrExhausted) {
		return busy(param, "%s: compiling the constraint: %v", param, err)
	}
	return openai.BadRequest(param, "%s: %v", param, err)
}

// memoryError is the answer to preprocessing whose charge the pod's
// budget refused: 503 with Retry-After while other requests hold the
// budget, 400 naming param when the work needs more than all of it
// (membudget.ErrOverBudget: retrying cannot help).
func memoryError(param string, err error, format string, args ...any) *openai.Error {
	msg := fmt.Sprintf(format, args...)
	if errors.Is(err, membudget.ErrExhausted) {
		return busy(param, "%s: %v", msg, err)
	}
	return openai.BadRequest(param, "%s: %v", msg, err)
}

// reportDropped tells the client (a response header) and the log which
// schema keywords a request's constraint leaves unenforced.
func (s *Server) reportDropped(h http.Header, param string, dropped []string) {
	if len(dropped) == 0 {
		return
	}
	list := h.Get(SchemaDroppedHeader)
	for _, k := range dropped {
		if strings.HasSuffix(list, "…") {
			break // cut short already, by an earlier constraint
		}
		sep := ""
		if list != "" {
			sep = ","
		}
		if len(list)+len(sep)+len(k) > maxDroppedHeaderBytes {
			list += sep + "…"
			break
		}
		list += sep + k
	}
	h.Set(SchemaDroppedHeader, list)
	logged := dropped
	if len(logged) > maxDroppedLogged {
		logged = logged[:maxDroppedLogged]
	}
	s.log.Warn("schema keywords dropped: constrained decoding cannot enforce them", "param", param,
		"keywords", logged, "count", len(dropped))
}

// Bounds on what reportDropped writes: a schema may carry any number of
// keywords the decoder drops, and each would otherwise lengthen the
// response header and the log line (clients refuse headers past a few
// KiB). The keywords that would take the header past
// maxDroppedHeaderBytes are one "…".
const (
	maxDroppedHeaderBytes = 2048
	maxDroppedLogged      = 32
)

// A grammar matcher fails its request, not the engine, when its automaton
// passes its work bound at some position.
var _ engine.FailingConstraint = (*grammar.Matcher)(nil)

// matcher starts a request on g; ends are the model's EOS ids and the
// request's stop token ids.
func (gs *grammars) matcher(g *grammar.Grammar, ends []int32, specials []string) *grammar.Matcher {
	return g.NewMatcher(gs.vocabularyFor(specials), ends)
}

// vocabularyFor is the vocabulary, or vocabularyWith specials when there
// are any.
func (gs *grammars) vocabularyFor(specials []string) *grammar.Vocab {
	if len(specials) > 0 {
		return gs.vocabularyWith(specials)
	}
	return gs.vocabulary()
}

// vocabularyWith is the vocabulary with the special tokens whose texts
// are specials spelled as those texts: a format whose markup is special
// tokens (harmony) writes them as the model does, and its output keeps
// their text. Other special tokens stay out of grammars. Built once per
// set, on first use.
func (gs *grammars) vocabularyWith(specials []string) *grammar.Vocab {
	key := strings.Join(specials, "\x00")
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if v, ok := gs.special[key]; ok {
		return v
	}
	sd, ok := gs.decoder.(engine.SpecialDecoder)
	if !ok {
		return gs.vocabulary()
	}
	v := grammar.NewVocab(gs.size, func(id int32) []byte {
		if t := sd.SpecialText(id); t != nil && slices.Contains(specials, string(t)) {
			return t
		}
		return gs.decoder.TokenBytes(id)
	})
	if gs.special == nil {
		gs.special = map[string]*grammar.Vocab{}
	}
	gs.special[key] = v
	return v
}

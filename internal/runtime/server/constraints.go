package server

import (
	"container/list"
	"errors"
	"sync"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
	"github.com/kvpilot/kvpilot/internal/scheduler/grammar"
)

// grammarCacheSize bounds the compiled grammars kept: an agent sends the
// same schema or tool list every turn, and a cached grammar keeps its DFA
// and token masks, so later requests pay neither compilation nor mask
// computation.
const grammarCacheSize = 64

// grammars compiles output constraints for the served model. The
// vocabulary trie is built on the first constrained request (a 150k
// vocabulary takes a fraction of a second), not at startup.
type grammars struct {
	size    int
	decoder engine.TokenDecoder

	once  sync.Once
	vocab *grammar.Vocab

	mu    sync.Mutex
	cache map[string]*list.Element
	lru   *list.List // of *grammarEntry, most recent first
}

type grammarEntry struct {
	key string
	g   *grammar.Grammar
}

func newGrammars(vocabSize int, dec engine.TokenDecoder) *grammars {
	return &grammars{size: vocabSize, decoder: dec, cache: map[string]*list.Element{}, lru: list.New()}
}

func (gs *grammars) vocabulary() *grammar.Vocab {
	gs.once.Do(func() { gs.vocab = grammar.NewVocab(gs.size, gs.decoder.TokenBytes) })
	return gs.vocab
}

// get returns the cached grammar for key, or compiles it.
func (gs *grammars) get(key string, compile func() (*grammar.Grammar, error)) (*grammar.Grammar, error) {
	gs.mu.Lock()
	if e, ok := gs.cache[key]; ok {
		gs.lru.MoveToFront(e)
		g := e.Value.(*grammarEntry).g
		gs.mu.Unlock()
		return g, nil
	}
	gs.mu.Unlock()
	g, err := compile()
	if err != nil {
		return nil, err
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if e, ok := gs.cache[key]; ok { // compiled concurrently: keep one
		return e.Value.(*grammarEntry).g, nil
	}
	gs.cache[key] = gs.lru.PushFront(&grammarEntry{key: key, g: g})
	if gs.lru.Len() > grammarCacheSize {
		last := gs.lru.Back()
		gs.lru.Remove(last)
		delete(gs.cache, last.Value.(*grammarEntry).key)
	}
	return g, nil
}

// compileOutput compiles a response_format / guided_* constraint; errors
// are 400s naming the field.
func (gs *grammars) compileOutput(c *openai.OutputConstraint) (*grammar.Grammar, *openai.Error) {
	if gs.size <= 0 {
		return nil, openai.BadRequest(c.Param, "structured outputs need the model's vocabulary size, which this server was not given")
	}
	g, err := gs.get(c.Key(), func() (*grammar.Grammar, error) {
		switch c.Kind {
		case openai.ConstraintJSONObject:
			return grammar.AnyJSONObject(), nil
		case openai.ConstraintJSONSchema:
			return grammar.JSONSchema(c.Schema)
		case openai.ConstraintRegex:
			return grammar.Regex(c.Regex)
		case openai.ConstraintChoice:
			return grammar.Choice(c.Choices)
		}
		return nil, errors.New("unknown constraint kind " + c.Kind)
	})
	if err != nil {
		return nil, openai.BadRequest(c.Param, "%s: %v", c.Param, err)
	}
	return g, nil
}

// matcher starts a request on g; ends are the model's EOS ids and the
// request's stop token ids.
func (gs *grammars) matcher(g *grammar.Grammar, ends []int32) *grammar.Matcher {
	return g.NewMatcher(gs.vocabulary(), ends)
}

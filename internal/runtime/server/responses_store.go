package server

import (
	"container/list"
	"sync"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// Defaults of the Responses store (Config.ResponsesStoreEntries, …Bytes).
const (
	DefaultResponsesStoreEntries = 1024
	DefaultResponsesStoreBytes   = 64 << 20
)

// responseStore keeps the responses of POST /v1/responses that asked to
// be stored, for previous_response_id, item_reference and GET/DELETE
// /v1/responses/{id}. It holds at most maxEntries responses and maxBytes
// of their text, evicting the least recently used first (reading a
// conversation uses every response in its chain). Each response keeps
// only its own turn (its input items and its output) and the id of the
// response it continued, so a long chain costs memory linear in its
// length; a chain one of whose responses was evicted can no longer be
// continued. It is safe for concurrent use.
type responseStore struct {
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex
	bytes int64
	lru   *list.List // of *storedResponse, most recent first
	byID  map[string]*list.Element
	items map[string]itemRef // output item id → where it is
}

type storedResponse struct {
	id, parent string
	input      []openai.Message
	output     []openai.OutputItem
	body       []byte // the response's JSON, as GET returns it
	size       int64
}

type itemRef struct {
	response string
	index    int
}

func newResponseStore(maxEntries int, maxBytes int64) *responseStore {
	return &responseStore{maxEntries: maxEntries, maxBytes: maxBytes, lru: list.New(),
		byID: map[string]*list.Element{}, items: map[string]itemRef{}}
}

var _ openai.ResponseHistory = (*responseStore)(nil)

// put stores a response; it reports false when the response alone is
// over the byte limit (it is then not stored).
func (st *responseStore) put(r *storedResponse) bool {
	r.size = int64(len(r.body)) + messagesSize(r.input)
	for _, it := range r.output {
		r.size += int64(len(it.Arguments)+len(it.Name)+len(it.CallID)+len(it.ID)) + 64
		for _, c := range it.Content {
			r.size += int64(len(c.Text))
		}
	}
	if st.maxEntries <= 0 || r.size > st.maxBytes {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if e, ok := st.byID[r.id]; ok { // a client reused its X-Request-Id
		st.removeLocked(e)
	}
	st.byID[r.id] = st.lru.PushFront(r)
	st.bytes += r.size
	for i, it := range r.output {
		st.items[it.ID] = itemRef{response: r.id, index: i}
	}
	for st.lru.Len() > st.maxEntries || st.bytes > st.maxBytes {
		st.removeLocked(st.lru.Back())
	}
	return true
}

func messagesSize(msgs []openai.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += int64(len(m.Content.Text)+len(m.ToolCallID)) + 64
		for _, c := range m.ToolCalls {
			n += int64(len(c.ID)+len(c.Function.Name)+len(c.Function.Arguments)) + 64
		}
	}
	return n
}

func (st *responseStore) removeLocked(e *list.Element) {
	r := e.Value.(*storedResponse)
	st.lru.Remove(e)
	delete(st.byID, r.id)
	st.bytes -= r.size
	for _, it := range r.output {
		if ref, ok := st.items[it.ID]; ok && ref.response == r.id {
			delete(st.items, it.ID)
		}
	}
}

// get returns a stored response's JSON.
func (st *responseStore) get(id string) ([]byte, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.byID[id]
	if !ok {
		return nil, false
	}
	st.lru.MoveToFront(e)
	return e.Value.(*storedResponse).body, true
}

// remove deletes a stored response; it reports whether there was one.
func (st *responseStore) remove(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.byID[id]
	if ok {
		st.removeLocked(e)
	}
	return ok
}

// Conversation implements openai.ResponseHistory: the turns of the chain
// that ends at id, oldest first, each its input and then its output.
func (st *responseStore) Conversation(id string) ([]openai.Message, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var chain []*storedResponse
	for next := id; next != ""; {
		e, ok := st.byID[next]
		// A chain is never longer than the store; a longer walk is a cycle
		// (ids a client reused).
		if !ok || len(chain) >= st.lru.Len() {
			return nil, false
		}
		st.lru.MoveToFront(e)
		r := e.Value.(*storedResponse)
		chain = append(chain, r)
		next = r.parent
	}
	var msgs []openai.Message
	for i := len(chain) - 1; i >= 0; i-- {
		msgs = append(msgs, chain[i].input...)
		msgs = append(msgs, openai.AssistantMessage(chain[i].output))
	}
	return msgs, true
}

// Item implements openai.ResponseHistory.
func (st *responseStore) Item(id string) (openai.ResponseItem, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ref, ok := st.items[id]
	if !ok {
		return openai.ResponseItem{}, false
	}
	e := st.byID[ref.response]
	st.lru.MoveToFront(e)
	return e.Value.(*storedResponse).output[ref.index].AsInput(), true
}

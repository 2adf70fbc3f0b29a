package server

import (
	"container/list"
	"sync"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// Defaults of the Responses store (Config.ResponsesStoreEntries, …Bytes).
const (
	DefaultResponsesStoreEntries = 1024
	DefaultResponsesStoreBytes   = 64 << 20
)

// responseStore keeps the responses of POST /v1/responses that asked to
// be stored, for previous_response_id, item_reference and GET/DELETE
// /v1/responses/{id}. It holds at most maxEntries responses and maxBytes
// of their text. Each response keeps only its own turn (its input items
// and its output) and the id of the response it continued, so a long
// chain costs memory linear in its length; a chain one of whose responses
// was evicted can no longer be continued.
//
// Every response belongs to the owner of the API key that created it
// (authenticate): it is found only under that owner, so to another key it
// is as unknown as an id never stored, and ids that two owners happen to
// share are two responses. The bounds are shared, but eviction is not one
// LRU over all owners: over a bound, the store evicts the least recently used
// response of the owner holding the most (responses for the entries
// bound, bytes for the bytes bound; between owners holding equally much,
// the older of their least recently used responses). So an owner evicts
// another's responses only while that one holds at least as much as it,
// one key's flood of cheap requests evicts its own, and an owner holding
// at most an equal share of a bound (the bound divided among the owners
// holding responses) never loses one: over the bound, the largest holds
// more than that. With a single owner (a pod without API keys) this is
// plain LRU. A response that would have to evict itself is not kept. It
// is safe for concurrent use.
type responseStore struct {
	maxEntries int
	maxBytes   int64

	mu      sync.Mutex
	entries int
	bytes   int64
	// clock stamps each response when stored or used, to order the least
	// recently used responses of owners holding equally much.
	clock  uint64
	owners map[programs.Owner]*ownerShare
	// largest ranks the owners by what they hold, one heap per bound.
	largest [2]ownerHeap
	byID    map[storeKey]*list.Element
	items   map[storeKey]itemRef // output item id → where it is
}

// storeKey is a response's or an output item's id under its owner.
type storeKey struct {
	owner programs.Owner
	id    string
}

type storedResponse struct {
	owner      programs.Owner
	id, parent string
	input      []openai.Message
	output     []openai.OutputItem
	body       []byte // the response's JSON, as GET returns it
	size       int64
	used       uint64 // responseStore.clock when last stored or used
}

type itemRef struct {
	response string
	index    int
}

func newResponseStore(maxEntries int, maxBytes int64) *responseStore {
	return &responseStore{maxEntries: maxEntries, maxBytes: maxBytes,
		owners:  map[programs.Owner]*ownerShare{},
		largest: [2]ownerHeap{{by: byEntries}, {by: byBytes}},
		byID:    map[storeKey]*list.Element{}, items: map[storeKey]itemRef{}}
}

// put stores a response; it reports false when it is not stored: it alone
// is over the byte limit, or keeping it would evict it (its owner holds
// the most and has nothing older to give up).
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
	key := storeKey{r.owner, r.id}
	if e, ok := st.byID[key]; ok { // a client reused its X-Request-Id
		st.removeLocked(e)
	}
	o, known := st.owners[r.owner]
	if !known {
		o = &ownerShare{owner: r.owner, lru: list.New()}
		st.owners[r.owner] = o
	}
	st.clock++
	r.used = st.clock
	st.byID[key] = o.lru.PushFront(r)
	o.bytes += r.size
	st.entries++
	st.bytes += r.size
	if known {
		st.largest[byEntries].fix(o)
		st.largest[byBytes].fix(o)
	} else {
		st.largest[byEntries].push(o)
		st.largest[byBytes].push(o)
	}
	for i, it := range r.output {
		st.items[storeKey{r.owner, it.ID}] = itemRef{response: r.id, index: i}
	}
	stored := true
	for st.entries > st.maxEntries || st.bytes > st.maxBytes {
		bound := byEntries
		if st.entries <= st.maxEntries {
			bound = byBytes
		}
		victim := st.largest[bound].top().lru.Back()
		if victim.Value == r {
			stored = false
		}
		st.removeLocked(victim)
	}
	return stored
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
	o := st.owners[r.owner]
	o.lru.Remove(e)
	o.bytes -= r.size
	if o.lru.Len() == 0 {
		st.largest[byEntries].remove(o)
		st.largest[byBytes].remove(o)
		delete(st.owners, r.owner)
	} else {
		st.largest[byEntries].fix(o)
		st.largest[byBytes].fix(o)
	}
	delete(st.byID, storeKey{r.owner, r.id})
	st.entries--
	st.bytes -= r.size
	for _, it := range r.output {
		k := storeKey{r.owner, it.ID}
		if ref, ok := st.items[k]; ok && ref.response == r.id {
			delete(st.items, k)
		}
	}
}

// touchLocked marks a response used: its owner's most recently used.
func (st *responseStore) touchLocked(e *list.Element) {
	r := e.Value.(*storedResponse)
	o := st.owners[r.owner]
	st.clock++
	r.used = st.clock
	wasOldest := o.lru.Back() == e
	o.lru.MoveToFront(e)
	if wasOldest { // the owner's rank among equals changed
		st.largest[byEntries].fix(o)
		st.largest[byBytes].fix(o)
	}
}

// get returns the JSON of owner's stored response id.
func (st *responseStore) get(owner programs.Owner, id string) ([]byte, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.byID[storeKey{owner, id}]
	if !ok {
		return nil, false
	}
	st.touchLocked(e)
	return e.Value.(*storedResponse).body, true
}

// remove deletes owner's stored response id; it reports whether there
// was one.
func (st *responseStore) remove(owner programs.Owner, id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.byID[storeKey{owner, id}]
	if ok {
		st.removeLocked(e)
	}
	return ok
}

// history is what a request of owner can refer to: its own responses.
func (st *responseStore) history(owner programs.Owner) openai.ResponseHistory {
	return ownedHistory{st, owner}
}

// ownedHistory is one owner's view of a responseStore.
type ownedHistory struct {
	st    *responseStore
	owner programs.Owner
}

// Conversation implements openai.ResponseHistory: the turns of the chain
// that ends at id, oldest first, each its input and then its output.
func (h ownedHistory) Conversation(id string) ([]openai.Message, bool) {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	var chain []*storedResponse
	for next := id; next != ""; {
		e, ok := st.byID[storeKey{h.owner, next}]
		// A chain is never longer than the store; a longer walk is a cycle
		// (ids a client reused).
		if !ok || len(chain) >= st.entries {
			return nil, false
		}
		st.touchLocked(e)
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
func (h ownedHistory) Item(id string) (openai.ResponseItem, bool) {
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	ref, ok := st.items[storeKey{h.owner, id}]
	if !ok {
		return openai.ResponseItem{}, false
	}
	e := st.byID[storeKey{h.owner, ref.response}]
	st.touchLocked(e)
	return e.Value.(*storedResponse).output[ref.index].AsInput(), true
}

package programs

import (
	"context"
	"slices"
	"sync"
)

// Moving a program's KV to another pod: the pod the program leaves serves
// its cached context over the control port (control's KV transfer), which
// needs the context's token ids and cache salt after the program's entry
// is gone here (a placement routing it elsewhere deletes the entry). So
// the contexts of programs that moved away stay for a while: the newest
// maxMovedContexts of them.

// maxMovedContexts bounds the contexts kept for programs that moved away:
// each holds a context's token ids (4 bytes a token).
const maxMovedContexts = 256

// movedContexts keeps the last contexts of programs that moved away, oldest
// first out.
type movedContexts struct {
	byID  map[string]kvContext
	order []string
}

func (m *movedContexts) put(id string, c kvContext) {
	if len(c.tokens) == 0 {
		return
	}
	if m.byID == nil {
		m.byID = map[string]kvContext{}
	}
	if _, ok := m.byID[id]; !ok {
		m.order = append(m.order, id)
	}
	c.tokens = slices.Clone(c.tokens) // the entry may go on and reuse its slice
	m.byID[id] = c
	for len(m.order) > maxMovedContexts {
		delete(m.byID, m.order[0])
		m.order = m.order[1:]
	}
}

// KVContext is program id's last context on this pod, as its KV cache
// holds it: the cache salt of its requests and the token ids; ok is false
// for a program this pod has no context of (never ran here, or moved away
// long ago).
func (t *Table) KVContext(id string) (cacheSalt string, tokens []int32, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.progs[id]; e != nil && e.placed && len(e.tokens) > 0 {
		return e.salt, append([]int32(nil), e.tokens...), true
	}
	if c, found := t.moved.byID[id]; found {
		return c.salt, append([]int32(nil), c.tokens...), true
	}
	return "", nil, false
}

// fetchJob is a placement's Fetch of one program.
type fetchJob struct{ id, addr string }

// fetch starts Config.FetchKV for one program, bounded by FetchTimeout;
// when it is done the program's held requests run.
func (t *Table) fetch(f fetchJob) {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.FetchTimeout)
	var once sync.Once
	t.cfg.FetchKV(ctx, f.id, f.addr, func() {
		once.Do(func() {
			cancel()
			t.mu.Lock()
			defer t.mu.Unlock()
			if e := t.progs[f.id]; e != nil && e.fetching {
				e.fetching = false
				t.wakeLocked(e)
			}
		})
	})
}

package server

import (
	"container/heap"
	"container/list"

	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// storeBound names one of the response store's bounds.
type storeBound int

const (
	byEntries storeBound = iota // --responses-store-entries
	byBytes                     // --responses-store-bytes
)

// ownerShare is what one owner holds in the response store.
type ownerShare struct {
	owner programs.Owner
	lru   *list.List // of *storedResponse, most recently used first
	bytes int64
	slot  [2]int // index in responseStore.largest[bound]
}

func (o *ownerShare) holds(b storeBound) int64 {
	if b == byEntries {
		return int64(o.lru.Len())
	}
	return o.bytes
}

// oldest is when the owner's least recently used response was last used.
func (o *ownerShare) oldest() uint64 {
	if e := o.lru.Back(); e != nil {
		return e.Value.(*storedResponse).used
	}
	return 0
}

// ownerHeap ranks the owners holding responses by what they hold of one
// bound, most first; among equals, the one whose least recently used
// response is older first. Its top is the owner the store evicts from
// when that bound is exceeded. Every change to an owner's share (a
// response stored or removed, its oldest response used) is followed by
// fix, so an operation costs O(log owners), however many responses the
// store holds.
type ownerHeap struct {
	by     storeBound
	shares []*ownerShare
}

var _ heap.Interface = (*ownerHeap)(nil)

func (h *ownerHeap) Len() int { return len(h.shares) }

func (h *ownerHeap) Less(i, j int) bool {
	a, b := h.shares[i], h.shares[j]
	if ha, hb := a.holds(h.by), b.holds(h.by); ha != hb {
		return ha > hb
	}
	return a.oldest() < b.oldest()
}

func (h *ownerHeap) Swap(i, j int) {
	h.shares[i], h.shares[j] = h.shares[j], h.shares[i]
	h.shares[i].slot[h.by] = i
	h.shares[j].slot[h.by] = j
}

func (h *ownerHeap) Push(x any) {
	o := x.(*ownerShare)
	o.slot[h.by] = len(h.shares)
	h.shares = append(h.shares, o)
}

func (h *ownerHeap) Pop() any {
	n := len(h.shares) - 1
	o := h.shares[n]
	h.shares[n] = nil
	h.shares = h.shares[:n]
	return o
}

func (h *ownerHeap) push(o *ownerShare)   { heap.Push(h, o) }
func (h *ownerHeap) fix(o *ownerShare)    { heap.Fix(h, o.slot[h.by]) }
func (h *ownerHeap) remove(o *ownerShare) { heap.Remove(h, o.slot[h.by]) }
func (h *ownerHeap) top() *ownerShare     { return h.shares[0] }

package server

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

func storedTurn(id, parent, in, out string) *storedResponse {
	return &storedResponse{id: id, parent: parent, input: []openai.Message{{Role: "user", Content: openai.Content{Text: in}}},
		output: []openai.OutputItem{{Type: openai.ItemMessage, ID: "msg_" + id, Content: []openai.OutputText{{Type: "output_text", Text: out}}}},
		body:   []byte(`{"id":"` + id + `"}`)}
}

func conversationTexts(h openai.ResponseHistory, id string) ([]string, bool) {
	msgs, ok := h.Conversation(id)
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Role+":"+m.Content.Text)
	}
	return texts, ok
}

func TestResponseStoreChain(t *testing.T) {
	st := newResponseStore(10, 1<<20)
	st.put(storedTurn("r1", "", "q1", "a1"))
	st.put(storedTurn("r2", "r1", "q2", "a2"))
	got, ok := conversationTexts(st.history(""), "r2")
	if diff := cmp.Diff([]string{"user:q1", "assistant:a1", "user:q2", "assistant:a2"}, got); !ok || diff != "" {
		t.Errorf("conversation (-want +got):\n%s", diff)
	}
	if it, ok := st.history("").Item("msg_r1"); !ok || it.Role != "assistant" || it.Content.Text != "a1" {
		t.Errorf("item msg_r1: %+v %v", it, ok)
	}
	// A chain that lost a turn can no longer be continued.
	st.remove("", "r1")
	if _, ok := st.history("").Conversation("r2"); ok {
		t.Error("r2's chain resolved without r1")
	}
	// A client that reuses ids cannot make a walk loop.
	st.put(storedTurn("r1", "", "q1", "a1"))
	st.put(storedTurn("r1", "r2", "q3", "a3"))
	if _, ok := st.history("").Conversation("r1"); ok {
		t.Error("a cycle of reused ids resolved")
	}
}

func TestResponseStoreBounds(t *testing.T) {
	// By entries: the least recently used goes first.
	st := newResponseStore(3, 1<<20)
	st.put(storedTurn("r1", "", "q1", "a1"))
	st.put(storedTurn("r2", "r1", "q2", "a2"))
	st.put(storedTurn("x", "", "q", "a"))
	if _, ok := st.history("").Conversation("r2"); !ok { // uses r2, then r1: x is now the oldest
		t.Fatal("r2's chain missing")
	}
	st.put(storedTurn("y", "", "q", "a"))
	if _, ok := st.get("", "x"); ok {
		t.Error("x kept: the least recently used should have been evicted")
	}
	st.put(storedTurn("z", "", "q", "a"))
	if _, ok := st.history("").Conversation("r2"); ok { // r2 was the least recently used
		t.Error("r2 resolved after it was evicted")
	}
	if _, ok := st.history("").Item("msg_r2"); ok {
		t.Error("an evicted response's item is still found")
	}

	// By bytes: a response larger than the store is not kept; others are
	// evicted until the total fits.
	big := strings.Repeat("b", 600)
	st = newResponseStore(100, 1000)
	if st.put(storedTurn("huge", "", strings.Repeat("h", 2000), "")) {
		t.Error("a response over the byte limit was stored")
	}
	st.put(storedTurn("b1", "", big, "a"))
	st.put(storedTurn("b2", "", big, "a"))
	if _, ok := st.get("", "b1"); ok || st.bytes > 1000 {
		t.Errorf("b1 kept (%d bytes held, limit 1000)", st.bytes)
	}
	if _, ok := st.get("", "b2"); !ok {
		t.Error("b2 missing")
	}
	if !st.remove("", "b2") || st.bytes != 0 || st.entries != 0 || len(st.items) != 0 {
		t.Errorf("after removing the last response: %d bytes, %d entries, %d items", st.bytes, st.entries, len(st.items))
	}
}

// TestResponseStoreOwners: a response is found only under its owner, and
// the same ids under two owners are two responses.
func TestResponseStoreOwners(t *testing.T) {
	st := newResponseStore(10, 1<<20)
	own := func(owner programs.Owner, r *storedResponse) *storedResponse { r.owner = owner; return r }
	st.put(own("a", storedTurn("r1", "", "qa", "aa")))
	st.put(own("a", storedTurn("r2", "r1", "qa2", "aa2")))
	if _, ok := st.get("b", "r1"); ok {
		t.Error("b reads a's r1")
	}
	if _, ok := st.history("b").Conversation("r2"); ok {
		t.Error("b continues a's r2")
	}
	if _, ok := st.history("b").Item("msg_r1"); ok {
		t.Error("b refers to a's item msg_r1")
	}
	if st.remove("b", "r1") {
		t.Error("b deleted a's r1")
	}
	// b storing the same ids replaces nothing of a's.
	st.put(own("b", storedTurn("r1", "", "qb", "ab")))
	gotA, okA := conversationTexts(st.history("a"), "r2")
	gotB, okB := conversationTexts(st.history("b"), "r1")
	if diff := cmp.Diff([]string{"user:qa", "assistant:aa", "user:qa2", "assistant:aa2"}, gotA); !okA || diff != "" {
		t.Errorf("a's conversation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"user:qb", "assistant:ab"}, gotB); !okB || diff != "" {
		t.Errorf("b's conversation (-want +got):\n%s", diff)
	}
	if it, ok := st.history("a").Item("msg_r1"); !ok || it.Content.Text != "aa" {
		t.Errorf("a's item msg_r1: %+v %v", it, ok)
	}
	if !st.remove("b", "r1") {
		t.Error("b cannot delete its own r1")
	}
	if _, ok := st.get("a", "r1"); !ok {
		t.Error("b's delete removed a's r1")
	}
}

func ownedTurn(owner programs.Owner, id, in string) *storedResponse {
	r := storedTurn(id, "", in, "a")
	r.owner = owner
	return r
}

// TestResponseStoreShares: over a bound, the store evicts from the owner
// holding the most, so one owner's flood evicts its own responses and
// leaves another's smaller share alone.
func TestResponseStoreShares(t *testing.T) {
	has := func(st *responseStore, owner programs.Owner, ids ...string) []string {
		var missing []string
		for _, id := range ids {
			if _, ok := st.get(owner, id); !ok {
				missing = append(missing, string(owner)+"/"+id)
			}
		}
		return missing
	}

	t.Run("entries: a flood evicts its own", func(t *testing.T) {
		st := newResponseStore(5, 1<<20)
		st.put(ownedTurn("a", "a1", "q"))
		for i := range 20 {
			st.put(ownedTurn("b", fmt.Sprint("b", i), "q"))
		}
		if m := has(st, "a", "a1"); m != nil {
			t.Errorf("evicted by b's flood: %v", m)
		}
		if m := has(st, "b", "b16", "b17", "b18", "b19"); m != nil || st.entries != 5 {
			t.Errorf("b's newest missing: %v (%d entries held)", m, st.entries)
		}
	})

	t.Run("bytes: a flood evicts its own", func(t *testing.T) {
		st := newResponseStore(100, 2000)
		st.put(ownedTurn("a", "a1", strings.Repeat("a", 300)))
		for i := range 20 {
			st.put(ownedTurn("b", fmt.Sprint("b", i), strings.Repeat("b", 300)))
		}
		if m := has(st, "a", "a1"); m != nil || st.bytes > 2000 {
			t.Errorf("evicted by b's flood: %v (%d bytes held)", m, st.bytes)
		}
		if m := has(st, "b", "b19"); m != nil {
			t.Errorf("b's newest missing: %v", m)
		}
	})

	t.Run("equal shares: the least recently used of them", func(t *testing.T) {
		st := newResponseStore(4, 1<<20)
		for _, id := range []string{"1", "2"} {
			st.put(ownedTurn("a", "a"+id, "q"))
			st.put(ownedTurn("b", "b"+id, "q"))
		}
		st.get("a", "a1") // a's oldest is now a2, used after b1
		st.put(ownedTurn("c", "c1", "q"))
		if _, ok := st.get("b", "b1"); ok {
			t.Error("b1 kept: of a and b, holding two each, b1 was the least recently used")
		}
		if m := has(st, "a", "a1", "a2"); m != nil {
			t.Errorf("a lost %v", m)
		}
	})

	t.Run("a response that would evict itself is not kept", func(t *testing.T) {
		st := newResponseStore(100, 2000)
		if !st.put(ownedTurn("b", "b1", strings.Repeat("b", 800))) {
			t.Fatal("b1 not stored")
		}
		// a would hold more than b while the two are over the bound: a's
		// own response goes, not b's smaller one.
		if st.put(ownedTurn("a", "a1", strings.Repeat("a", 1000))) {
			t.Error("a1 reported stored")
		}
		if _, ok := st.get("a", "a1"); ok {
			t.Error("a1 kept over the bound")
		}
		if m := has(st, "b", "b1"); m != nil || len(st.owners) != 1 {
			t.Errorf("b lost %v; %d owners held", m, len(st.owners))
		}
	})
}

// TestResponseStoreRandomized drives the store with random puts, reads,
// chain walks and deletes of a few owners under both bounds, checking its
// bookkeeping after every operation and, while only the entries bound
// binds, that a put evicts another owner's response only when that owner
// held at least as many as the putting owner then did.
func TestResponseStoreRandomized(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxEntries int
		maxBytes   int64
		owners     int
	}{
		{"entries bound", 16, 1 << 30, 4},
		{"bytes bound", 1000, 6000, 4},
		{"both, many owners", 24, 8000, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.owners)))
			st := newResponseStore(tc.maxEntries, tc.maxBytes)
			owner := func() programs.Owner { return programs.Owner(fmt.Sprint("o", rng.IntN(tc.owners))) }
			id := func() string { return fmt.Sprint("r", rng.IntN(60)) }
			for step := range 5000 {
				o := owner()
				switch op := rng.IntN(10); {
				case op < 6:
					before := st.holdings()
					r := storedTurn(id(), id(), strings.Repeat("x", rng.IntN(700)), "a")
					r.owner = o
					_, reused := st.byID[storeKey{o, r.id}]
					st.put(r)
					if tc.maxBytes < 1<<30 || reused {
						break
					}
					after := st.holdings()
					for y, n := range before {
						if y != o && after[y] < n && n < before[o]+1 {
							t.Fatalf("step %d: %s (holding %d) evicted %s's response, which held %d", step, o, before[o]+1, y, n)
						}
					}
				case op < 8:
					st.get(o, id())
				case op < 9:
					st.history(o).Conversation(id())
				default:
					st.remove(o, id())
				}
				checkResponseStore(t, st)
			}
		})
	}
}

func (st *responseStore) holdings() map[programs.Owner]int {
	h := map[programs.Owner]int{}
	for o, share := range st.owners {
		h[o] = share.lru.Len()
	}
	return h
}

// checkResponseStore checks the store's invariants: its totals are the
// sums of its owners' shares and within the bounds, every owner listed
// holds something, each heap orders the owners, and every index names a
// stored response.
func checkResponseStore(t *testing.T, st *responseStore) {
	t.Helper()
	entries, bytes := 0, int64(0)
	for o, share := range st.owners {
		if share.owner != o || share.lru.Len() == 0 {
			t.Fatalf("owner %q: share of %q holding %d", o, share.owner, share.lru.Len())
		}
		var b int64
		used := ^uint64(0)
		for e := share.lru.Front(); e != nil; e = e.Next() {
			r := e.Value.(*storedResponse)
			if r.owner != o || st.byID[storeKey{o, r.id}] != e || r.used > used {
				t.Fatalf("owner %q: response %q misplaced", o, r.id)
			}
			used = r.used
			b += r.size
		}
		if b != share.bytes {
			t.Fatalf("owner %q: %d bytes counted, %d held", o, share.bytes, b)
		}
		entries += share.lru.Len()
		bytes += b
	}
	if entries != st.entries || entries != len(st.byID) || bytes != st.bytes {
		t.Fatalf("totals %d entries, %d bytes; owners hold %d, %d; %d ids", st.entries, st.bytes, entries, bytes, len(st.byID))
	}
	if st.entries > st.maxEntries || st.bytes > st.maxBytes {
		t.Fatalf("over the bounds: %d entries, %d bytes", st.entries, st.bytes)
	}
	for _, h := range st.largest {
		if h.Len() != len(st.owners) {
			t.Fatalf("heap %d ranks %d owners of %d", h.by, h.Len(), len(st.owners))
		}
		for i, share := range h.shares {
			if share.slot[h.by] != i || st.owners[share.owner] != share {
				t.Fatalf("heap %d: %q at %d, slot %d", h.by, share.owner, i, share.slot[h.by])
			}
			if i > 0 && h.Less(i, (i-1)/2) {
				t.Fatalf("heap %d: %q ranks above its parent", h.by, share.owner)
			}
		}
	}
	for k, ref := range st.items {
		e, ok := st.byID[storeKey{k.owner, ref.response}]
		if !ok || e.Value.(*storedResponse).output[ref.index].ID != k.id {
			t.Fatalf("item %q of %q names no stored response", k.id, k.owner)
		}
	}
}

// BenchmarkResponseStorePut: storing into a full store costs O(log owners),
// not O(responses): the owner to evict from is a heap's top, not found by
// a scan (about 0.5 µs with one owner, 1 µs with a thousand).
func BenchmarkResponseStorePut(b *testing.B) {
	for _, owners := range []int{1, 1000} {
		b.Run(fmt.Sprint("owners=", owners), func(b *testing.B) {
			st := newResponseStore(DefaultResponsesStoreEntries, DefaultResponsesStoreBytes)
			turns := make([]*storedResponse, 4096)
			for i := range turns {
				turns[i] = storedTurn(fmt.Sprint("r", i), "", "q", "a")
				turns[i].owner = programs.Owner(fmt.Sprint("o", i%owners))
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				st.put(turns[i%len(turns)])
			}
		})
	}
}

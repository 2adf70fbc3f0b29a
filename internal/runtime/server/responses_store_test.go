package server

import (
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
	if !st.remove("", "b2") || st.bytes != 0 || st.lru.Len() != 0 || len(st.items) != 0 {
		t.Errorf("after removing the last response: %d bytes, %d entries, %d items", st.bytes, st.lru.Len(), len(st.items))
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

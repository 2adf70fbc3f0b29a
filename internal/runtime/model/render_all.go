package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// DroppedError is a conversation whose message the template leaves out
// of the prompt even after RenderAll's mapping rules: the request is
// refused (400) rather than run without it.
type DroppedError struct {
	// Index is the message's position in the conversation as given.
	Index int
	Role  string
}

func (e *DroppedError) Error() string {
	return fmt.Sprintf("%v: messages[%d] (role %q) is not rendered by the model's chat template, and no mapping places it", ErrTemplate, e.Index, e.Role)
}

// Unwrap makes a DroppedError an ErrTemplate.
func (e *DroppedError) Unwrap() error { return ErrTemplate }

// RoleRenderer is a template that can say whether it treats a role as a
// role of its own. Templates that do not implement it are taken to know
// none beyond system, user, assistant and tool.
type RoleRenderer interface {
	RendersRole(role string) bool
}

// RenderAll renders c with t so that no instruction is lost: the text of
// every system, developer, user and tool message reaches the prompt.
// Templates written before a role existed drop it silently (Qwen2.5's
// renders no developer message; some render a system message only
// first), so the conversation is mapped by two rules, each documented for
// users (docs/api.md, "Roles a template does not render"):
//
//  1. A developer message is rendered as a system message where the
//     template has no developer role of its own (RoleRenderer).
//  2. A system message after the first message that the template still
//     leaves out is merged into the leading system message (created where
//     there is none), after its text and any merged before it, joined by
//     a blank line.
//
// A message still missing then is a *DroppedError naming it. Assistant
// messages are not checked: templates rewrite a model's own past turns
// (Qwen3 strips their reasoning). The check reads the prompt once when
// the template renders messages in order, as templates do.
func RenderAll(t ChatTemplate, c *Chat) (string, error) {
	msgs := c.Messages
	if developerAsSystem(t, msgs) {
		msgs = append([]Message(nil), msgs...)
		for i := range msgs {
			if msgs[i].Role == "developer" {
				msgs[i].Role = "system"
			}
		}
	}
	mapped := *c
	mapped.Messages = msgs
	text, err := t.Render(&mapped)
	if err != nil {
		return "", err
	}
	missing := droppedMessages(text, msgs)
	if len(missing) == 0 {
		return text, nil
	}
	merged, index, ok := mergeSystem(msgs, missing)
	if !ok {
		return "", &DroppedError{Index: missing[0], Role: c.Messages[missing[0]].Role}
	}
	mapped.Messages = merged
	if text, err = t.Render(&mapped); err != nil {
		return "", err
	}
	if still := droppedMessages(text, merged); len(still) > 0 {
		i := index[still[0]]
		return "", &DroppedError{Index: i, Role: c.Messages[i].Role}
	}
	return text, nil
}

// developerAsSystem reports whether rule 1 applies: msgs has a developer
// message and t has no developer role.
// The messages are looked at first: RendersRole reads the template's
// source, which most conversations (no developer message) need not.
func developerAsSystem(t ChatTemplate, msgs []Message) bool {
	for _, m := range msgs {
		if m.Role == "developer" {
			r, ok := t.(RoleRenderer)
			return !ok || !r.RendersRole("developer")
		}
	}
	return false
}

// mergeSystem applies rule 2 to the missing messages: it returns the
// conversation with them merged into the leading system message, and the
// original index of each of its messages. ok is false when a missing
// message is not a later system message (no rule places it).
func mergeSystem(msgs []Message, missing []int) (merged []Message, index []int, ok bool) {
	drop := make(map[int]bool, len(missing))
	for _, i := range missing {
		if i == 0 || msgs[i].Role != "system" {
			return nil, nil, false
		}
		drop[i] = true
	}
	var lead Message
	leadIndex := 0
	rest := msgs
	if msgs[0].Role == "system" {
		lead, rest = msgs[0], msgs[1:]
	} else {
		lead = Message{Role: "system"}
		leadIndex = missing[0]
	}
	parts := []string{}
	if lead.Content != "" {
		parts = append(parts, lead.Content)
	}
	for _, i := range missing {
		parts = append(parts, msgs[i].Content)
	}
	lead.Content = strings.Join(parts, "\n\n")
	lead.ContentNull = false
	merged = append(merged, lead)
	index = append(index, leadIndex)
	off := len(msgs) - len(rest)
	for k, m := range rest {
		if drop[off+k] {
			continue
		}
		merged = append(merged, m)
		index = append(index, off+k)
	}
	return merged, index, true
}

// droppedMessages are the indexes of the messages whose text is not in
// the prompt (see RenderAll for which are checked). Each is looked for
// from where the one before it was found, the order templates render in,
// and only when not found there, in the whole prompt (a template may move
// a system message: Mistral's puts it in the last user turn); either as
// written (trimmed, as templates often trim) or as tojson writes it
// (Llama 3.1 renders tool results so).
func droppedMessages(prompt string, msgs []Message) []int {
	var missing []int
	at := 0
	for i, m := range msgs {
		text := strings.TrimSpace(m.Content)
		if m.Role == "assistant" || text == "" {
			continue
		}
		if k := indexAny(prompt[at:], text); k >= 0 {
			at += k
			continue
		}
		if indexAny(prompt, text) < 0 {
			missing = append(missing, i)
		}
	}
	return missing
}

// indexAny is the first index in s of text as written or JSON-escaped
// as Jinja's tojson escapes it (without its quotes, < > & kept), or -1.
func indexAny(s, text string) int {
	if k := strings.Index(s, text); k >= 0 {
		return k
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(text) != nil {
		return -1
	}
	esc := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	esc = esc[1 : len(esc)-1]
	if string(esc) == text {
		return -1
	}
	return strings.Index(s, string(esc))
}

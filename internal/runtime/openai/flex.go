package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"

	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
)

// Prompt is a completion prompt: a string or token ids, or a batch of
// them (a list of strings or of token id lists). A batch of one is that
// prompt.
type Prompt struct {
	Text   string
	Tokens []int32
	// IsTokens is set when the prompt came as token ids.
	IsTokens bool
	// Batch holds the prompts of a batch of two or more (Text and Tokens
	// are then unset).
	Batch []Prompt
	set   bool
}

// MaxBatchedPrompts bounds a batch of prompts.
const MaxBatchedPrompts = 256

// All returns the prompts: the batch, or the one prompt.
func (p *Prompt) All() []Prompt {
	if p.Batch != nil {
		return p.Batch
	}
	return []Prompt{*p}
}

// Set reports whether the prompt was present and not null.
func (p *Prompt) Set() bool { return p.set }

// UnmarshalJSON implements json.Unmarshaler.
func (p *Prompt) UnmarshalJSON(b []byte) error { return p.unmarshal(b, true) }

func (p *Prompt) unmarshal(b []byte, outer bool) error {
	b = bytes.TrimSpace(b)
	*p = Prompt{}
	if isNull(b) {
		return nil
	}
	p.set = true
	if len(b) > 0 && b[0] == '"' {
		return unmarshalField(b, &p.Text, "prompt", "a string or an array of token ids")
	}
	if len(b) == 0 || b[0] != '[' {
		return BadRequest("prompt", "prompt must be a string or an array of token ids")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return BadRequest("prompt", "prompt must be a string or an array of token ids")
	}
	if len(items) == 0 {
		p.IsTokens = true
		return nil
	}
	first := bytes.TrimSpace(items[0])
	switch {
	case len(first) > 0 && (first[0] == '"' || first[0] == '['):
		if !outer {
			return BadRequest("prompt", "prompt must be a string or an array of token ids")
		}
		if len(items) == 1 {
			return p.unmarshal(first, false)
		}
		if len(items) > MaxBatchedPrompts {
			return BadRequest("prompt", "%d batched prompts; at most %d", len(items), MaxBatchedPrompts)
		}
		batch := make([]Prompt, len(items))
		for i, it := range items {
			if err := batch[i].unmarshal(it, false); err != nil {
				return err
			}
			if !batch[i].set {
				return BadRequest("prompt", "prompt[%d] is null", i)
			}
		}
		p.Batch = batch
		return nil
	}
	p.IsTokens = true
	p.Tokens = make([]int32, len(items))
	for i, it := range items {
		if isNull(bytes.TrimSpace(it)) {
			return BadRequest("prompt", "prompt token %d is null; want an integer token id", i)
		}
		var v int32
		if err := json.Unmarshal(it, &v); err != nil {
			return BadRequest("prompt", "prompt token %d: want an integer token id, got %s", i, clip(it))
		}
		p.Tokens[i] = v
	}
	return nil
}

// StopList is "stop": a string or a list of strings.
type StopList []string

// UnmarshalJSON implements json.Unmarshaler.
func (s *StopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*s = nil
	if isNull(b) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := unmarshalField(b, &one, "stop", "a string or an array of strings"); err != nil {
			return err
		}
		*s = StopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return BadRequest("stop", "stop must be a string or an array of strings")
	}
	*s = many
	return nil
}

// PriorityField is our "priority" extension: "high", "normal" or "low", or
// an integer mapped onto those three levels: 0 and below high, 1 normal, 2
// and above low (vLLM's convention, lower runs first; 0, 1 and 2 are also
// the engine's own levels).
type PriorityField struct {
	Value engine.Priority
	Set   bool
}

// Priority is the requested priority, normal when absent.
func (p PriorityField) Priority() engine.Priority {
	if !p.Set {
		return engine.PriorityNormal
	}
	return p.Value
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *PriorityField) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*p = PriorityField{Value: engine.PriorityNormal}
	if isNull(b) {
		return nil
	}
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return BadRequest("priority", "priority must be \"high\", \"normal\" or \"low\"")
		}
		v, err := engine.ParsePriority(strings.TrimSpace(s))
		if err != nil {
			return BadRequest("priority", "priority must be \"high\", \"normal\" or \"low\", got %q", s)
		}
		*p = PriorityField{Value: v, Set: true}
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return BadRequest("priority", "priority must be \"high\", \"normal\" or \"low\", or an integer, got %s", clip(b))
	}
	*p = PriorityField{Value: engine.Priority(max(int64(engine.PriorityHigh), min(n, int64(engine.PriorityLow)))), Set: true}
	return nil
}

// Content is a chat message's content: a string, null, or a list of parts
// of which only text parts are supported; they are joined with "\n", as
// vLLM joins them for templates that take string content.
type Content struct {
	Text string
	// Null: the content was null (absent content is left zero, and is
	// null too for templates when Text is empty).
	Null bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*c = Content{}
	if isNull(b) {
		c.Null = true
		return nil
	}
	text, err := textContent(b, "messages", "text")
	c.Text = text
	return err
}

// textContent reads a content that is a string or a list of text parts
// of the given types, joined with "\n" (as vLLM joins them); any other
// part is a 400 naming param.
func textContent(b []byte, param string, types ...string) (string, error) {
	if len(b) > 0 && b[0] == '"' {
		var s string
		return s, unmarshalField(b, &s, param, "a string or an array of content parts")
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return "", BadRequest(param, "content must be a string or an array of content parts")
	}
	texts := make([]string, 0, len(parts))
	for i, p := range parts {
		if !slices.Contains(types, p.Type) || p.Text == nil {
			return "", BadRequest(param, "content part %d: only text parts (%s) with text are supported, got type %q", i, strings.Join(types, ", "), p.Type)
		}
		texts = append(texts, *p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

func isNull(b []byte) bool { return string(b) == "null" }

func unmarshalField(b []byte, dst any, param, want string) error {
	if err := json.Unmarshal(b, dst); err != nil {
		return BadRequest(param, "%s must be %s", param, want)
	}
	return nil
}

// clip shortens raw JSON for an error message.
func clip(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// Lists whose elements Go's decoder would read from null as zero values
// (token 0, the string "", a bias of 0) refuse a null element instead, as
// a type error: the request's parser names the field.

// TokenIDs is a list of token ids (stop_token_ids, allowed_token_ids,
// /detokenize's tokens).
type TokenIDs []int32

// UnmarshalJSON implements json.Unmarshaler.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	ids, err := listWithoutNulls[int32](b)
	*t = ids
	return err
}

// listWithoutNulls decodes a JSON list (null: a nil list) whose elements
// may not be null.
func listWithoutNulls[T any](b []byte) ([]T, error) {
	var ps []*T
	if err := json.Unmarshal(b, &ps); err != nil {
		return nil, retypeError(err)
	}
	if ps == nil {
		return nil, nil
	}
	out := make([]T, len(ps))
	for i, p := range ps {
		if p == nil {
			return nil, nullElement[T]()
		}
		out[i] = *p
	}
	return out, nil
}

// Strings is a list of strings (guided_choice).
type Strings []string

// UnmarshalJSON implements json.Unmarshaler.
func (s *Strings) UnmarshalJSON(b []byte) error {
	ps, err := listWithoutNulls[string](b)
	*s = ps
	return err
}

// LogitBias is logit_bias: a token id (in decimal) → its bias.
type LogitBias map[string]float64

// UnmarshalJSON implements json.Unmarshaler.
func (l *LogitBias) UnmarshalJSON(b []byte) error {
	var m map[string]*float64
	if err := json.Unmarshal(b, &m); err != nil {
		return retypeError(err)
	}
	if m == nil {
		*l = nil
		return nil
	}
	out := make(LogitBias, len(m))
	for k, v := range m {
		if v == nil {
			return nullElement[float64]()
		}
		out[k] = *v
	}
	*l = out
	return nil
}

// nullElement is the type error of a null where a T belongs; the decoder
// adds the field's path.
func nullElement[T any]() error {
	return &json.UnmarshalTypeError{Value: "null", Type: reflect.TypeFor[T]()}
}

// retypeError drops what a type error of an inner decode says about its
// place (an offset into the element, a field path within it): the decoder
// of the whole body adds the field's path itself.
func retypeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &json.UnmarshalTypeError{Value: te.Value, Type: te.Type}
	}
	return err
}

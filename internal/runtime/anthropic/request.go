// Package anthropic is the runtime's Anthropic Messages API (POST
// /v1/messages), as vLLM, llama.cpp's server and ollama serve it for
// Claude Code and the Anthropic SDKs: its request is translated into an
// OpenAI chat request, which the server runs on its one chat path
// (template, tool calling, constraints, sampling, engine), and the reply
// is written back in Anthropic's shape (MessageShape), errors too.
package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// Request is the body of POST /v1/messages.
type Request struct {
	Model string `json:"model"`
	// MaxTokens is required, as Anthropic requires it.
	MaxTokens     *int        `json:"max_tokens"`
	Messages      []Message   `json:"messages"`
	System        Blocks      `json:"system"`
	StopSequences []string    `json:"stop_sequences"`
	Stream        bool        `json:"stream"`
	Temperature   *float64    `json:"temperature"`
	TopP          *float64    `json:"top_p"`
	TopK          *int        `json:"top_k"`
	Tools         []Tool      `json:"tools"`
	ToolChoice    *ToolChoice `json:"tool_choice"`
	// Metadata is accepted (user_id identifies the end user to Anthropic;
	// it changes nothing here).
	Metadata *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`

	// Refused unless they ask for nothing (Parse).
	Thinking    *Thinking       `json:"thinking"`
	ServiceTier string          `json:"service_tier"`
	Container   json.RawMessage `json:"container"`
	MCPServers  json.RawMessage `json:"mcp_servers"`

	// Extensions, as on the other endpoints (cache_salt as on chat: a
	// non-empty string that keeps the request's prefix-cache entries
	// apart from other salts').
	ProgramID openai.ProgramIDText `json:"program_id"`
	CacheSalt *string              `json:"cache_salt"`
	ExtraBody *openai.ExtraBody    `json:"extra_body"`
}

// Thinking is "thinking": only {"type": "disabled"} is accepted.
type Thinking struct {
	Type string `json:"type"`
}

// Message is one turn: role user or assistant.
type Message struct {
	Role    string `json:"role"`
	Content Blocks `json:"content"`
}

// Blocks is a content: a string (one text block) or a list of blocks.
type Blocks []Block

// UnmarshalJSON implements json.Unmarshaler.
func (bs *Blocks) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*bs = nil
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return openai.BadRequest("messages", "content must be a string or an array of content blocks")
		}
		*bs = Blocks{{Type: "text", Text: s}}
		return nil
	}
	var list []Block
	if err := json.Unmarshal(b, &list); err != nil {
		if e, ok := err.(*openai.Error); ok {
			return e
		}
		return openai.BadRequest("messages", "content must be a string or an array of content blocks: %v", err)
	}
	*bs = list
	return nil
}

// Block is one content block: text, tool_use (an assistant's call) or
// tool_result (a user turn's answer to one). cache_control is accepted
// (prefix caching is automatic here).
type Block struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// tool_use.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result.
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   Blocks `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
}

// Tool is a client tool: name, description, input_schema. Anthropic's
// server tools (a versioned type such as web_search_20250305) are refused.
type Tool struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolChoice is "tool_choice": auto, any, tool (with name) or none.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// toolName is Anthropic's rule for tool names.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// Parse parses and validates a Messages request body. Its errors are
// OpenAI-shaped (*openai.Error); the server writes them in Anthropic's
// shape (ErrorBody).
func Parse(body []byte) (*Request, *openai.Error) { return parse(body, false) }

func parse(body []byte, count bool) (*Request, *openai.Error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, openai.BadRequest("", "request body must be a JSON object")
	}
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		var apiErr *openai.Error
		var typeErr *json.UnmarshalTypeError
		switch {
		case asError(err, &apiErr):
			return nil, apiErr
		case asError(err, &typeErr):
			return nil, openai.BadRequest(typeErr.Field, "%s: wrong type (got %s)", typeErr.Field, typeErr.Value)
		}
		return nil, openai.BadRequest("", "invalid JSON: %v", err)
	}
	if count && r.MaxTokens == nil {
		one := 1
		r.MaxTokens = &one
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// ParseCountTokens parses a POST /v1/messages/count_tokens body: a
// Messages request without max_tokens (the count does not depend on it).
func ParseCountTokens(body []byte) (*Request, *openai.Error) { return parse(body, true) }

func asError[T error](err error, target *T) bool {
	t, ok := err.(T)
	if ok {
		*target = t
	}
	return ok
}

func (r *Request) validate() *openai.Error {
	switch {
	case r.MaxTokens == nil:
		return openai.BadRequest("max_tokens", "max_tokens: field required")
	case *r.MaxTokens < 1:
		return openai.BadRequest("max_tokens", "max_tokens: must be at least 1, got %d", *r.MaxTokens)
	case len(r.Messages) == 0:
		return openai.BadRequest("messages", "messages: at least one message is required")
	case r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 1):
		return openai.BadRequest("temperature", "temperature: must be in [0, 1], got %g", *r.Temperature)
	case r.TopK != nil && *r.TopK < 1:
		return openai.BadRequest("top_k", "top_k: must be at least 1, got %d", *r.TopK)
	case r.Thinking != nil && r.Thinking.Type != "disabled":
		return openai.BadRequest("thinking", "thinking %q is not supported; only {\"type\": \"disabled\"}", r.Thinking.Type)
	case r.ServiceTier != "" && r.ServiceTier != "auto" && r.ServiceTier != "standard_only":
		return openai.BadRequest("service_tier", "service_tier %q is not supported", r.ServiceTier)
	case len(bytes.TrimSpace(r.Container)) > 0 && string(bytes.TrimSpace(r.Container)) != "null":
		return openai.BadRequest("container", "containers are not supported")
	case len(bytes.TrimSpace(r.MCPServers)) > 0 && string(bytes.TrimSpace(r.MCPServers)) != "null":
		return openai.BadRequest("mcp_servers", "MCP servers are not supported")
	}
	for i, s := range r.StopSequences {
		if s == "" {
			return openai.BadRequest("stop_sequences", "stop_sequences[%d] is empty", i)
		}
	}
	for i, b := range r.System {
		if b.Type != "text" {
			return openai.BadRequest("system", "system[%d].type %q: only text blocks", i, b.Type)
		}
	}
	for i, t := range r.Tools {
		switch {
		case t.Type != "" && t.Type != "custom":
			return openai.BadRequest("tools", "tools[%d].type %q: server tools are not supported, only client tools", i, t.Type)
		case !toolName.MatchString(t.Name):
			return openai.BadRequest("tools", "tools[%d].name %q: want 1 to 128 letters, digits, '_' or '-'", i, t.Name)
		case len(bytes.TrimSpace(t.InputSchema)) == 0 || bytes.TrimSpace(t.InputSchema)[0] != '{':
			return openai.BadRequest("tools", "tools[%d].input_schema: a JSON schema object is required", i)
		}
	}
	if c := r.ToolChoice; c != nil {
		switch c.Type {
		case "auto", "any", "none":
		case "tool":
			if c.Name == "" {
				return openai.BadRequest("tool_choice", "tool_choice.name is required with type tool")
			}
		default:
			return openai.BadRequest("tool_choice", "tool_choice.type %q: want auto, any, tool or none", c.Type)
		}
	}
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return openai.BadRequest("messages", "messages[%d].role %q: want user or assistant", i, m.Role)
		}
		for k, b := range m.Content {
			if err := checkBlock(m.Role, b, fmt.Sprintf("messages[%d].content[%d]", i, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkBlock(role string, b Block, where string) *openai.Error {
	switch {
	case b.Type == "text":
	case b.Type == "tool_use" && role == "assistant":
		if b.ID == "" || b.Name == "" {
			return openai.BadRequest("messages", "%s: a tool_use block needs id and name", where)
		}
	case b.Type == "tool_result" && role == "user":
		if b.ToolUseID == "" {
			return openai.BadRequest("messages", "%s: a tool_result block needs tool_use_id", where)
		}
		for k, c := range b.Content {
			if c.Type != "text" {
				return openai.BadRequest("messages", "%s.content[%d].type %q: only text in tool results", where, k, c.Type)
			}
		}
	default:
		return openai.BadRequest("messages", "%s.type %q is not supported in a %s turn (text, tool_use in assistant turns, tool_result in user turns)", where, b.Type, role)
	}
	return nil
}

// ChatRequest translates the request into an OpenAI chat request: the
// system prompt as the system message; a user turn's tool_result blocks
// as tool messages (first, in order) and its text as a user message; an
// assistant turn's text and tool_use blocks as one assistant message with
// tool calls; tools, tool_choice, stop_sequences and sampling as their
// chat equivalents. Text blocks of one turn are joined with "\n".
func (r *Request) ChatRequest() (*openai.ChatRequest, *openai.Error) {
	c := &openai.ChatRequest{Common: openai.Common{
		Model: r.Model, MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK,
		Stop: r.StopSequences, Stream: r.Stream, ProgramID: r.ProgramID, CacheSalt: r.CacheSalt, ExtraBody: r.ExtraBody,
	}}
	if sys := joinText(r.System); sys != "" {
		c.Messages = append(c.Messages, openai.Message{Role: "system", Content: openai.Content{Text: sys}})
	}
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			msg := openai.Message{Role: "assistant", Content: openai.Content{Text: joinText(m.Content)}}
			for _, b := range m.Content {
				if b.Type != "tool_use" {
					continue
				}
				args := "{}"
				if in := bytes.TrimSpace(b.Input); len(in) > 0 && string(in) != "null" {
					args = string(in)
				}
				msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: b.ID, Type: "function",
					Function: openai.ToolCallFunction{Name: b.Name, Arguments: args}})
			}
			c.Messages = append(c.Messages, msg)
			continue
		}
		for _, b := range m.Content {
			if b.Type != "tool_result" {
				continue
			}
			text := joinText(b.Content)
			if b.IsError {
				// Chat templates have no error flag: the result says it.
				text = "Error: " + text
			}
			c.Messages = append(c.Messages, openai.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: openai.Content{Text: text}})
		}
		hasText := false
		for _, b := range m.Content {
			hasText = hasText || b.Type == "text"
		}
		if hasText || len(m.Content) == 0 {
			c.Messages = append(c.Messages, openai.Message{Role: "user", Content: openai.Content{Text: joinText(m.Content)}})
		}
	}
	for i, t := range r.Tools {
		fn := openai.FunctionDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}
		raw, err := json.Marshal(map[string]any{"type": "function", "function": fn})
		if err != nil {
			return nil, openai.BadRequest("tools", "tools[%d]: %v", i, err)
		}
		c.Tools = append(c.Tools, openai.Tool{Type: "function", Function: &fn, Raw: raw})
	}
	// auto and none without tools ask for what no tool_choice does.
	if tc := r.ToolChoice; tc != nil && !(len(r.Tools) == 0 && (tc.Type == "auto" || tc.Type == "none")) {
		var choice any
		switch tc.Type {
		case "auto", "none":
			choice = tc.Type
		case "any":
			choice = "required"
		case "tool":
			choice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		}
		c.ToolChoice, _ = json.Marshal(choice)
		if tc.DisableParallelToolUse {
			no := false
			c.ParallelToolCalls = &no
		}
	}
	if err := c.Validate(); err != nil {
		if err.Param == "stop" {
			err.Param = "stop_sequences"
		}
		return nil, err
	}
	return c, nil
}

func joinText(bs Blocks) string {
	var texts []string
	for _, b := range bs {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

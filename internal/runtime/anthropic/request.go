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
	"reflect"
	"regexp"
	"strings"
	"unicode"

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
	// OutputFormat (the structured-outputs beta's spelling) and
	// OutputConfig.Format constrain the reply to a JSON schema, as chat's
	// response_format json_schema does; give one of them.
	OutputFormat *OutputFormat `json:"output_format"`
	OutputConfig *OutputConfig `json:"output_config"`
	// Thinking is honoured: a model that does not reason thinks zero
	// tokens, which every budget allows, and the reply has no thinking
	// blocks; a model that does (chatformat reads its reasoning) returns
	// it as a thinking block. Disabled reaches the template as
	// enable_thinking false (templateKwargs), which Qwen3's, GLM's and
	// DeepSeek's templates obey. budget_tokens caps <think> reasoning:
	// past it, the reasoning is closed for the model (thinkingBudget in
	// the server), unless the output is otherwise constrained.
	Thinking *Thinking `json:"thinking"`
	// ContextManagement is honoured for the edits that leave this
	// server's prompt as it is (ContextManagement.validate); the others
	// are refused.
	ContextManagement *ContextManagement `json:"context_management"`

	// Refused unless they ask for nothing (Parse). Fields Anthropic does
	// not define are ignored, as on chat.
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

// OutputFormat is a structured-output format: {"type": "json_schema",
// "schema": {…}}, the only type Anthropic defines.
type OutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// OutputConfig is "output_config": format, and effort (low, medium,
// high, xhigh or max), which reaches the template as reasoning_effort
// (templateKwargs); a template without one renders the same prompt.
type OutputConfig struct {
	Format *OutputFormat `json:"format"`
	Effort *string       `json:"effort"`
}

// efforts are output_config.effort's values, each with the
// reasoning_effort a template gets: chat templates that read it (gpt-oss)
// know low, medium and high.
var efforts = map[string]string{"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}

// Thinking is "thinking": {"type": "enabled", "budget_tokens": N},
// {"type": "adaptive"} or {"type": "disabled"}; display (summarized or
// omitted) says how thinking blocks are shown.
type Thinking struct {
	Type         string  `json:"type"`
	BudgetTokens *int    `json:"budget_tokens"`
	Display      *string `json:"display"`
}

// OmitsThinking reports whether thinking blocks come without their text
// (thinking.display omitted).
func (r *Request) OmitsThinking() bool {
	return r.Thinking != nil && r.Thinking.Display != nil && *r.Thinking.Display == "omitted"
}

// minThinkingBudget is Anthropic's smallest budget_tokens.
const minThinkingBudget = 1024

func (t *Thinking) validate() *openai.Error {
	switch t.Type {
	case "enabled":
		switch {
		case t.BudgetTokens == nil:
			return openai.BadRequest("thinking.budget_tokens", "thinking.budget_tokens: field required with type enabled")
		case *t.BudgetTokens < minThinkingBudget:
			return openai.BadRequest("thinking.budget_tokens", "thinking.budget_tokens: must be at least %d, got %d", minThinkingBudget, *t.BudgetTokens)
		}
	case "adaptive", "disabled":
		if t.BudgetTokens != nil {
			return openai.BadRequest("thinking.budget_tokens", "thinking.budget_tokens is only for type enabled")
		}
	default:
		return openai.BadRequest("thinking.type", "thinking.type %q: want enabled, adaptive or disabled", t.Type)
	}
	if d := t.Display; d != nil && *d != "summarized" && *d != "omitted" {
		return openai.BadRequest("thinking.display", "thinking.display %q: want summarized or omitted", *d)
	}
	return nil
}

// ContextManagement is "context_management": edits Anthropic applies to
// the conversation before the model reads it.
type ContextManagement struct {
	Edits []ContextEdit `json:"edits"`
}

// ContextEdit is one edit. clear_thinking_20251015 clears the thinking
// blocks of earlier turns: keep ("all", or {"type": "thinking_turns",
// "value": N}, default 1) says how many of the last assistant turns keep
// theirs (ChatRequest leaves the others' reasoning out).
// clear_tool_uses_20250919 would replace old tool results and is refused:
// the server does not edit tool results.
type ContextEdit struct {
	Type string          `json:"type"`
	Keep json.RawMessage `json:"keep"`
}

func (c *ContextManagement) validate() *openai.Error {
	for i, e := range c.Edits {
		if e.Type != "clear_thinking_20251015" {
			field := fmt.Sprintf("context_management.edits[%d].type", i)
			return openai.BadRequest(field, "%s %q is not supported: the server does not edit the conversation (only clear_thinking_20251015)", field, e.Type)
		}
		if _, ok := e.keepTurns(); !ok {
			field := fmt.Sprintf("context_management.edits[%d].keep", i)
			return openai.BadRequest(field, "%s: want \"all\" or {\"type\": \"thinking_turns\", \"value\": N} with N >= 0", field)
		}
	}
	return nil
}

// keepTurns is how many of the last assistant turns keep their thinking
// (-1: all).
func (e ContextEdit) keepTurns() (int, bool) {
	k := bytes.TrimSpace(e.Keep)
	if len(k) == 0 || string(k) == "null" {
		return 1, true
	}
	if string(k) == `"all"` {
		return -1, true
	}
	var v struct {
		Type  string `json:"type"`
		Value *int   `json:"value"`
	}
	if json.Unmarshal(k, &v) != nil || v.Type != "thinking_turns" || v.Value == nil || *v.Value < 0 {
		return 0, false
	}
	return *v.Value, true
}

// thinkingTurns is how many of the last assistant turns keep their
// thinking (-1: all, the default without a clear_thinking edit).
func (r *Request) thinkingTurns() int {
	keep := -1
	if r.ContextManagement != nil {
		for _, e := range r.ContextManagement.Edits {
			if n, ok := e.keepTurns(); ok && e.Type == "clear_thinking_20251015" && (keep < 0 || n < keep) {
				keep = n
			}
		}
	}
	return keep
}

// Message is one turn: role user or assistant.
type Message struct {
	Role    string `json:"role"`
	Content Blocks `json:"content"`
}

// Blocks is a content: a string (one text block) or a list of blocks.
// null reads as no content; another kind of value is a type error, which
// the decoder names by its path (system, messages[1].content).
type Blocks []Block

// UnmarshalJSON implements json.Unmarshaler.
func (bs *Blocks) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*bs = nil
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return openai.BadRequest("messages", "content must be a string or an array of content blocks")
		}
		*bs = Blocks{{Type: "text", Text: s, hasText: true}}
		return nil
	case len(b) == 0 || b[0] != '[':
		kind := "number"
		if len(b) > 0 {
			kind = map[byte]string{'{': "object", 't': "bool", 'f': "bool", '-': "number"}[b[0]]
		}
		if kind == "" {
			kind = "number"
		}
		return &json.UnmarshalTypeError{Value: kind, Type: reflect.TypeFor[Blocks]()}
	}
	var list []Block
	if err := json.Unmarshal(b, &list); err != nil {
		return err // a type error in a block: the decoder puts its path before the block's field
	}
	*bs = list
	return nil
}

// JSONKinds implements openai.JSONKinds.
func (Blocks) JSONKinds() string { return "a string or an array of content blocks" }

var _ openai.JSONKinds = Blocks(nil)

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
	// thinking (Thinking, Signature) and redacted_thinking (Data), as
	// a reply returned them.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`

	// hasText is whether the block had a string text (an empty one
	// included): a text block needs one.
	hasText bool
}

// UnmarshalJSON implements json.Unmarshaler, noting whether text was
// there (a text block without one is refused, an empty one is kept).
func (b *Block) UnmarshalJSON(data []byte) error {
	// Fields is Block without this method; upper case, as a Go name the
	// decoder's type errors put in their path, which openai.Decode drops.
	type Fields Block
	var v struct {
		Fields
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*b = Block(v.Fields)
	if v.Text != nil {
		b.Text, b.hasText = *v.Text, true
	}
	return nil
}

// checkText refuses a text block without a string text; where is the
// block's path.
func checkText(b Block, where string) *openai.Error {
	if b.Type == "text" && !b.hasText {
		field := where + ".text"
		return openai.BadRequest(field, "%s: field required (a string) in a text block", field)
	}
	return nil
}

// Tool is a client tool: name, description, input_schema. Anthropic's
// server tools (a versioned type such as web_search_20250305) are refused,
// and so is strict: true (calls are held to their schema only when
// tool_choice forces them, and then leniently).
type Tool struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      *bool           `json:"strict,omitempty"`
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
	var r Request
	if err := openai.Decode(body, &r); err != nil {
		return nil, err
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
	case r.ServiceTier != "" && r.ServiceTier != "auto" && r.ServiceTier != "standard_only":
		return openai.BadRequest("service_tier", "service_tier %q is not supported", r.ServiceTier)
	case !absent(r.Container):
		return openai.BadRequest("container", "containers are not supported")
	case !absent(r.MCPServers):
		return openai.BadRequest("mcp_servers", "MCP servers are not supported")
	}
	if r.Thinking != nil {
		if err := r.Thinking.validate(); err != nil {
			return err
		}
	}
	if r.ContextManagement != nil {
		if err := r.ContextManagement.validate(); err != nil {
			return err
		}
	}
	if oc := r.OutputConfig; oc != nil && oc.Effort != nil {
		if _, ok := efforts[*oc.Effort]; !ok {
			return openai.BadRequest("output_config.effort", "output_config.effort %q: want low, medium, high, xhigh or max", *oc.Effort)
		}
	}
	if _, _, err := r.outputFormat(); err != nil {
		return err
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
		if err := checkText(b, fmt.Sprintf("system[%d]", i)); err != nil {
			return err
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
		case t.Strict != nil && *t.Strict:
			field := fmt.Sprintf("tools[%d].strict", i)
			return openai.BadRequest(field, "%s: strict tool use is not supported (calls are held to their schema only when tool_choice forces them)", field)
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
		if m.Content == nil {
			field := fmt.Sprintf("messages[%d].content", i)
			return openai.BadRequest(field, "%s: field required (a string or an array of content blocks)", field)
		}
		switch {
		case m.Role == "system":
			// Claude Code's environment block: a system turn at its
			// place in the conversation (text only, as the system field).
			for k, b := range m.Content {
				if b.Type != "text" {
					field := fmt.Sprintf("messages[%d].content[%d].type", i, k)
					return openai.BadRequest(field, "%s %q: a system message holds text blocks only", field, b.Type)
				}
				if err := checkText(b, fmt.Sprintf("messages[%d].content[%d]", i, k)); err != nil {
					return err
				}
			}
			continue
		case m.Role != "user" && m.Role != "assistant":
			return openai.BadRequest("messages", "messages[%d].role %q: want user, assistant or system", i, m.Role)
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
		return checkText(b, where)
	case b.Type == "tool_use" && role == "assistant":
		if b.ID == "" || b.Name == "" {
			return openai.BadRequest("messages", "%s: a tool_use block needs id and name", where)
		}
		if in := bytes.TrimSpace(b.Input); len(in) == 0 || in[0] != '{' {
			field := where + ".input"
			return openai.BadRequest(field, "%s: a JSON object is required (the call's arguments)", field)
		}
	case (b.Type == "thinking" || b.Type == "redacted_thinking") && role == "assistant":
		// The reasoning of a past reply: rendered as the turn's
		// reasoning_content (a redacted one has no text to render).
	case b.Type == "tool_result" && role == "user":
		if b.ToolUseID == "" {
			return openai.BadRequest("messages", "%s: a tool_result block needs tool_use_id", where)
		}
		for k, c := range b.Content {
			if c.Type != "text" {
				return openai.BadRequest("messages", "%s.content[%d].type %q: only text in tool results", where, k, c.Type)
			}
			if err := checkText(c, fmt.Sprintf("%s.content[%d]", where, k)); err != nil {
				return err
			}
		}
	default:
		return openai.BadRequest("messages", "%s.type %q is not supported in a %s turn (text, tool_use and thinking in assistant turns, tool_result in user turns)", where, b.Type, role)
	}
	return nil
}

// ChatRequest translates the request into an OpenAI chat request: the
// system prompt as the system message; a user turn's tool_result blocks
// as tool messages (first, in order) and its text as a user message; an
// assistant turn's text and tool_use blocks as one assistant message with
// tool calls; tools, tool_choice, stop_sequences, the output format and
// sampling as their chat equivalents. Text blocks of one turn are joined
// with "\n". A final assistant turn is a prefill: the reply continues its
// text (continue_final_message), and is that continuation alone.
func (r *Request) ChatRequest() (*openai.ChatRequest, *openai.Error) {
	c := &openai.ChatRequest{Common: openai.Common{
		Model: r.Model, MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK,
		Stop: r.StopSequences, Stream: r.Stream, ProgramID: r.ProgramID, CacheSalt: r.CacheSalt, ExtraBody: r.ExtraBody,
	}}
	if sys := joinText(systemBlocks(r.System)); sys != "" {
		c.Messages = append(c.Messages, openai.Message{Role: "system", Content: openai.Content{Text: sys}})
	}
	c.ChatTemplateKwargs = r.templateKwargs()
	if t := r.Thinking; t != nil && t.Type == "enabled" && t.BudgetTokens != nil {
		c.ThinkingBudget = *t.BudgetTokens
	}
	msgs, prefill, err := r.prefill()
	if err != nil {
		return nil, err
	}
	// results name each tool message as the block it came from.
	results := map[int]string{}
	answered := false // an assistant turn came before
	keep := r.thinkingTurns()
	later := 0 // assistant turns after the current one
	for _, m := range msgs {
		if m.Role == "assistant" {
			later++
		}
	}
	for i, m := range msgs {
		switch m.Role {
		case "assistant":
			answered = true
			later--
			am := assistantMessage(m)
			if keep >= 0 && later >= keep {
				am.ReasoningContent = "" // cleared by clear_thinking_20251015
			}
			c.Messages = append(c.Messages, am)
			continue
		case "system":
			if !answered {
				c.Messages = mergeSystem(c.Messages, joinText(m.Content))
				continue
			}
			// Rendered where the template renders a later system turn,
			// else merged into the system prompt (model.RenderAll).
			c.Messages = append(c.Messages, openai.Message{Role: "system", Content: openai.Content{Text: joinText(m.Content)}})
			continue
		}
		for k, b := range m.Content {
			if b.Type != "tool_result" {
				continue
			}
			text := joinText(b.Content)
			if b.IsError {
				// Chat templates have no error flag: the result says it.
				text = "Error: " + text
			}
			c.Messages = append(c.Messages, openai.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: openai.Content{Text: text}})
			results[len(c.Messages)-1] = fmt.Sprintf("messages[%d].content[%d].tool_use_id", i, k)
		}
		hasText := false
		for _, b := range m.Content {
			hasText = hasText || b.Type == "text"
		}
		if hasText || len(m.Content) == 0 {
			c.Messages = append(c.Messages, openai.Message{Role: "user", Content: openai.Content{Text: joinText(m.Content)}})
		}
	}
	if err := openai.CheckToolResults(c.Messages, func(k int) string { return results[k] }); err != nil {
		return nil, err
	}
	if prefill {
		no := false
		c.ContinueFinalMessage, c.AddGenerationPrompt = true, &no
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
	if err := r.constrain(c, prefill); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		if err.Param == "stop" {
			// Chat's stop checks, in this API's name for the field.
			err.Param, err.Message = "stop_sequences", "stop_sequences"+strings.TrimPrefix(err.Message, "stop")
		}
		return nil, err
	}
	return c, nil
}

// billingHeader starts the system block Claude Code puts first in every
// request: "x-anthropic-billing-header: cc_version=…; cc_entrypoint=…;",
// whose version suffix differs between sessions. It is for Anthropic's
// billing, not an instruction, and left where it is it would end the
// prompt prefix that sessions of one agent share 74 bytes in.
const billingHeader = "x-anthropic-billing-header:"

// systemBlocks are the system prompt's blocks the model reads: all but
// a client's billing header block.
func systemBlocks(bs Blocks) Blocks {
	if len(bs) == 0 || !strings.HasPrefix(bs[0].Text, billingHeader) {
		return bs
	}
	return bs[1:]
}

// mergeSystem appends text to the conversation's leading system message
// (made first when there is none), after a blank line. System turns of the
// first exchange go there: before the model's first answer their place
// beside the user's text tells it nothing more, and in the system prompt
// they join the prefix every session of an agent shares. Claude Code
// sends its environment block (working directory, tools, skills, date:
// 9 KB) as a system turn after the user's first message, where it would
// start past the prompt's first difference between sessions.
func mergeSystem(msgs []openai.Message, text string) []openai.Message {
	if len(msgs) > 0 && msgs[0].Role == "system" {
		if msgs[0].Content.Text != "" {
			text = msgs[0].Content.Text + "\n\n" + text
		}
		msgs[0].Content.Text = text
		return msgs
	}
	return append([]openai.Message{{Role: "system", Content: openai.Content{Text: text}}}, msgs...)
}

// templateKwargs are the template variables the request's fields set:
// enable_thinking false for thinking disabled (templates with a thinking
// switch, e.g. Qwen3's, then render no thinking), and reasoning_effort
// from output_config.effort (gpt-oss's "Reasoning: low|medium|high").
func (r *Request) templateKwargs() openai.TemplateKwargs {
	k := openai.TemplateKwargs{}
	if r.Thinking != nil && r.Thinking.Type == "disabled" {
		k["enable_thinking"] = json.RawMessage("false")
	}
	if oc := r.OutputConfig; oc != nil && oc.Effort != nil {
		k["reasoning_effort"], _ = json.Marshal(efforts[*oc.Effort])
	}
	if len(k) == 0 {
		return nil
	}
	return k
}

// assistantMessage is an assistant turn as one chat message: its text and
// its tool_use blocks as the message's tool calls.
func assistantMessage(m Message) openai.Message {
	msg := openai.Message{Role: "assistant", Content: openai.Content{Text: joinText(m.Content)}}
	for _, b := range m.Content {
		if b.Type == "thinking" {
			msg.ReasoningContent += b.Thinking
		}
		if b.Type == "tool_use" {
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: b.ID, Type: "function",
				Function: openai.ToolCallFunction{Name: b.Name, Arguments: string(bytes.TrimSpace(b.Input))}})
		}
	}
	return msg
}

// prefill reads a final assistant turn as Anthropic does: text the reply
// continues (prefill true). An empty one prefills nothing, so it is left
// out and the reply is a new turn. Anthropic's refusals apply: text
// ending in whitespace (the template would trim it, and the model would
// continue other text than the client's), and tool_use blocks (a call
// is answered by a user turn's tool_result, not continued).
func (r *Request) prefill() (msgs []Message, prefill bool, err *openai.Error) {
	msgs = r.Messages
	last := len(msgs) - 1
	if msgs[last].Role != "assistant" {
		return msgs, false, nil
	}
	for k, b := range msgs[last].Content {
		if b.Type == "tool_use" {
			field := fmt.Sprintf("messages[%d].content[%d]", last, k)
			return nil, false, openai.BadRequest(field, "%s: a final assistant message is continued (prefill) and cannot hold tool_use blocks; "+
				"answer a call with a tool_result block in a user message", field)
		}
	}
	text := joinText(msgs[last].Content)
	switch {
	case text == "" && last == 0:
		return nil, false, openai.BadRequest("messages", "messages: an empty assistant message alone asks for nothing; give a user message")
	case text == "":
		return msgs[:last], false, nil
	case strings.TrimRightFunc(text, unicode.IsSpace) != text:
		field := fmt.Sprintf("messages[%d].content", last)
		return nil, false, openai.BadRequest(field, "%s: final assistant content cannot end with trailing whitespace", field)
	}
	return msgs, true, nil
}

// outputFormat is the structured-output format asked for, with the
// field that asked (nil when none): output_format or
// output_config.format, whichever is given.
func (r *Request) outputFormat() (*OutputFormat, string, *openai.Error) {
	f, param := r.OutputFormat, "output_format"
	if r.OutputConfig != nil && r.OutputConfig.Format != nil {
		if f != nil {
			return nil, "", openai.BadRequest("output_config.format", "output_format and output_config.format both set the output format; give one")
		}
		f, param = r.OutputConfig.Format, "output_config.format"
	}
	switch {
	case f == nil:
		return nil, "", nil
	case f.Type != "json_schema":
		return nil, "", openai.BadRequest(param+".type", "%s.type %q: want json_schema", param, f.Type)
	case absent(f.Schema) || bytes.TrimSpace(f.Schema)[0] != '{':
		return nil, "", openai.BadRequest(param+".schema", "%s.schema: a JSON schema object is required", param)
	}
	return f, param, nil
}

// constrain sets the output format as chat's response_format json_schema
// (strict, as Anthropic's structured outputs are: a schema keyword the
// decoder cannot enforce is a 400 naming the field), so it compiles with
// chat's code and bounds. Like Anthropic, it refuses a prefill (the
// schema holds the whole reply, the prefill's text included) and, here,
// a forced tool call (both would constrain the one output).
func (r *Request) constrain(c *openai.ChatRequest, prefill bool) *openai.Error {
	f, param, err := r.outputFormat()
	if err != nil || f == nil {
		return err
	}
	if prefill {
		return openai.BadRequest(param, "%s cannot be combined with a prefilled final assistant message", param)
	}
	if tc := r.ToolChoice; tc != nil && (tc.Type == "any" || tc.Type == "tool") {
		return openai.BadRequest(param, "%s and tool_choice %s both constrain the output; give one", param, tc.Type)
	}
	strict := true
	c.ResponseFormat = &openai.ResponseFormat{Type: "json_schema", Param: param + ".schema",
		JSONSchema: &openai.JSONSchemaFormat{Name: "output", Schema: f.Schema, Strict: &strict}}
	return nil
}

func absent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
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

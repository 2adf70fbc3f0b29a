package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// ResponsesRequest is the body of POST /v1/responses (OpenAI's Responses
// API). The server runs it as a chat request (ChatRequest): the same
// template, tool calling, constraints, sampling and engine.
type ResponsesRequest struct {
	Model        string         `json:"model"`
	Input        ResponseInput  `json:"input"`
	Instructions *string        `json:"instructions"`
	Tools        []ResponseTool `json:"tools"`
	// ToolChoice is "none", "auto", "required" or {"type": "function",
	// "name"}.
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// Reasoning's effort reaches the chat template as reasoning_effort
	// (effortKwargs); a model that reasons returns a reasoning item.
	Reasoning *ReasoningParam `json:"reasoning"`
	// PromptCacheKey names the prefix-cache affinity group: here, the
	// request's program when no other program id is given (ProgramID).
	PromptCacheKey string `json:"prompt_cache_key"`
	// ClientMetadata is the client's own bookkeeping (Codex's session and
	// turn ids): accepted, changes nothing.
	ClientMetadata  json.RawMessage `json:"client_metadata"`
	Text            *ResponseText   `json:"text"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
	Stream          bool            `json:"stream"`
	// PreviousResponseID continues a stored response's conversation;
	// Store (default true) keeps this one for later turns.
	PreviousResponseID string            `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Metadata           map[string]string `json:"metadata"`
	User               string            `json:"user"`

	// Accepted as OpenAI defines them only where that changes nothing
	// here; other values are refused (Validate).
	Truncation   string          `json:"truncation"`
	ServiceTier  string          `json:"service_tier"`
	Include      []string        `json:"include"`
	Background   *bool           `json:"background"`
	Conversation json.RawMessage `json:"conversation"`
	Prompt       json.RawMessage `json:"prompt"`
	MaxToolCalls *int            `json:"max_tool_calls"`
	TopLogprobs  *int            `json:"top_logprobs"`

	// Extensions, as on the other endpoints (cache_salt as on chat: a
	// non-empty string that keeps the request's prefix-cache entries
	// apart from other salts').
	TopK      *int          `json:"top_k"`
	Seed      *int64        `json:"seed"`
	Priority  PriorityField `json:"priority"`
	ProgramID ProgramIDText `json:"program_id"`
	CacheSalt *string       `json:"cache_salt"`
	ExtraBody *ExtraBody    `json:"extra_body"`
	// ChatTemplateKwargs are further variables of the chat template, as
	// on chat.
	ChatTemplateKwargs TemplateKwargs `json:"chat_template_kwargs"`

	// tools is what validate made of Tools (responses_tools.go).
	tools responseTools
}

// ReasoningParam is "reasoning". Effort is none, minimal, low, medium,
// high or xhigh; Summary auto, concise, detailed or none. The effort is
// handed to the chat template (reasoning_effort, which gpt-oss templates
// read; none as enable_thinking false too). A model that reasons returns
// its reasoning as written, as a reasoning item's reasoning_text: no
// summary is made of it, whatever Summary asks.
type ReasoningParam struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// ResponseText is "text": the output format.
type ResponseText struct {
	Format    *ResponseTextFormat `json:"format"`
	Verbosity *string             `json:"verbosity,omitempty"`
}

// ResponseTextFormat is text.format: {"type": "text"}, {"type":
// "json_object"} or {"type": "json_schema", "name", "schema", "strict",
// "description"}.
type ResponseTextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ResponseTool is one entry of "tools": a function tool, a namespace of
// function tools (Tools), or a built-in tool, which does not run here
// (responses_tools.go).
type ResponseTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
	// Tools are a namespace's tools.
	Tools []ResponseTool `json:"tools,omitempty"`
	// raw is the tool as the client sent it, echoed in the response.
	raw json.RawMessage
}

// UnmarshalJSON keeps the raw object.
func (t *ResponseTool) UnmarshalJSON(b []byte) error {
	type plain ResponseTool
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*t = ResponseTool(p)
	t.raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON writes the tool as the client sent it (a built-in tool's
// own fields included).
func (t ResponseTool) MarshalJSON() ([]byte, error) {
	if t.raw != nil {
		return t.raw, nil
	}
	type plain ResponseTool
	return json.Marshal(plain(t))
}

// ResponseInput is "input": a string (one user message) or a list of items.
type ResponseInput struct {
	Items []ResponseItem
	set   bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (in *ResponseInput) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*in = ResponseInput{}
	if isNull(b) {
		return nil
	}
	in.set = true
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := unmarshalField(b, &s, "input", "a string or an array of input items"); err != nil {
			return err
		}
		in.Items = []ResponseItem{{Type: ItemMessage, Role: "user", Content: ItemContent{Text: s}}}
		return nil
	}
	if err := json.Unmarshal(b, &in.Items); err != nil {
		if e, ok := err.(*Error); ok {
			return e
		}
		return BadRequest("input", "input must be a string or an array of input items: %v", err)
	}
	return nil
}

// Input item types.
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
	ItemReference          = "item_reference"
	ItemReasoning          = "reasoning"
)

// ResponseItem is one input item: a message, a function call the model
// made, a function call's output, or a reference to a stored item.
type ResponseItem struct {
	Type string `json:"type,omitempty"`
	ID   string `json:"id,omitempty"`
	// Message.
	Role    string      `json:"role,omitempty"`
	Content ItemContent `json:"content,omitzero"`
	// Function call (CallID, Namespace, Name, Arguments) and its output
	// (CallID, Output). A call of a namespace's function names the
	// namespace beside the function's own name.
	CallID    string      `json:"call_id,omitempty"`
	Namespace string      `json:"namespace,omitempty"`
	Name      string      `json:"name,omitempty"`
	Arguments string      `json:"arguments,omitempty"`
	Output    ItemContent `json:"output,omitzero"`
	// Reasoning: Content holds its reasoning_text parts; Summary its
	// summary_text parts, read when there is no content. An encrypted
	// reasoning (OpenAI's own) cannot be read here and is left out.
	Summary          ItemContent     `json:"summary,omitzero"`
	EncryptedContent json.RawMessage `json:"encrypted_content,omitempty"`
}

// ItemContent is a message's content or a call's output: a string or a
// list of text parts (input_text, output_text; joined with "\n"). Other
// parts (images, files, audio) are refused.
type ItemContent struct {
	Text string
	set  bool
}

// IsZero reports an absent content (for omitzero).
func (c ItemContent) IsZero() bool { return !c.set && c.Text == "" }

// MarshalJSON writes the text as a string.
func (c ItemContent) MarshalJSON() ([]byte, error) { return json.Marshal(c.Text) }

// UnmarshalJSON implements json.Unmarshaler.
func (c *ItemContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*c = ItemContent{set: true}
	if isNull(b) {
		return nil
	}
	text, err := textContent(b, "input", "input_text", "output_text", "text", "reasoning_text", "summary_text")
	c.Text = text
	return err
}

// ParseResponses parses and validates a Responses request body.
func ParseResponses(body []byte) (*ResponsesRequest, *Error) {
	var r ResponsesRequest
	if err := decode(body, &r); err != nil {
		if err.Param == "max_tokens" {
			err.Param = "max_output_tokens"
		}
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// validate refuses what the server cannot honour, naming the field.
func (r *ResponsesRequest) validate() *Error {
	switch {
	case !r.Input.set || len(r.Input.Items) == 0:
		return BadRequest("input", "input is required: a string or a non-empty array of items")
	case r.Background != nil && *r.Background:
		return BadRequest("background", "background responses are not supported")
	case !isAbsent(r.Conversation):
		return BadRequest("conversation", "conversations are not supported; use previous_response_id")
	case !isAbsent(r.Prompt):
		return BadRequest("prompt", "prompt templates are not supported")
	case r.Truncation != "" && r.Truncation != "disabled":
		return BadRequest("truncation", "truncation %q is not supported; only \"disabled\" (a prompt over the context is a 400)", r.Truncation)
	case r.ServiceTier != "" && r.ServiceTier != "auto" && r.ServiceTier != "default":
		return BadRequest("service_tier", "service_tier %q is not supported; only \"auto\" and \"default\"", r.ServiceTier)
	case r.MaxToolCalls != nil:
		return BadRequest("max_tool_calls", "max_tool_calls is not supported")
	case r.TopLogprobs != nil && *r.TopLogprobs > 0:
		return BadRequest("top_logprobs", "logprobs are not supported on /v1/responses")
	case r.Text != nil && r.Text.Verbosity != nil && *r.Text.Verbosity != "medium":
		return BadRequest("text.verbosity", "text.verbosity %q is not supported; only \"medium\"", *r.Text.Verbosity)
	}
	if err := r.Reasoning.check(); err != nil {
		return err
	}
	for _, inc := range r.Include {
		if err := checkInclude(inc); err != nil {
			return err
		}
	}
	if err := r.ChatTemplateKwargs.Check(); err != nil {
		return err
	}
	tools, err := resolveTools(r.Tools)
	if err != nil {
		return err
	}
	r.tools = tools
	if r.Text != nil && r.Text.Format != nil {
		switch f := r.Text.Format; f.Type {
		case "text", "json_object":
		case "json_schema":
			if isAbsent(f.Schema) {
				return BadRequest("text.format", "text.format.schema is required with type json_schema")
			}
		default:
			return BadRequest("text.format", "text.format.type %q: want text, json_object or json_schema", f.Type)
		}
	}
	for i, it := range r.Input.Items {
		if err := it.check(i); err != nil {
			return err
		}
	}
	return nil
}

// check validates one input item's type and required fields.
func (it *ResponseItem) check(i int) *Error {
	switch it.kind() {
	case ItemMessage:
		switch it.Role {
		case "user", "assistant", "system", "developer":
		default:
			return BadRequest("input", "input[%d].role %q: want user, assistant, system or developer", i, it.Role)
		}
	case ItemFunctionCall:
		if it.CallID == "" || it.Name == "" {
			return BadRequest("input", "input[%d]: a function_call needs call_id and name", i)
		}
	case ItemFunctionCallOutput:
		if it.CallID == "" {
			return BadRequest("input", "input[%d]: a function_call_output needs call_id", i)
		}
	case ItemReference:
		if it.ID == "" {
			return BadRequest("input", "input[%d]: an item_reference needs id", i)
		}
	case ItemReasoning:
	default:
		return BadRequest("input", "input[%d].type %q is not supported (message, function_call, function_call_output, item_reference, reasoning)", i, it.Type)
	}
	return nil
}

// kind is the item's type; a typeless item with a role is a message.
func (it *ResponseItem) kind() string {
	if it.Type == "" && it.Role != "" {
		return ItemMessage
	}
	return it.Type
}

// ResponseHistory is what a Responses request can refer to: responses and
// output items kept by the server (Store).
type ResponseHistory interface {
	// Conversation is a stored response's whole conversation as chat
	// messages (without its instructions, which do not carry over), its
	// output last; ok is false when it is not (or no longer) stored.
	Conversation(id string) (msgs []Message, ok bool)
	// Item is a stored output item (a message or a function call).
	Item(id string) (ResponseItem, bool)
}

// ResponsesTurn is a Responses request translated into a chat request.
type ResponsesTurn struct {
	Chat *ChatRequest
	// Input are this request's own input items as chat messages: with the
	// output, what a later turn's previous_response_id continues from.
	Input []Message
	// Dropped are the built-in tools the request listed that the model
	// does not see (responses_tools.go), as "type" or "type:name".
	Dropped []string
}

// ChatRequest translates the request: instructions as the system message,
// the previous response's conversation, then the input items (items
// referred to by id taken from h); the tools, tool choice, text format and
// sampling fields as their chat equivalents.
func (r *ResponsesRequest) ChatRequest(h ResponseHistory) (*ResponsesTurn, *Error) {
	c := &ChatRequest{Common: Common{
		Model: r.Model, MaxTokens: r.MaxOutputTokens, Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK,
		Seed: r.Seed, Stream: r.Stream, User: r.User, Priority: r.Priority, ProgramID: r.ProgramID, CacheSalt: r.CacheSalt,
		ExtraBody: r.ExtraBody, PromptCacheKey: r.PromptCacheKey,
	}}
	if r.Instructions != nil && *r.Instructions != "" {
		c.Messages = append(c.Messages, Message{Role: "system", Content: Content{Text: *r.Instructions}})
	}
	if r.PreviousResponseID != "" {
		prev, ok := h.Conversation(r.PreviousResponseID)
		if !ok {
			return nil, &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Param: "previous_response_id",
				Message: fmt.Sprintf("previous response with id %q not found (never stored, store was false, or evicted from the bounded store)", r.PreviousResponseID)}
		}
		c.Messages = append(c.Messages, prev...)
	}
	start := len(c.Messages)
	// fields name each of this request's tool results as the input item
	// it came from (by message index).
	fields := map[int]string{}
	for i, it := range r.Input.Items {
		if it.kind() == ItemReference {
			ref, ok := h.Item(it.ID)
			if !ok {
				return nil, &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Param: "input",
					Message: fmt.Sprintf("input[%d]: item %q not found (never stored, store was false, or evicted from the bounded store)", i, it.ID)}
			}
			it = ref
		}
		c.Messages = appendItem(c.Messages, start, it)
		if it.kind() == ItemFunctionCallOutput {
			fields[len(c.Messages)-1] = fmt.Sprintf("input[%d].call_id", i)
		}
	}
	// The stored chain's results were checked when they were its input;
	// its calls are answered here as well as this input's.
	if err := CheckToolResults(c.Messages, func(k int) string {
		if f, ok := fields[k]; ok {
			return f
		}
		return "previous_response_id"
	}); err != nil {
		return nil, err
	}
	for i, t := range r.tools.functions {
		fn := FunctionDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}
		raw, err := json.Marshal(map[string]any{"type": "function", "function": fn})
		if err != nil {
			return nil, BadRequest("tools", "tools[%d]: %v", i, err)
		}
		c.Tools = append(c.Tools, Tool{Type: "function", Function: &fn, Raw: raw})
	}
	c.ParallelToolCalls = r.ParallelToolCalls
	// "auto" and "none" without tools (or with only dropped built-ins) ask
	// for what no tool_choice does.
	if tc := string(bytes.TrimSpace(r.ToolChoice)); !isAbsent(r.ToolChoice) && !(len(c.Tools) == 0 && (tc == `"auto"` || tc == `"none"`)) {
		choice, err := r.chatToolChoice()
		if err != nil {
			return nil, err
		}
		c.ToolChoice = choice
	}
	c.ChatTemplateKwargs = r.templateKwargs()
	if r.Text != nil && r.Text.Format != nil && r.Text.Format.Type != "text" {
		f := r.Text.Format
		c.ResponseFormat = &ResponseFormat{Type: f.Type}
		if f.Type == "json_schema" {
			c.ResponseFormat.JSONSchema = &JSONSchemaFormat{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
		}
	}
	if err := c.Common.validate(); err != nil {
		switch err.Param {
		case "max_tokens":
			err.Param = "max_output_tokens"
			err.Message = strings.ReplaceAll(err.Message, "max_tokens", "max_output_tokens")
		case "response_format":
			err.Param = "text.format"
		}
		return nil, err
	}
	return &ResponsesTurn{Chat: c, Input: c.Messages[start:], Dropped: r.tools.dropped}, nil
}

// appendItem appends an input item as chat messages. A function call
// joins the assistant message before it (from start on, this request's
// own), so an answer that called several tools is one assistant turn, as
// the model wrote it.
func appendItem(msgs []Message, start int, it ResponseItem) []Message {
	switch it.kind() {
	case ItemReasoning:
		// Reasoning opens the assistant turn it led to: the message or
		// calls that follow join it, and the template renders it as the
		// turn's reasoning_content.
		text := it.Content.Text
		if text == "" {
			text = it.Summary.Text
		}
		if text == "" {
			return msgs // encrypted only: nothing this server can read
		}
		if n := len(msgs); n > start && msgs[n-1].Role == "assistant" && msgs[n-1].ReasoningContent == "" && msgs[n-1].Content.Text == "" && len(msgs[n-1].ToolCalls) == 0 {
			msgs[n-1].ReasoningContent = text
			return msgs
		}
		return append(msgs, Message{Role: "assistant", ReasoningContent: text})
	case ItemMessage:
		if n := len(msgs); it.Role == "assistant" && n > start && msgs[n-1].Role == "assistant" && msgs[n-1].ReasoningContent != "" &&
			msgs[n-1].Content.Text == "" && len(msgs[n-1].ToolCalls) == 0 {
			msgs[n-1].Content = Content{Text: it.Content.Text}
			return msgs
		}
	case ItemFunctionCall:
		call := ToolCall{ID: it.CallID, Type: "function", Function: ToolCallFunction{Name: FlatToolName(it.Namespace, it.Name), Arguments: it.Arguments}}
		if n := len(msgs); n > start && msgs[n-1].Role == "assistant" {
			msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			return msgs
		}
		return append(msgs, Message{Role: "assistant", ToolCalls: []ToolCall{call}})
	case ItemFunctionCallOutput:
		return append(msgs, Message{Role: "tool", ToolCallID: it.CallID, Content: Content{Text: it.Output.Text}})
	}
	return append(msgs, Message{Role: it.Role, Content: Content{Text: it.Content.Text}})
}

// StoreResponse reports whether the response is to be kept (store,
// default true).
func (r *ResponsesRequest) StoreResponse() bool { return r.Store == nil || *r.Store }

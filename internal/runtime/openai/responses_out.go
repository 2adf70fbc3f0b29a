package openai

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
)

// ObjectResponse is a Responses API response's "object".
const ObjectResponse = "response"

// Response is a Responses API response: the body of POST /v1/responses
// (and GET /v1/responses/{id}), and the "response" of its stream events.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []OutputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          ReasoningParam     `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               ResponseText       `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []ResponseTool     `json:"tools"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *ResponseUsage     `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
}

// ResponseError is a failed response's "error".
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// ResponseUsage is a response's token accounting.
type ResponseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// OutputItem is one item of a response's output: an assistant message
// (Content), a function call (CallID, Namespace, Name, Arguments; the
// namespace only for a function of one) or the model's reasoning
// (ReasoningText).
type OutputItem struct {
	Type   string
	ID     string
	Status string
	// Message.
	Content []OutputText
	// Function call.
	CallID, Namespace, Name, Arguments string
	// Reasoning.
	ReasoningText string
}

// ReasoningPart is a reasoning item's content part (reasoning_text) or
// summary part (summary_text).
type ReasoningPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// OutputText is a message's output_text part.
type OutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

// MarshalJSON writes the fields of the item's type.
func (it OutputItem) MarshalJSON() ([]byte, error) {
	if it.Type == ItemFunctionCall {
		return json.Marshal(struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			CallID    string `json:"call_id"`
			Namespace string `json:"namespace,omitempty"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Status    string `json:"status"`
		}{it.Type, it.ID, it.CallID, it.Namespace, it.Name, it.Arguments, it.Status})
	}
	if it.Type == ItemReasoning {
		// The reasoning as written (reasoning_text), as vLLM returns it;
		// no summary is made of it.
		return json.Marshal(struct {
			Type    string          `json:"type"`
			ID      string          `json:"id"`
			Summary []ReasoningPart `json:"summary"`
			Content []ReasoningPart `json:"content"`
			Status  string          `json:"status"`
		}{it.Type, it.ID, []ReasoningPart{}, []ReasoningPart{{Type: "reasoning_text", Text: it.ReasoningText}}, it.Status})
	}
	content := it.Content
	if content == nil {
		content = []OutputText{}
	}
	return json.Marshal(struct {
		Type    string       `json:"type"`
		ID      string       `json:"id"`
		Status  string       `json:"status"`
		Role    string       `json:"role"`
		Content []OutputText `json:"content"`
	}{it.Type, it.ID, it.Status, "assistant", content})
}

// AsInput is the item as a later request's input refers to it
// (item_reference).
func (it OutputItem) AsInput() ResponseItem {
	if it.Type == ItemFunctionCall {
		return ResponseItem{Type: ItemFunctionCall, ID: it.ID, CallID: it.CallID, Namespace: it.Namespace, Name: it.Name, Arguments: it.Arguments}
	}
	if it.Type == ItemReasoning {
		return ResponseItem{Type: ItemReasoning, ID: it.ID, Content: ItemContent{Text: it.ReasoningText, set: true}}
	}
	var texts []string
	for _, c := range it.Content {
		texts = append(texts, c.Text)
	}
	return ResponseItem{Type: ItemMessage, ID: it.ID, Role: "assistant", Content: ItemContent{Text: strings.Join(texts, "\n"), set: true}}
}

// AssistantMessage is the output as the chat message a later turn renders
// (previous_response_id): a namespaced call under its flat name, as the
// model wrote it.
func AssistantMessage(out []OutputItem) Message {
	m := Message{Role: "assistant"}
	var texts []string
	for _, it := range out {
		if it.Type == ItemReasoning {
			m.ReasoningContent += it.ReasoningText
			continue
		}
		if it.Type == ItemFunctionCall {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: it.CallID, Type: "function",
				Function: ToolCallFunction{Name: FlatToolName(it.Namespace, it.Name), Arguments: it.Arguments}})
			continue
		}
		for _, c := range it.Content {
			texts = append(texts, c.Text)
		}
	}
	m.Content.Text = strings.Join(texts, "\n")
	return m
}

func itemID(prefix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for range 24 {
		b.WriteByte(idAlphabet[rand.IntN(len(idAlphabet))])
	}
	return b.String()
}

// ResponseShape renders one reply as a Responses API response: whole
// (Body) or as its event stream (Start, Text, Call, Finish, Fail), every
// event with its sequence_number. It serves one request.
type ResponseShape struct {
	resp Response
	req  *ResponsesRequest
	seq  int
	// The open message item and its text, and the function call items by
	// the call's index, while streaming.
	msg  int // index in resp.Output, -1 when none is open
	text strings.Builder
	// The open reasoning item (-1 when none) and its text.
	think     int
	reasoning strings.Builder
	calls     map[int]int // call index → index in resp.Output
	open      int         // the open call's index in resp.Output, -1 when none

	// OnComplete, when set, is called with the finished response (status
	// completed or incomplete) before its last event or its body is
	// returned.
	OnComplete func(*Response)
}

// NewResponseShape prepares the response of r with the given id.
func NewResponseShape(id string, created int64, model string, r *ResponsesRequest) *ResponseShape {
	resp := Response{ID: id, Object: ObjectResponse, CreatedAt: created, Status: "in_progress", Model: model,
		Instructions: r.Instructions, MaxOutputTokens: r.MaxOutputTokens, Output: []OutputItem{},
		ParallelToolCalls: r.ParallelToolCalls == nil || *r.ParallelToolCalls, Store: r.StoreResponse(),
		Temperature: 1, TopP: 1, Text: ResponseText{Format: &ResponseTextFormat{Type: "text"}},
		ToolChoice: json.RawMessage(`"auto"`), Tools: r.Tools, Truncation: "disabled", Metadata: r.Metadata}
	if resp.Tools == nil {
		resp.Tools = []ResponseTool{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	if r.PreviousResponseID != "" {
		resp.PreviousResponseID = &r.PreviousResponseID
	}
	if r.Temperature != nil {
		resp.Temperature = *r.Temperature
	}
	if r.TopP != nil {
		resp.TopP = *r.TopP
	}
	if r.Text != nil && r.Text.Format != nil {
		resp.Text.Format = r.Text.Format
	}
	if !isAbsent(r.ToolChoice) {
		resp.ToolChoice = r.ToolChoice
	}
	if r.User != "" {
		resp.User = &r.User
	}
	if r.Reasoning != nil {
		resp.Reasoning = *r.Reasoning
	}
	return &ResponseShape{resp: resp, req: r, msg: -1, open: -1, think: -1, calls: map[int]int{}}
}

// Response is the response as it stands: complete after Body or Finish.
func (s *ResponseShape) Response() *Response { return &s.resp }

// event appends one server-sent event: "event: <type>" and its JSON data,
// which carries the type and the next sequence number.
func (s *ResponseShape) event(b []byte, typ string, fields map[string]any) []byte {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	data, err := json.Marshal(fields)
	if err != nil { // cannot happen: strings, numbers and the types above
		data = []byte(`{"type":"error","message":"internal error"}`)
	}
	return AppendEvent(b, typ, data)
}

// Start implements the server's turnWriter: response.created and
// response.in_progress.
func (s *ResponseShape) Start(b []byte, _ int) []byte {
	b = s.event(b, "response.created", map[string]any{"response": &s.resp})
	return s.event(b, "response.in_progress", map[string]any{"response": &s.resp})
}

// Text opens the message item (output_item.added, content_part.added) on
// the first text and sends output_text.delta.
func (s *ResponseShape) Text(b, delta []byte) []byte {
	if s.msg < 0 {
		b = s.closeReasoning(b)
		b = s.closeCall(b)
		b = s.openMessage(b)
	}
	s.text.Write(delta)
	return s.delta(b, "response.output_text.delta", s.msg, partText, delta)
}

// Content parts a delta event names (content_index): none for a call's
// arguments, an output_text part (with its logprobs), a reasoning_text
// part.
const (
	partNone = iota
	partText
	partReasoning
)

// delta appends a per-token delta event, written by hand so that the
// token path allocates nothing: the item's id and output index, the
// content index of the part (and an output_text part's empty logprobs),
// and the delta.
func (s *ResponseShape) delta(b []byte, typ string, out int, part int, delta []byte) []byte {
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(s.seq), 10)
	s.seq++
	b = append(b, `,"item_id":`...)
	b = AppendJSONString(b, s.resp.Output[out].ID)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	switch part {
	case partText:
		b = append(b, `,"content_index":0,"logprobs":[]`...)
	case partReasoning:
		// The SDKs' stream accumulators (openai's ResponseStream) add
		// the delta to the item's content part at content_index.
		b = append(b, `,"content_index":0`...)
	}
	b = append(b, `,"delta":`...)
	b = AppendJSONBytes(b, delta)
	return append(b, "}\n\n"...)
}

func (s *ResponseShape) openMessage(b []byte) []byte {
	s.msg = len(s.resp.Output)
	it := OutputItem{Type: ItemMessage, ID: itemID("msg_"), Status: "in_progress"}
	s.resp.Output = append(s.resp.Output, it)
	b = s.event(b, "response.output_item.added", map[string]any{"output_index": s.msg, "item": it})
	return s.event(b, "response.content_part.added", map[string]any{"item_id": it.ID, "output_index": s.msg,
		"content_index": 0, "part": OutputText{Type: "output_text", Annotations: []any{}, Logprobs: []any{}}})
}

// closeMessage ends the open message item: output_text.done,
// content_part.done, output_item.done.
func (s *ResponseShape) closeMessage(b []byte) []byte { return s.closeMessageAs(b, "completed") }

// closeMessageAs closes the open message item with its status: completed,
// or incomplete when the output limit cut it.
func (s *ResponseShape) closeMessageAs(b []byte, status string) []byte {
	if s.msg < 0 {
		return b
	}
	it := &s.resp.Output[s.msg]
	part := OutputText{Type: "output_text", Text: s.text.String(), Annotations: []any{}, Logprobs: []any{}}
	it.Content, it.Status = []OutputText{part}, status
	b = s.event(b, "response.output_text.done", map[string]any{"item_id": it.ID, "output_index": s.msg,
		"content_index": 0, "text": part.Text, "logprobs": []any{}})
	b = s.event(b, "response.content_part.done", map[string]any{"item_id": it.ID, "output_index": s.msg,
		"content_index": 0, "part": part})
	b = s.event(b, "response.output_item.done", map[string]any{"output_index": s.msg, "item": *it})
	s.msg = -1
	return b
}

// Reasoning opens a reasoning item on the first reasoning text and sends
// reasoning_text.delta.
func (s *ResponseShape) Reasoning(b, delta []byte) []byte {
	if s.think < 0 {
		b = s.closeMessage(b)
		b = s.closeCall(b)
		s.think = len(s.resp.Output)
		s.reasoning.Reset()
		it := OutputItem{Type: ItemReasoning, ID: itemID("rs_"), Status: "in_progress"}
		s.resp.Output = append(s.resp.Output, it)
		b = s.event(b, "response.output_item.added", map[string]any{"output_index": s.think, "item": it})
	}
	s.reasoning.Write(delta)
	return s.delta(b, "response.reasoning_text.delta", s.think, partReasoning, delta)
}

// closeReasoning ends the open reasoning item: reasoning_text.done,
// output_item.done.
func (s *ResponseShape) closeReasoning(b []byte) []byte {
	if s.think < 0 {
		return b
	}
	it := &s.resp.Output[s.think]
	it.ReasoningText, it.Status = s.reasoning.String(), "completed"
	b = s.event(b, "response.reasoning_text.done", map[string]any{"item_id": it.ID, "output_index": s.think,
		"content_index": 0, "text": it.ReasoningText})
	b = s.event(b, "response.output_item.done", map[string]any{"output_index": s.think, "item": *it})
	s.think = -1
	return b
}

// Call opens a function_call item on a call's first piece and sends its
// argument fragments as function_call_arguments.delta.
func (s *ResponseShape) Call(b []byte, d ToolCallDelta) []byte {
	if d.First {
		b = s.closeReasoning(b)
		b = s.closeMessage(b)
		b = s.closeCall(b)
		s.open = len(s.resp.Output)
		s.calls[d.Index] = s.open
		q := s.req.Qualified(d.Name)
		it := OutputItem{Type: ItemFunctionCall, ID: itemID("fc_"), Status: "in_progress", CallID: d.ID, Namespace: q.Namespace, Name: q.Name}
		s.resp.Output = append(s.resp.Output, it)
		b = s.event(b, "response.output_item.added", map[string]any{"output_index": s.open, "item": it})
	}
	i, ok := s.calls[d.Index]
	if !ok || d.Arguments == "" {
		return b
	}
	it := &s.resp.Output[i]
	it.Arguments += d.Arguments
	return s.delta(b, "response.function_call_arguments.delta", i, partNone, []byte(d.Arguments))
}

// closeCall ends the open function_call item:
// function_call_arguments.done, output_item.done.
func (s *ResponseShape) closeCall(b []byte) []byte { return s.closeCallAs(b, "completed") }

// closeCallAs closes the open function_call item with its status:
// incomplete when the output limit cut the call (its arguments are a
// prefix a client cannot run).
func (s *ResponseShape) closeCallAs(b []byte, status string) []byte {
	if s.open < 0 {
		return b
	}
	it := &s.resp.Output[s.open]
	it.Status = status
	b = s.event(b, "response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": s.open,
		"name": it.Name, "arguments": it.Arguments})
	b = s.event(b, "response.output_item.done", map[string]any{"output_index": s.open, "item": *it})
	s.open = -1
	return b
}

// Finish closes the open item and ends the stream with
// response.completed, or response.incomplete when the output limit cut
// the reply. A reply with no text and no calls still has its (empty)
// message.
func (s *ResponseShape) Finish(b []byte, t *Turn) []byte {
	if len(s.resp.Output) == 0 {
		b = s.openMessage(b)
	}
	last := lastItemStatus(t)
	b = s.closeReasoning(b)
	if len(s.resp.Output) == 1 && s.resp.Output[0].Type == ItemReasoning {
		b = s.openMessage(b) // reasoning alone still answers with its (empty) message
	}
	b = s.closeMessageAs(b, last)
	b = s.closeCallAs(b, last)
	s.complete(t)
	typ := "response.completed"
	if s.resp.Status == "incomplete" {
		typ = "response.incomplete"
	}
	return s.event(b, typ, map[string]any{"response": &s.resp})
}

// Fail ends the stream with response.failed.
func (s *ResponseShape) Fail(b []byte, err *Error) []byte {
	s.resp.Status = "failed"
	code := "server_error"
	if err.Code != "" {
		code = err.Code
	}
	s.resp.Error = &ResponseError{Code: code, Message: err.Message}
	return s.event(b, "response.failed", map[string]any{"response": &s.resp})
}

// Body is the whole response.
func (s *ResponseShape) Body(t *Turn) any {
	if t.Reasoning != "" {
		s.resp.Output = append(s.resp.Output, OutputItem{Type: ItemReasoning, ID: itemID("rs_"), Status: "completed", ReasoningText: t.Reasoning})
	}
	if t.Content != "" || len(t.Calls) == 0 {
		s.resp.Output = append(s.resp.Output, OutputItem{Type: ItemMessage, ID: itemID("msg_"), Status: "completed",
			Content: []OutputText{{Type: "output_text", Text: t.Content, Annotations: []any{}, Logprobs: []any{}}}})
	}
	for _, c := range t.Calls {
		q := s.req.Qualified(c.Function.Name)
		s.resp.Output = append(s.resp.Output, OutputItem{Type: ItemFunctionCall, ID: itemID("fc_"), Status: "completed",
			CallID: c.ID, Namespace: q.Namespace, Name: q.Name, Arguments: c.Function.Arguments})
	}
	s.resp.Output[len(s.resp.Output)-1].Status = lastItemStatus(t)
	s.complete(t)
	return &s.resp
}

// lastItemStatus is the status of a reply's last output item: incomplete
// when the output limit cut the reply (the item it was writing), as
// OpenAI's; earlier items ended before it.
func lastItemStatus(t *Turn) string {
	if t.Finish == "length" {
		return "incomplete"
	}
	return "completed"
}

// complete fills in the status and the usage.
func (s *ResponseShape) complete(t *Turn) {
	s.resp.Status = "completed"
	if t.Finish == "length" {
		s.resp.Status = "incomplete"
		s.resp.IncompleteDetails = &IncompleteDetails{Reason: "max_output_tokens"}
	}
	u := &ResponseUsage{InputTokens: t.PromptTokens, OutputTokens: t.CompletionTokens,
		TotalTokens: t.PromptTokens + t.CompletionTokens}
	u.InputTokensDetails.CachedTokens = t.CachedTokens
	u.OutputTokensDetails.ReasoningTokens = t.ReasoningTokens
	s.resp.Usage = u
	if s.OnComplete != nil {
		s.OnComplete(&s.resp)
	}
}

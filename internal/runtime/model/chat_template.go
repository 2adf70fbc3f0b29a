package model

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/chatformat"
)

// Message is one chat turn.
type Message struct {
	Role, Content string
	// ContentNull: the content was null or absent (an assistant turn that
	// only calls tools); templates see none rather than "".
	ContentNull bool
	// Name is the optional participant name.
	Name string
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool turn answers.
	ToolCallID string
	// ReasoningContent is the reasoning an assistant turn gave before its
	// answer (reasoning_content, as vLLM and DeepSeek name it); templates
	// see it only when set: Qwen3's, GLM's and DeepSeek's re-render or drop
	// it by whether it is there.
	ReasoningContent string
}

// ToolCall is one call an assistant turn made.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON text of the arguments object, as OpenAI
	// clients send it.
	Arguments string
}

// Chat is a conversation to render.
type Chat struct {
	Messages []Message
	// Tools are the request's tools, each the JSON object the client sent
	// ({"type": "function", "function": {"name", "description",
	// "parameters"}}), in order.
	Tools []json.RawMessage
	// AddGenerationPrompt ends the text with the header of an assistant
	// turn, so the model answers as the assistant.
	AddGenerationPrompt bool
	// ContinueFinalMessage leaves the final message open, so the model
	// continues it (no generation prompt is added).
	ContinueFinalMessage bool
	// Kwargs are further template variables (chat_template_kwargs).
	Kwargs map[string]json.RawMessage
	// Charge, when set, is told of memory the rendering is about to take
	// (the JSON it decodes into template values, the text it writes)
	// before it takes it, so that a small request whose rendering is large
	// counts against the pod's budget; its error ends the rendering and is
	// returned as it is. Go templates, whose text is as long as the
	// messages, charge nothing.
	Charge func(n int64) error
}

// charge tells c.Charge, when set, of n bytes.
func (c *Chat) charge(n int64) error {
	if c.Charge == nil {
		return nil
	}
	return c.Charge(n)
}

// ToolFormat is how a model writes tool calls; the server parses its output
// and constrains it accordingly.
type ToolFormat string

// Tool formats.
const (
	// ToolFormatNone: the template knows no tools.
	ToolFormatNone ToolFormat = ""
	// ToolFormatHermes: <tool_call>{"name": …, "arguments": {…}}</tool_call>
	// (Qwen2.5, Hermes).
	ToolFormatHermes ToolFormat = "hermes"
	// ToolFormatLlama3JSON: {"name": …, "parameters": {…}} as the whole
	// message (Llama 3.1 / 3.2 / 3.3).
	ToolFormatLlama3JSON ToolFormat = "llama3_json"
	// ToolFormatMistral: [TOOL_CALLS] [{"name": …, "arguments": {…}}, …].
	ToolFormatMistral ToolFormat = "mistral"
)

// ChatTemplate renders a conversation as the prompt text the model was
// trained on. The text does not start with the BOS token: encode it with
// Tokenizer.Encode(text, true), which adds BOS where the model wants one.
// Implementations are safe for concurrent use.
type ChatTemplate interface {
	// Name identifies the template ("jinja", or the built-in "chatml",
	// "llama3").
	Name() string
	// Render renders c. Errors wrap ErrTemplate when the conversation is
	// one the template refuses (its raise_exception) or cannot render.
	Render(c *Chat) (string, error)
	// ToolFormat is how the model writes tool calls.
	ToolFormat() ToolFormat
}

// ChatTemplateFor picks the built-in template for a GGUF
// tokenizer.chat_template source: ChatML when it uses <|im_start|>,
// Llama-3 when it uses <|start_header_id|>. Without a template, or with one
// in neither format, the choice is Llama-3 when the vocabulary has
// <|start_header_id|> and ChatML otherwise. Models load the source itself
// as a JinjaTemplate, and a source that does not parse fails the load; the
// built-ins serve only GGUFs that carry no template (and name the
// end-of-turn tokens of the family a source belongs to).
func ChatTemplateFor(source string, tok Tokenizer) ChatTemplate {
	switch {
	case strings.Contains(source, "<|im_start|>"):
		return ChatML{Source: source}
	case strings.Contains(source, "<|start_header_id|>"):
		return Llama3{Source: source}
	}
	if _, ok := tokenID(tok, "<|start_header_id|>"); ok {
		return Llama3{}
	}
	return ChatML{}
}

// ChatML is the <|im_start|>role\ncontent<|im_end|> format (Qwen, many
// others). Tools are listed in the system turn and calls written as
// Hermes/Qwen do.
type ChatML struct {
	// Source is the Jinja text it was recognized from, written back to GGUF;
	// empty means chatMLSource.
	Source string
}

const chatMLSource = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// Name implements ChatTemplate.
func (ChatML) Name() string { return "chatml" }

// ToolFormat implements ChatTemplate.
func (ChatML) ToolFormat() ToolFormat { return ToolFormatHermes }

// Apply renders plain messages (no tools).
func (t ChatML) Apply(msgs []Message, addGenerationPrompt bool) string {
	s, _ := t.Render(&Chat{Messages: msgs, AddGenerationPrompt: addGenerationPrompt})
	return s
}

// Render implements ChatTemplate.
func (ChatML) Render(c *Chat) (string, error) {
	var b strings.Builder
	msgs := c.Messages
	if len(c.Tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if len(msgs) > 0 && msgs[0].Role == "system" {
			b.WriteString(msgs[0].Content)
			b.WriteString("\n\n")
			msgs = msgs[1:]
		}
		b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>")
		for _, t := range c.Tools {
			b.WriteString("\n")
			b.Write(compact(t))
		}
		b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n")
	}
	for i, m := range msgs {
		last := i == len(msgs)-1 && c.ContinueFinalMessage
		role := m.Role
		if role == "tool" {
			if i == 0 || msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n")
			b.WriteString(m.Content)
			b.WriteString("\n</tool_response>")
			if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
			continue
		}
		b.WriteString("<|im_start|>")
		b.WriteString(role)
		b.WriteString("\n")
		b.WriteString(m.Content)
		for _, tc := range m.ToolCalls {
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "<tool_call>\n{\"name\": %q, \"arguments\": %s}\n</tool_call>", tc.Name, cmp.Or(strings.TrimSpace(tc.Arguments), "{}"))
		}
		if last {
			return b.String(), nil
		}
		b.WriteString("<|im_end|>\n")
	}
	if c.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String(), nil
}

func (t ChatML) ggufMetadata() []ggufKV {
	return []ggufKV{{"tokenizer.chat_template", cmp.Or(t.Source, chatMLSource)}}
}

// Llama3 is Llama 3's <|start_header_id|>role<|end_header_id|> format.
// Tools are listed in the system turn and calls written as Llama 3.1's
// JSON tool calls; tool results are ipython turns.
type Llama3 struct {
	// Source is as in ChatML; empty means llama3Source.
	Source string
}

const llama3Source = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"

// Name implements ChatTemplate.
func (Llama3) Name() string { return "llama3" }

// ToolFormat implements ChatTemplate.
func (Llama3) ToolFormat() ToolFormat { return ToolFormatLlama3JSON }

// Apply renders plain messages (no tools).
func (t Llama3) Apply(msgs []Message, addGenerationPrompt bool) string {
	s, _ := t.Render(&Chat{Messages: msgs, AddGenerationPrompt: addGenerationPrompt})
	return s
}

// Render implements ChatTemplate. Contents are trimmed, as Llama 3's
// template does.
func (Llama3) Render(c *Chat) (string, error) {
	var b strings.Builder
	msgs := c.Messages
	header := func(role string) {
		b.WriteString("<|start_header_id|>")
		b.WriteString(role)
		b.WriteString("<|end_header_id|>\n\n")
	}
	if len(c.Tools) > 0 {
		header("system")
		b.WriteString("Environment: ipython\n\nYou have access to the following functions. To call a function, please respond with JSON for a function call. Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}. Do not use variables.\n\n")
		for _, t := range c.Tools {
			b.Write(compact(t))
			b.WriteString("\n\n")
		}
		if len(msgs) > 0 && msgs[0].Role == "system" {
			b.WriteString(strings.TrimSpace(msgs[0].Content))
			msgs = msgs[1:]
		}
		b.WriteString("<|eot_id|>")
	}
	for i, m := range msgs {
		role := m.Role
		content := strings.TrimSpace(m.Content)
		switch {
		case role == "tool":
			role = "ipython"
			out, _ := json.Marshal(map[string]string{"output": m.Content})
			content = string(out)
		case len(m.ToolCalls) > 0:
			var calls []string
			for _, tc := range m.ToolCalls {
				calls = append(calls, fmt.Sprintf("{\"name\": %q, \"parameters\": %s}", tc.Name, cmp.Or(strings.TrimSpace(tc.Arguments), "{}")))
			}
			content = strings.Join(calls, "; ")
		}
		header(role)
		b.WriteString(content)
		if i == len(msgs)-1 && c.ContinueFinalMessage {
			return b.String(), nil
		}
		b.WriteString("<|eot_id|>")
	}
	if c.AddGenerationPrompt {
		header("assistant")
	}
	return b.String(), nil
}

func (t Llama3) ggufMetadata() []ggufKV {
	return []ggufKV{{"tokenizer.chat_template", cmp.Or(t.Source, llama3Source)}}
}

// compact is a tool's JSON without insignificant whitespace, keys in the
// client's order.
func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// endOfTurnTokens are the texts of the tokens that end an assistant turn in
// each format; they are added to Config.EOS when the vocabulary has them.
// notEnd are tokens the GGUF may name as an end that, in the template's
// output format, are not (gpt-oss's <|end|> ends a message; the turn ends
// at <|call|> or <|return|>). src is the GGUF's template source.
func endOfTurnTokens(t ChatTemplate, src string) (end, notEnd []string) {
	if j, ok := t.(*JinjaTemplate); ok {
		src = j.Source()
		t = j.family
	}
	end, notEnd = chatformat.Detect(src).EndTokens()
	end = slices.Clone(end)
	switch t.(type) {
	case ChatML:
		end = append(end, "<|im_end|>", "<|endoftext|>")
	case Llama3:
		end = append(end, "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>")
	}
	return end, notEnd
}

func tokenID(tok Tokenizer, text string) (int32, bool) {
	v, ok := tok.(interface{ tokenID(string) (int32, bool) })
	if !ok {
		return 0, false
	}
	return v.tokenID(text)
}

func (v *vocab) tokenID(text string) (int32, bool) {
	id, ok := v.ids[text]
	return id, ok
}

// tokenText is a token's text as the vocabulary spells it ("<s>",
// "<|begin_of_text|>"), or "" when unknown.
func tokenText(tok Tokenizer, id int32) string {
	v, ok := tok.(interface{ tokenText(int32) string })
	if !ok || id < 0 {
		return ""
	}
	return v.tokenText(id)
}

func (v *vocab) tokenText(id int32) string {
	if int(id) >= len(v.tokens) {
		return ""
	}
	return v.tokens[id]
}

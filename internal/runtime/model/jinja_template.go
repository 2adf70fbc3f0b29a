package model

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/jinja"
)

// JinjaTemplate renders a GGUF's tokenizer.chat_template with kvpilot's
// Jinja engine (internal/runtime/jinja), which renders as Python's Jinja2
// does with the settings transformers' apply_chat_template gives it
// (trim_blocks, lstrip_blocks, loop controls, raise_exception,
// strftime_now, tojson as json.dumps), so a model formats messages, tools,
// tool calls and tool results as its authors wrote. testdata/jinja2 holds
// Python's renders of llama.cpp's templates that it is checked against.
type JinjaTemplate struct {
	source   string
	tmpl     *jinja.Template
	bos, eos string
	format   ToolFormat
	// nullContent: the template sees a null content as None even in a
	// message with tool calls (it renders none; see messageValue).
	nullContent bool
	// thinkingField: the template reads past reasoning from a message's
	// "thinking" (gpt-oss's), not "reasoning_content".
	thinkingField bool
	// family is the built-in format the source uses, if any: it names the
	// end-of-turn tokens.
	family ChatTemplate
	// Now is the clock of strftime_now (default time.Now).
	Now func() time.Time
}

// ErrTemplate marks errors of the template itself (raise_exception, a
// failed expression): the request it rendered is at fault or unsupported.
var ErrTemplate = errors.New("chat template")

// NewJinjaTemplate parses source. bos and eos are the texts of the
// model's BOS and EOS tokens (bos_token, eos_token in the template). A
// source the engine cannot parse is an error naming the construct and its
// line.
func NewJinjaTemplate(source, bos, eos string) (*JinjaTemplate, error) {
	t, err := jinja.Parse(source)
	if err != nil {
		return nil, fmt.Errorf("parse chat template: %w", err)
	}
	j := &JinjaTemplate{source: source, tmpl: t, bos: bos, eos: eos, format: toolFormatOf(source), Now: time.Now,
		nullContent: !strings.Contains(source, "tool_calls"), thinkingField: strings.Contains(source, "<|channel|>") && strings.Contains(source, "message.thinking")}
	switch {
	case strings.Contains(source, "<|im_start|>"):
		j.family = ChatML{}
	case strings.Contains(source, "<|start_header_id|>"):
		j.family = Llama3{}
	}
	return j, nil
}

// Name implements ChatTemplate.
func (j *JinjaTemplate) Name() string { return "jinja" }

// ToolFormat implements ChatTemplate.
func (j *JinjaTemplate) ToolFormat() ToolFormat { return j.format }

// RendersRole implements RoleRenderer: the template names the role in a
// string literal (gpt-oss's and other recent templates test for
// 'developer'; Qwen2.5's never does, and drops such messages).
func (j *JinjaTemplate) RendersRole(role string) bool {
	return strings.Contains(j.source, "'"+role+"'") || strings.Contains(j.source, `"`+role+`"`)
}

// Source is the template text.
func (j *JinjaTemplate) Source() string { return j.source }

func (j *JinjaTemplate) ggufMetadata() []ggufKV {
	return []ggufKV{{"tokenizer.chat_template", j.source}}
}

// Render implements ChatTemplate.
func (j *JinjaTemplate) Render(c *Chat) (string, error) {
	ctx, err := j.context(c)
	if err != nil {
		return "", err
	}
	var refused error
	out, err := j.tmpl.RenderCharged(ctx, func(n int64) error {
		refused = c.charge(n)
		return refused
	})
	switch {
	case refused != nil:
		return "", refused
	case err != nil:
		return "", fmt.Errorf("%w: %s", ErrTemplate, templateMessage(err))
	}
	// The text must not start with BOS: the tokenizer adds it where the
	// model wants one.
	if j.bos != "" {
		out = strings.TrimPrefix(out, j.bos)
	}
	if c.ContinueFinalMessage {
		return continueFinal(out, c.Messages)
	}
	return out, nil
}

// continueFinal cuts the rendered conversation right after the final
// message's content, so the model continues it (transformers does the
// same: the template closed the turn, the cut reopens it).
func continueFinal(out string, msgs []Message) (string, error) {
	last := strings.TrimSpace(msgs[len(msgs)-1].Content)
	if last == "" {
		return "", fmt.Errorf("%w: continue_final_message needs a final message with content", ErrTemplate)
	}
	i := strings.LastIndex(out, last)
	if i < 0 {
		return "", fmt.Errorf("%w: the template does not render the final message's content verbatim; cannot continue it", ErrTemplate)
	}
	return out[:i+len(last)], nil
}

// templateMessage is raise_exception's message, else the engine's error
// (which names the line).
func templateMessage(err error) string {
	var r *raised
	if errors.As(err, &r) {
		return r.msg
	}
	return err.Error()
}

const raisedPrefix = "raise_exception: "

type raised struct{ msg string }

func (r *raised) Error() string { return raisedPrefix + r.msg }

func (j *JinjaTemplate) context(c *Chat) (map[string]any, error) {
	if err := c.charge(jsonBytes(c) * jinja.FromJSONMemoryFactor); err != nil {
		return nil, err
	}
	msgs := make(jinja.List, len(c.Messages))
	for i, m := range c.Messages {
		v, err := messageValue(m, j.nullContent, j.thinkingField)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		msgs[i] = v
	}
	ctx := map[string]any{
		"messages":              msgs,
		"add_generation_prompt": c.AddGenerationPrompt && !c.ContinueFinalMessage,
		"bos_token":             j.bos,
		"eos_token":             j.eos,
		"documents":             nil,
		"raise_exception": jinja.Func(func(args []any, _ *jinja.Dict) (any, error) {
			msg := ""
			if len(args) > 0 {
				msg = jinja.Str(args[0])
			}
			return nil, &raised{msg: msg}
		}),
		"strftime_now": jinja.Func(func(args []any, _ *jinja.Dict) (any, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("strftime_now takes one format argument, got %d", len(args))
			}
			format, ok := args[0].(string)
			if !ok {
				return nil, fmt.Errorf("strftime_now: the format must be a string")
			}
			now := j.Now
			if now == nil {
				now = time.Now
			}
			return strftime(now(), format), nil
		}),
	}
	if len(c.Tools) > 0 {
		tools := make(jinja.List, len(c.Tools))
		for i, t := range c.Tools {
			v, err := jinja.FromJSON(t)
			if err != nil {
				return nil, fmt.Errorf("tools[%d]: %w", i, err)
			}
			tools[i] = v
		}
		ctx["tools"] = tools
	} else {
		ctx["tools"] = nil
	}
	for k, raw := range c.Kwargs {
		v, err := jinja.FromJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("chat_template_kwargs.%s: %w", k, err)
		}
		ctx[k] = v
	}
	return ctx, nil
}

// jsonBytes is the JSON text of c that becomes template values: its
// tools, chat_template_kwargs and tool-call arguments.
func jsonBytes(c *Chat) int64 {
	var n int
	for _, t := range c.Tools {
		n += len(t)
	}
	for _, raw := range c.Kwargs {
		n += len(raw)
	}
	for _, m := range c.Messages {
		for _, tc := range m.ToolCalls {
			n += len(tc.Arguments)
		}
	}
	return int64(n)
}

// messageValue is a message as templates expect it (the OpenAI shape,
// tool-call arguments decoded into an object, as vLLM passes them).
// nullContent is false for a template that renders tool calls: there the
// null content of a message that calls tools is "" (llama.cpp's rule,
// common/chat.cpp requires_non_null_content), as such templates
// concatenate it or test it as a string.
//
// thinkingField is true for gpt-oss's template, which reads a message's
// past reasoning from "thinking": it gets the reasoning there too, and a
// message that calls tools has no content beside it (llama.cpp's rule,
// common/parsers/gpt-oss.cpp; the template refuses both).
func messageValue(m Message, nullContent, thinkingField bool) (*jinja.Dict, error) {
	v := jinja.NewDict()
	v.Set("role", m.Role)
	switch {
	case thinkingField && m.ReasoningContent != "" && len(m.ToolCalls) > 0:
	case m.ContentNull && (nullContent || len(m.ToolCalls) == 0):
		v.Set("content", nil)
	default:
		v.Set("content", m.Content)
	}
	if m.Name != "" {
		v.Set("name", m.Name)
	}
	if len(m.ToolCalls) > 0 {
		calls := make(jinja.List, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			var args any = jinja.NewDict()
			if strings.TrimSpace(tc.Arguments) != "" {
				a, err := jinja.FromJSON([]byte(tc.Arguments))
				if err != nil {
					return nil, fmt.Errorf("tool_calls[%d].function.arguments is not JSON: %w", i, err)
				}
				args = a
			}
			fn := jinja.NewDict()
			fn.Set("name", tc.Name)
			fn.Set("arguments", args)
			call := jinja.NewDict()
			call.Set("id", tc.ID)
			call.Set("type", "function")
			call.Set("function", fn)
			calls[i] = call
		}
		v.Set("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		v.Set("tool_call_id", m.ToolCallID)
	}
	if m.ReasoningContent != "" {
		v.Set("reasoning_content", m.ReasoningContent)
		if thinkingField {
			v.Set("thinking", m.ReasoningContent)
		}
	}
	return v, nil
}

// strftime formats t with Python's strftime directives (the ones chat
// templates use; others are written as they are).
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// toolFormatOf reads from a template how its model writes tool calls.
func toolFormatOf(source string) ToolFormat {
	switch {
	case strings.Contains(source, "<tool_call>"):
		return ToolFormatHermes
	case strings.Contains(source, "[TOOL_CALLS]"):
		return ToolFormatMistral
	case strings.Contains(source, "<|start_header_id|>") && (strings.Contains(source, "tool_call") || strings.Contains(source, "ipython")):
		return ToolFormatLlama3JSON
	}
	return ToolFormatNone
}

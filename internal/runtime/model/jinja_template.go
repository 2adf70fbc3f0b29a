package model

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// JinjaTemplate renders a GGUF's tokenizer.chat_template with gonja, a
// maintained Go implementation of Jinja, configured as transformers'
// apply_chat_template configures Jinja (trim_blocks, lstrip_blocks, loop
// controls, raise_exception, strftime_now, a tojson that writes what
// Python's json.dumps writes), so a model formats messages, tools, tool
// calls and tool results as its authors wrote.
type JinjaTemplate struct {
	source   string
	tmpl     *exec.Template
	bos, eos string
	format   ToolFormat
	// nullContent: the template sees a null content as None even in a
	// message with tool calls (it renders none; see messageValue).
	nullContent bool
	// family is the built-in format the source uses, if any: it names the
	// end-of-turn tokens.
	family ChatTemplate
	// Now is the clock of strftime_now (default time.Now).
	Now func() time.Time
}

// ErrTemplate marks errors of the template itself (raise_exception, a
// failed expression): the request it rendered is at fault or unsupported.
var ErrTemplate = errors.New("chat template")

var jinjaEnv = newJinjaEnv()

// newJinjaEnv is gonja's default environment with transformers' additions
// and Python-compatible tojson, items, keys, values and list.
func newJinjaEnv() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{})
	filters.Update(builtins.Filters)
	_ = filters.Replace("tojson", filterToJSON)
	_ = filters.Replace("list", filterList)
	dict := map[string]exec.Method[map[string]any]{}
	for _, name := range []string{"get", "update", "pop", "setdefault", "copy"} {
		if m, ok := builtins.Methods.Dict.Get(name); ok {
			dict[name] = m
		}
	}
	dict["items"] = dictItems
	dict["keys"] = dictKeys
	dict["values"] = dictValues
	methods := builtins.Methods
	methods.Dict = exec.NewMethodSet(dict)
	return &exec.Environment{
		Context:           exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables),
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           methods,
	}
}

// NewJinjaTemplate parses source. bos and eos are the texts of the
// model's BOS and EOS tokens (bos_token, eos_token in the template).
func NewJinjaTemplate(source, bos, eos string) (*JinjaTemplate, error) {
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	cfg.KeepTrailingNewline = false
	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, err
	}
	shifted, err := loaders.NewShiftedLoader("chat_template", strings.NewReader(source), loader)
	if err != nil {
		return nil, err
	}
	t, err := exec.NewTemplate("chat_template", cfg, shifted, jinjaEnv)
	if err != nil {
		return nil, fmt.Errorf("parse chat template: %w", err)
	}
	j := &JinjaTemplate{source: source, tmpl: t, bos: bos, eos: eos, format: toolFormatOf(source), Now: time.Now,
		nullContent: !strings.Contains(source, "tool_calls")}
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
	var order orderedMaps
	defer order.release()
	ctx, err := j.context(c, &order)
	if err != nil {
		return "", err
	}
	out, err := j.tmpl.ExecuteToString(exec.NewContext(ctx))
	if err != nil {
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

// templateMessage extracts raise_exception's message from gonja's
// wrapped error, else the whole error.
func templateMessage(err error) string {
	var r *raised
	if errors.As(err, &r) {
		return r.msg
	}
	s := err.Error()
	if i := strings.Index(s, raisedPrefix); i >= 0 {
		return s[i+len(raisedPrefix):]
	}
	return s
}

const raisedPrefix = "raise_exception: "

type raised struct{ msg string }

func (r *raised) Error() string { return raisedPrefix + r.msg }

func (j *JinjaTemplate) context(c *Chat, order *orderedMaps) (map[string]any, error) {
	msgs := make(jinjaList, len(c.Messages))
	for i, m := range c.Messages {
		v, err := messageValue(m, j.nullContent, order)
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
		"raise_exception": func(msg string) (string, error) {
			return "", &raised{msg: msg}
		},
		"strftime_now": func(format string) string {
			now := j.Now
			if now == nil {
				now = time.Now
			}
			return strftime(now(), format)
		},
	}
	if len(c.Tools) > 0 {
		tools := make(jinjaList, len(c.Tools))
		for i, t := range c.Tools {
			v, err := decodeOrdered(t, order)
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
		v, err := decodeOrdered(raw, order)
		if err != nil {
			return nil, fmt.Errorf("chat_template_kwargs.%s: %w", k, err)
		}
		ctx[k] = v
	}
	return ctx, nil
}

// messageValue is a message as templates expect it (the OpenAI shape,
// tool-call arguments decoded into an object, as vLLM passes them).
// nullContent is false for a template that renders tool calls: there the
// null content of a message that calls tools is "" (llama.cpp's rule,
// common/chat.cpp requires_non_null_content), as such templates concatenate
// it or test it as a string.
func messageValue(m Message, nullContent bool, order *orderedMaps) (map[string]any, error) {
	v := map[string]any{"role": m.Role}
	keys := []string{"role", "content"}
	if m.ContentNull && (nullContent || len(m.ToolCalls) == 0) {
		v["content"] = nil
	} else {
		v["content"] = m.Content
	}
	if m.Name != "" {
		v["name"] = m.Name
		keys = append(keys, "name")
	}
	if len(m.ToolCalls) > 0 {
		calls := make(jinjaList, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			var args any = map[string]any{}
			if strings.TrimSpace(tc.Arguments) != "" {
				a, err := decodeOrdered([]byte(tc.Arguments), order)
				if err != nil {
					return nil, fmt.Errorf("tool_calls[%d].function.arguments is not JSON: %w", i, err)
				}
				args = a
			}
			fn := map[string]any{"name": tc.Name, "arguments": args}
			order.record(fn, []string{"name", "arguments"})
			call := map[string]any{"id": tc.ID, "type": "function", "function": fn}
			order.record(call, []string{"id", "type", "function"})
			calls[i] = call
		}
		v["tool_calls"] = calls
		keys = append(keys, "tool_calls")
	}
	if m.ToolCallID != "" {
		v["tool_call_id"] = m.ToolCallID
		keys = append(keys, "tool_call_id")
	}
	if m.ReasoningContent != "" {
		v["reasoning_content"] = m.ReasoningContent
		keys = append(keys, "reasoning_content")
	}
	order.record(v, keys)
	return v, nil
}

// Python-compatible filters and methods.

func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p := pyJSON{}
	if v, ok := params.KwArgs["indent"]; ok && !v.IsNil() {
		if !v.IsInteger() {
			return exec.AsValue(fmt.Errorf("tojson: indent must be an integer"))
		}
		p.indent = strings.Repeat(" ", v.Integer())
	}
	if v, ok := params.KwArgs["sort_keys"]; ok && v.IsTrue() {
		p.sortKeys = true
	}
	if len(params.Args) > 0 && params.Args[0].IsInteger() {
		p.indent = strings.Repeat(" ", params.Args[0].Integer())
	}
	if err := p.value(in, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(string(p.buf))
}

func filterList(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsString() {
		out := jinjaList{}
		for _, r := range in.String() {
			out = append(out, string(r))
		}
		return exec.AsValue(out)
	}
	out := jinjaList{}
	in.Iterate(func(_, _ int, key, _ *exec.Value) bool {
		out = append(out, key.Interface())
		return true
	}, func() {})
	return exec.AsValue(out)
}

// selfMap is the template's own map behind a method call (gonja hands
// methods a copy, which has lost the recorded key order).
func selfMap(self map[string]any, selfValue *exec.Value) reflect.Value {
	if selfValue != nil {
		if m, ok := selfValue.Interface().(map[string]any); ok {
			return reflect.ValueOf(m)
		}
	}
	return reflect.ValueOf(self)
}

// dictMethod is a dict method that takes no arguments and returns a list
// with entry(m, k) for each key k, in the dict's key order: keys, values,
// items.
func dictMethod(entry func(m reflect.Value, k string) any) exec.Method[map[string]any] {
	return func(self map[string]any, selfValue *exec.Value, args *exec.VarArgs) (any, error) {
		if err := args.Take(); err != nil {
			return nil, exec.ErrInvalidCall(err)
		}
		m := selfMap(self, selfValue)
		keys := orderedKeys(m)
		out := make(jinjaList, len(keys))
		for i, k := range keys {
			out[i] = entry(m, k)
		}
		return out, nil
	}
}

var (
	dictKeys   = dictMethod(func(_ reflect.Value, k string) any { return k })
	dictValues = dictMethod(func(m reflect.Value, k string) any { return m.MapIndex(reflect.ValueOf(k)).Interface() })
	dictItems  = dictMethod(func(m reflect.Value, k string) any {
		return jinjaList{k, m.MapIndex(reflect.ValueOf(k)).Interface()}
	})
)

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

package model

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The golden renders of testdata/jinja2 are Python Jinja2's, with
// transformers' settings, of every chat template in llama.cpp's
// models/templates (copied to testdata/jinja2/templates), for each
// conversation of testdata/jinja2/conversations.json. Regenerate them with
// hack/jinja-fixtures.py.

// jinjaMismatches are the template × conversation pairs kvpilot does not
// render as Python does, each with the reason. Keys are
// "<template>/<conversation>".
var jinjaMismatches = map[string]string{}

// jinjaFixtureNow is the clock hack/jinja-fixtures.py fixes.
var jinjaFixtureNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

type jinjaConversation struct {
	Messages []struct {
		Role             string  `json:"role"`
		Content          *string `json:"content"`
		Name             string  `json:"name"`
		ReasoningContent string  `json:"reasoning_content"`
		ToolCallID       string  `json:"tool_call_id"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools               []json.RawMessage          `json:"tools"`
	AddGenerationPrompt bool                       `json:"add_generation_prompt"`
	Kwargs              map[string]json.RawMessage `json:"kwargs"`
}

func (c jinjaConversation) chat() *Chat {
	ch := &Chat{Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, Kwargs: c.Kwargs}
	for _, m := range c.Messages {
		mm := Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		if m.Content == nil {
			mm.ContentNull = true
		} else {
			mm.Content = *m.Content
		}
		for _, tc := range m.ToolCalls {
			mm.ToolCalls = append(mm.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
		}
		ch.Messages = append(ch.Messages, mm)
	}
	return ch
}

// jinjaExpected is one case of a template's expected/<template>.json:
// exactly one field is set.
type jinjaExpected struct {
	Output         *string `json:"output"`
	RaiseException *string `json:"raise_exception"`
	Error          *string `json:"error"`
	ParseError     *string `json:"parse_error"`
}

type jinjaExpectedFile struct {
	BOS   string                   `json:"bos_token"`
	EOS   string                   `json:"eos_token"`
	Cases map[string]jinjaExpected `json:"cases"`
}

func TestJinjaTemplatesMatchPythonJinja2(t *testing.T) {
	const dir = "testdata/jinja2"
	b, err := os.ReadFile(filepath.Join(dir, "conversations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var convs map[string]jinjaConversation
	if err := json.Unmarshal(b, &convs); err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "templates", "*.jinja"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no templates in %s: %v", dir, err)
	}
	matched, total := 0, 0
	seen := map[string]bool{}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jinja")
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "expected", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var exp jinjaExpectedFile
		if err := json.Unmarshal(b, &exp); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		caseNames := make([]string, 0, len(exp.Cases))
		for c := range exp.Cases {
			caseNames = append(caseNames, c)
		}
		sort.Strings(caseNames)
		j, parseErr := NewJinjaTemplate(string(src), exp.BOS, exp.EOS)
		if j != nil {
			j.Now = func() time.Time { return jinjaFixtureNow }
		}
		for _, c := range caseNames {
			key := name + "/" + c
			total++
			conv, ok := convs[c]
			if !ok {
				t.Fatalf("%s: no conversation %q", key, c)
			}
			problem := jinjaCaseProblem(j, parseErr, conv, exp.BOS, exp.Cases[c])
			reason, excused := jinjaMismatches[key]
			seen[key] = true
			switch {
			case problem == "" && excused:
				t.Errorf("%s matches Python now: remove it from jinjaMismatches (%s)", key, reason)
			case problem == "":
				matched++
			case !excused:
				t.Errorf("%s: %s", key, problem)
			}
		}
	}
	for key := range jinjaMismatches {
		if !seen[key] {
			t.Errorf("jinjaMismatches names %s, which has no fixture", key)
		}
	}
	t.Logf("%d of %d template × conversation renders match Python Jinja2", matched, total)
}

// jinjaCaseProblem is why kvpilot's render of conv differs from Python's,
// or "".
func jinjaCaseProblem(j *JinjaTemplate, parseErr error, conv jinjaConversation, bos string, want jinjaExpected) string {
	if want.ParseError != nil {
		if parseErr == nil {
			return "parsed; Python refuses it: " + *want.ParseError
		}
		return ""
	}
	if parseErr != nil {
		return "parse: " + parseErr.Error()
	}
	got, err := j.Render(conv.chat())
	switch {
	case want.Output != nil:
		if err != nil {
			return "render: " + err.Error()
		}
		// Render leaves BOS to the tokenizer.
		w := *want.Output
		if bos != "" {
			w = strings.TrimPrefix(w, bos)
		}
		if got != w {
			return "render differs:\n" + firstDiff(got, w)
		}
	case want.RaiseException != nil:
		if err == nil || !errors.Is(err, ErrTemplate) || !strings.HasSuffix(err.Error(), ": "+*want.RaiseException) {
			return "want raise_exception(" + *want.RaiseException + "), got " + errString(err)
		}
	case want.Error != nil:
		if err == nil || !errors.Is(err, ErrTemplate) {
			return "want an ErrTemplate as Python's " + *want.Error + ", got " + errString(err)
		}
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// firstDiff shows where got and want part.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-80)
	clip := func(s string) string { return s[min(from, len(s)):min(i+120, len(s))] }
	return "  at byte " + itoa(i) + "\n   got …" + quote(clip(got)) + "\n  want …" + quote(clip(want))
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// BenchmarkJinjaRender renders a conversation with tool calls through
// real templates, as every chat request does.
func BenchmarkJinjaRender(b *testing.B) {
	raw, err := os.ReadFile("testdata/jinja2/conversations.json")
	if err != nil {
		b.Fatal(err)
	}
	var convs map[string]jinjaConversation
	if err := json.Unmarshal(raw, &convs); err != nil {
		b.Fatal(err)
	}
	chat := convs["parallel_tool_calls"].chat()
	for _, name := range []string{"Qwen3.5-4B", "openai-gpt-oss-120b", "meta-llama-Llama-3.1-8B-Instruct"} {
		src, err := os.ReadFile(filepath.Join("testdata/jinja2/templates", name+".jinja"))
		if err != nil {
			b.Fatal(err)
		}
		j, err := NewJinjaTemplate(string(src), "", "")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				_, _ = j.Render(chat)
			}
		})
	}
}

// TestJinjaLongConversationWithinBounds: the engine's work bounds leave
// room for long agent sessions through real templates (some of which look
// at every later message for each message).
func TestJinjaLongConversationWithinBounds(t *testing.T) {
	var msgs []Message
	for i := range 2000 {
		switch i % 4 {
		case 0:
			msgs = append(msgs, Message{Role: "user", Content: "question " + itoa(i)})
		case 1:
			msgs = append(msgs, Message{Role: "assistant", ContentNull: true, ToolCalls: []ToolCall{{ID: "a1b2c3d4e", Name: "get_weather", Arguments: `{"location": "Paris"}`}}})
		case 2:
			msgs = append(msgs, Message{Role: "tool", Content: `{"temperature": 18}`, ToolCallID: "a1b2c3d4e"})
		default:
			msgs = append(msgs, Message{Role: "assistant", Content: "answer " + itoa(i), ReasoningContent: "thinking " + itoa(i)})
		}
	}
	msgs = append(msgs, Message{Role: "user", Content: "last"})
	for _, name := range []string{"Qwen-Qwen3-0.6B", "openai-gpt-oss-120b", "GLM-4.7-Flash", "deepseek-ai-DeepSeek-V3.1", "MiniMax-M2", "Qwen3.5-4B"} {
		src, err := os.ReadFile(filepath.Join("testdata/jinja2/templates", name+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		j, err := NewJinjaTemplate(string(src), "", "")
		if err != nil {
			t.Fatal(err)
		}
		out, err := j.Render(&Chat{Messages: msgs, AddGenerationPrompt: true})
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if !strings.Contains(out, "question 1996") {
			t.Errorf("%s: the render lacks a late message", name)
		}
	}
}

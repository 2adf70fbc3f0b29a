package model

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fixtures are the templates Qwen2.5, Llama 3.2 and Mistral (with
// tools) ship; each case's .want is what Python's Jinja2 renders with
// transformers' settings (trim_blocks, lstrip_blocks, tojson as
// json.dumps, strftime_now fixed to 23 Nov 2026).
type fixtureCase struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
}

func loadCases(t testing.TB) []fixtureCase {
	b, err := os.ReadFile("testdata/chat_templates/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []fixtureCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func (c fixtureCase) chat() *Chat {
	ch := &Chat{Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt}
	for _, m := range c.Messages {
		mm := Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			mm.ToolCalls = append(mm.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
		}
		ch.Messages = append(ch.Messages, mm)
	}
	return ch
}

func fixture(t testing.TB, name string) *JinjaTemplate {
	src, err := os.ReadFile(filepath.Join("testdata/chat_templates", name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJinjaTemplate(string(src), "<s>", "</s>")
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	j.Now = func() time.Time { return time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) }
	return j
}

func TestJinjaTemplatesMatchPython(t *testing.T) {
	cases := loadCases(t)
	for _, name := range []string{"qwen2.5", "llama3.2", "mistral"} {
		j := fixture(t, name)
		for i, c := range cases {
			want, err := os.ReadFile(filepath.Join("testdata/chat_templates", name+".case"+string(rune('0'+i))+".want"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := j.Render(c.chat())
			if err != nil {
				t.Fatalf("%s case %d: %v", name, i, err)
			}
			// Render leaves BOS to the tokenizer.
			if w := strings.TrimPrefix(string(want), "<s>"); got != w {
				t.Errorf("%s case %d:\n got %q\nwant %q", name, i, got, w)
			}
		}
	}
	for name, want := range map[string]ToolFormat{"qwen2.5": ToolFormatHermes, "llama3.2": ToolFormatLlama3JSON, "mistral": ToolFormatMistral} {
		if got := fixture(t, name).ToolFormat(); got != want {
			t.Errorf("%s: tool format %q, want %q", name, got, want)
		}
	}
}

func TestJinjaRaiseExceptionAndContinue(t *testing.T) {
	j := fixture(t, "mistral")
	_, err := j.Render(&Chat{Messages: []Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}})
	if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "must alternate") {
		t.Errorf("raise_exception: got %v", err)
	}
	q := fixture(t, "qwen2.5")
	got, err := q.Render(&Chat{Messages: []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "Hello the"}}, AddGenerationPrompt: true, ContinueFinalMessage: true})
	if err != nil || !strings.HasSuffix(got, "<|im_start|>assistant\nHello the") {
		t.Errorf("continue_final_message: %q, %v", got, err)
	}
	got, _ = q.Render(&Chat{Messages: []Message{{Role: "user", Content: "hi"}}, AddGenerationPrompt: false})
	if strings.HasSuffix(got, "<|im_start|>assistant\n") {
		t.Errorf("add_generation_prompt false still adds it: %q", got)
	}
}

// FuzzJinjaRender: any template text either fails to parse or renders
// (or refuses) without panicking.
func FuzzJinjaRender(f *testing.F) {
	for _, name := range []string{"qwen2.5", "llama3.2", "mistral"} {
		src, _ := os.ReadFile(filepath.Join("testdata/chat_templates", name+".jinja"))
		f.Add(string(src), "hello")
	}
	f.Add("{% for m in messages %}{{ m.content[-1] }}{% break %}{% endfor %}{{ tools|tojson(indent=2) }}", "x")
	f.Fuzz(func(t *testing.T, src, content string) {
		j, err := NewJinjaTemplate(src, "<s>", "</s>")
		if err != nil {
			return
		}
		j.Now = func() time.Time { return time.Unix(0, 0) }
		_, _ = j.Render(&Chat{Messages: []Message{{Role: "user", Content: content}}, AddGenerationPrompt: true,
			Tools: []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}`)}})
	})
}

// TestJinjaDictMethodsKeepKeyOrder: keys(), values() and items() list a
// dict's entries in the order its JSON gave them, as Python's dicts do.
func TestJinjaDictMethodsKeepKeyOrder(t *testing.T) {
	j, err := NewJinjaTemplate(`{% set d = tools[0] %}{{ d.keys()|join(",") }}|{{ d.values()|join(",") }}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}`, "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Render(&Chat{Messages: []Message{{Role: "user", Content: "hi"}},
		Tools: []json.RawMessage{json.RawMessage(`{"z":"1","a":"x","m":"y"}`)}})
	if want := "z,a,m|1,x,y|z=1;a=x;m=y;"; err != nil || got != want {
		t.Fatalf("rendered %q, %v; want %q", got, err, want)
	}
}

// TestJinjaNullContent: the null content of a message that only calls
// tools is "" for a template that renders tool calls (llama.cpp's rule:
// such templates concatenate or test it as a string), and stays None
// elsewhere and in messages without tool calls.
func TestJinjaNullContent(t *testing.T) {
	msgs := []Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ContentNull: true, ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"a": 1}`}}},
		{Role: "assistant", ContentNull: true},
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"renders tool calls", `{% for m in messages %}[{{ m.content is none }}:{{ m.content }}{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments|tojson }}{% endif %}]{% endfor %}`,
			`[False:hi][False:{"a": 1}][True:None]`},
		{"no tool calls", `{% for m in messages %}[{{ m.content is none }}:{{ m.content }}]{% endfor %}`,
			`[False:hi][True:None][True:None]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := NewJinjaTemplate(tc.src, "", "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := j.Render(&Chat{Messages: msgs})
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestJinjaParseErrorNamesConstruct: a template the engine cannot parse
// is an error that names the construct and its line.
func TestJinjaParseErrorNamesConstruct(t *testing.T) {
	for src, want := range map[string]string{
		"a\n{% for m in messages %}{{ m }}":     "line 2: 'for' block is never closed (expected 'endfor')",
		"{% if x %}\n{% endfor %}":              "line 2: unexpected 'endfor' in 'if' block (expected 'endif')",
		"{{ messages[0]['content'] | }}":        "line 1: expected a filter name, got end of print statement",
		"{% include 'other.jinja' %}":           "line 1: unknown statement 'include'",
		"{{ (a if b else c) }}{% set x = (1 if": "line 1: unexpected end of template",
	} {
		_, err := NewJinjaTemplate(src, "", "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", src, err, want)
		}
	}
}

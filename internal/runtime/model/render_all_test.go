package model

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func jinjaFixture(t *testing.T, name string) *JinjaTemplate {
	t.Helper()
	src, err := os.ReadFile("testdata/chat_templates/" + name + ".jinja")
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJinjaTemplate(string(src), "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func inlineTemplate(t *testing.T, src string) *JinjaTemplate {
	t.Helper()
	j, err := NewJinjaTemplate(src, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestRenderAll: every system, developer, user and tool message's text is
// in the prompt, by the two mapping rules, or the render is refused
// naming the message.
func TestRenderAll(t *testing.T) {
	qwen := jinjaFixture(t, "qwen2.5")
	// Renders a developer role of its own, and every other role by name.
	knowsDeveloper := inlineTemplate(t, `{% for m in messages %}{% if m.role == 'developer' %}[dev]{{ m.content }}{% else %}<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}`)
	// Renders a system message only first (as some templates do).
	firstSystemOnly := inlineTemplate(t, `{% for m in messages %}{% if m.role == 'system' and not loop.first %}{% else %}<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}`)
	// Renders tool results as JSON strings (as Llama 3.1's does).
	toolJSON := inlineTemplate(t, `{% for m in messages %}<{{ m.role }}>{% if m.role == 'tool' %}{{ m.content | tojson }}{% else %}{{ m.content }}{% endif %}{% endfor %}`)
	// Renders no tool messages at all.
	noTools := inlineTemplate(t, `{% for m in messages %}{% if m.role != 'tool' %}<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}`)

	msg := func(role, text string) Message { return Message{Role: role, Content: text} }
	tests := []struct {
		name     string
		tmpl     ChatTemplate
		msgs     []Message
		want     []string // in the prompt, in order
		dropped  int      // the message refused, -1 when none
		notInOut []string
	}{
		{"qwen2.5 renders developer messages as system turns", qwen,
			[]Message{msg("developer", "DEV-1"), msg("developer", "DEV-2"), msg("user", "U-1")},
			[]string{"<|im_start|>system\nDEV-1<|im_end|>", "<|im_start|>system\nDEV-2<|im_end|>", "<|im_start|>user\nU-1"}, -1,
			[]string{"You are Qwen"}},
		{"qwen2.5 renders a later system message where it stands", qwen,
			[]Message{msg("system", "S-1"), msg("user", "U-1"), msg("system", "S-2"), msg("user", "U-2")},
			[]string{"system\nS-1", "user\nU-1", "system\nS-2", "user\nU-2"}, -1, nil},
		{"a template with a developer role keeps it", knowsDeveloper,
			[]Message{msg("developer", "D"), msg("user", "U")},
			[]string{"[dev]D", "<user>U"}, -1, []string{"<system>"}},
		{"the built-in ChatML renders developer as system", ChatML{},
			[]Message{msg("developer", "D"), msg("user", "U")},
			[]string{"<|im_start|>system\nD", "<|im_start|>user\nU"}, -1, []string{"developer"}},
		{"a later system message a template drops is merged into the first", firstSystemOnly,
			[]Message{msg("system", "S-1"), msg("user", "U-1"), msg("system", "S-2"), msg("user", "U-2"), msg("system", "S-3")},
			[]string{"<system>S-1\n\nS-2\n\nS-3", "<user>U-1", "<user>U-2"}, -1, nil},
		{"without a first system message one is made", firstSystemOnly,
			[]Message{msg("user", "U-1"), msg("developer", "D-1"), msg("user", "U-2")},
			[]string{"<system>D-1", "<user>U-1", "<user>U-2"}, -1, nil},
		{"tool results as tojson writes them are found", toolJSON,
			[]Message{msg("user", `say "hi" <b>`), {Role: "tool", Content: "line 1\n\"quoted\" <tag> & é"}},
			[]string{`<user>say "hi" <b>`, `<tool>"line 1\n\"quoted\" <tag> & é"`}, -1, nil},
		{"a tool result no rule places is refused", noTools,
			[]Message{msg("user", "U"), {Role: "tool", Content: "RESULT"}},
			nil, 1, nil},
		{"assistant text the template rewrites is not checked", inlineTemplate(t, `{% for m in messages %}<{{ m.role }}>{% if m.role != 'assistant' %}{{ m.content }}{% endif %}{% endfor %}`),
			[]Message{msg("user", "U"), msg("assistant", "A"), msg("user", "V")},
			[]string{"<user>U", "<assistant>", "<user>V"}, -1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]Message(nil), tc.msgs...)
			got, err := RenderAll(tc.tmpl, &Chat{Messages: tc.msgs, AddGenerationPrompt: true})
			for i := range before {
				if before[i].Role != tc.msgs[i].Role || before[i].Content != tc.msgs[i].Content {
					t.Errorf("the caller's messages[%d] changed: %+v", i, tc.msgs[i])
				}
			}
			if tc.dropped >= 0 {
				var d *DroppedError
				if !errors.As(err, &d) || d.Index != tc.dropped || !errors.Is(err, ErrTemplate) {
					t.Fatalf("got %q, %v; want a DroppedError for messages[%d]", got, err, tc.dropped)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			at := 0
			for _, w := range tc.want {
				k := strings.Index(got[at:], w)
				if k < 0 {
					t.Fatalf("prompt %q: %q missing (after offset %d)", got, w, at)
				}
				at += k + len(w)
			}
			for _, w := range tc.notInOut {
				if strings.Contains(got, w) {
					t.Errorf("prompt %q holds %q", got, w)
				}
			}
		})
	}
}

// TestDroppedMessagesOrderedScan: a text that appears in an earlier
// message does not hide a later message the template left out.
func TestDroppedMessagesOrderedScan(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "x"}, {Role: "system", Content: "x"}, {Role: "user", Content: "y"}, {Role: "tool", Content: "gone"}}
	if got := droppedMessages("<user>x<system>x<user>y", msgs); len(got) != 1 || got[0] != 3 {
		t.Errorf("dropped %v; want [3]", got)
	}
}

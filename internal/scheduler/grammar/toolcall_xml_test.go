package grammar

import (
	"context"
	"encoding/json"
	"testing"
)

// TestXMLToolCalls: the Qwen3-Coder and GLM shapes accept the calls their
// templates write (strings as raw text, other values as JSON) and nothing
// else: a value may not contain its closing tag, required arguments are
// required, JSON values follow the schema.
func TestXMLToolCalls(t *testing.T) {
	qwen := XMLToolCallFormat{Open: "<tool_call>\n<function=", NameEnd: ">\n", ArgOpen: "<parameter=", ArgKeyEnd: ">\n",
		ArgClose: "\n</parameter>\n", Close: "</function>\n</tool_call>", Separator: "\n", ValueTag: "</parameter>"}
	glm := XMLToolCallFormat{Open: "<tool_call>", NameEnd: "\n", ArgOpen: "<arg_key>", ArgKeyEnd: "</arg_key>\n<arg_value>",
		ArgClose: "</arg_value>\n", Close: "</tool_call>", ValueTag: "</arg_value>"}
	tools := []ToolSpec{
		{Name: "edit", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","maxLength":20},"line":{"type":"integer"},"mode":{"enum":["a","b"]}},"required":["path"]}`)},
		{Name: "free", Parameters: json.RawMessage(`{}`)},
	}
	g, _, err := CompileXMLToolCalls(context.Background(), qwen, tools, true)
	if err != nil {
		t.Fatal(err)
	}
	call := func(args string) string { return "<tool_call>\n<function=edit>\n" + args + "</function>\n</tool_call>" }
	arg := func(k, v string) string { return "<parameter=" + k + ">\n" + v + "\n</parameter>\n" }
	for _, tc := range []struct {
		out  string
		want bool
	}{
		{call(arg("path", "a.go")), true},
		{call(arg("path", "a.go") + arg("line", "12")), true},
		{call(arg("path", "<html></head></par") + arg("line", "12") + arg("mode", "b")), true},
		{call(arg("path", "x</p<</parameter")), true},
		{call(arg("path", "x</parameter>y")), false},
		{call(arg("path", "x</p</parameter>")), false},
		{call(arg("path", "abcdefghijklmnopqrstu")), false},
		{call(arg("path", "a.go") + arg("line", "twelve")), false},
		{call(arg("path", "a.go") + arg("mode", "c")), false},
		{call(arg("line", "12")), false},
		{call(arg("path", "a")) + "\n" + "<tool_call>\n<function=free>\n" + arg("anything", "goes") + "</function>\n</tool_call>", true},
		{"<tool_call>\n<function=other>\n</function>\n</tool_call>", false},
	} {
		if got := g.Accepts([]byte(tc.out)); got != tc.want {
			t.Errorf("qwen %q: accepted %v, want %v", tc.out, got, tc.want)
		}
	}
	g, _, err = CompileXMLToolCalls(context.Background(), glm, tools[:1], false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		out  string
		want bool
	}{
		{"<tool_call>edit\n<arg_key>path</arg_key>\n<arg_value>a b</arg_value>\n<arg_key>line</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", true},
		{"<tool_call>edit\n<arg_key>path</arg_key>\n<arg_value>a</arg_value></arg_value>\n</tool_call>", false},
		{"<tool_call>edit\n</tool_call>", false},
	} {
		if got := g.Accepts([]byte(tc.out)); got != tc.want {
			t.Errorf("glm %q: accepted %v, want %v", tc.out, got, tc.want)
		}
	}
}

// TestHeaderToolCalls: harmony's shape, the name in the header and the
// arguments JSON valid for the schema.
func TestHeaderToolCalls(t *testing.T) {
	f := HeaderToolCallFormat{Open: "<|channel|>commentary to=functions.", NameEnd: " <|constrain|>json<|message|>"}
	g, _, err := CompileHeaderToolCalls(context.Background(), f, []ToolSpec{{Name: "get", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	for out, want := range map[string]bool{
		`<|channel|>commentary to=functions.get <|constrain|>json<|message|>{"n": 3}`:   true,
		`<|channel|>commentary to=functions.get <|constrain|>json<|message|>{"n": "3"}`: false,
		`<|channel|>commentary to=functions.put <|constrain|>json<|message|>{"n": 3}`:   false,
	} {
		if got := g.Accepts([]byte(out)); got != want {
			t.Errorf("%q: accepted %v, want %v", out, got, want)
		}
	}
}

// TestPythonicToolCalls: the pythonic shape writes keyword arguments in
// the schema's order, required ones always, comma-separated with no
// leading or doubled comma, each value JSON valid for its schema.
func TestPythonicToolCalls(t *testing.T) {
	tools := []ToolSpec{
		{Name: "edit", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"line":{"type":"integer"},"mode":{"enum":["a","b"]}},"required":["line"]}`)},
		{Name: "opt", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"integer"}}}`)},
		{Name: "free", Parameters: json.RawMessage(`{}`)},
	}
	g, _, err := CompilePythonicToolCalls(context.Background(), PythonicToolCallFormat{Begin: "<|tool_call_start|>", End: "<|tool_call_end|>"}, tools, true)
	if err != nil {
		t.Fatal(err)
	}
	for out, want := range map[string]bool{
		`<|tool_call_start|>[edit(line=3)]<|tool_call_end|>`:                                                   true,
		`<|tool_call_start|>[edit(path="a.go", line=3, mode="b")]<|tool_call_end|>`:                            true,
		`<|tool_call_start|>[edit(path="a.go", line=3), opt(), free(x=[1], y_2={"k": null})]<|tool_call_end|>`: true,
		`<|tool_call_start|>[opt(b=2)]<|tool_call_end|>`:                                                       true,
		`<|tool_call_start|>[opt(a=true, b=2)]<|tool_call_end|>`:                                               true,
		`<|tool_call_start|>[edit(path="a.go")]<|tool_call_end|>`:                                              false, // line is required
		`<|tool_call_start|>[edit(line=3, path="a.go")]<|tool_call_end|>`:                                      false, // schema order
		`<|tool_call_start|>[edit(line="3")]<|tool_call_end|>`:                                                 false,
		`<|tool_call_start|>[edit(line=3, mode="c")]<|tool_call_end|>`:                                         false,
		`<|tool_call_start|>[opt(, b=2)]<|tool_call_end|>`:                                                     false,
		`<|tool_call_start|>[other()]<|tool_call_end|>`:                                                        false,
		`[edit(line=3)]`: false,
	} {
		if got := g.Accepts([]byte(out)); got != want {
			t.Errorf("%q: accepted %v, want %v", out, got, want)
		}
	}
}

package chatformat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// parseCase is one output and what reading it must give, whatever the
// pieces it arrives in.
type parseCase struct {
	name   string
	out    string
	opts   Options
	want   Result
	tools  []Tool
	noCall bool // expected no call (want.Calls nil)
}

// Tools of llama.cpp's test-chat.cpp.
var (
	specialFunction = Tool{Name: "special_function", Parameters: json.RawMessage(`{"type":"object","properties":{"arg1":{"type":"integer","description":"The arg."}},"required":["arg1"]}`)}
	specialWithOpt  = Tool{Name: "special_function_with_opt", Parameters: json.RawMessage(`{"type":"object","properties":{"arg1":{"type":"integer"},"arg2":{"type":"integer"}},"required":["arg1"]}`)}
	pythonTool      = Tool{Name: "python", Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`)}
	htmlTool        = Tool{Name: "html", Parameters: json.RawMessage(`{"type":"object","properties":{"markup":{"type":"string"}},"required":["markup"]}`)}
	editTool        = Tool{Name: "edit", Parameters: json.RawMessage(`{"type":"object","properties":{"filename":{"type":"string"},"oldString":{"type":"string"},"newString":{"type":"string"},"replaceAll":{"type":"boolean"}},"required":["filename","oldString","newString"]}`)}
	terminalTool    = Tool{Name: "run_in_terminal", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}
	noArgsTool      = Tool{Name: "read_file_diff_md", Parameters: json.RawMessage(`{"type":"object","properties":{"review_id":{"type":"string"},"file_id":{"type":"string"}}}`)}
	typedTool       = Tool{Name: "typed", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"},"b":{"type":"boolean"},"o":{"type":"object"},"a":{"type":"array"},"s":{"type":"string"},"u":{"anyOf":[{"type":"integer"},{"type":"null"}]}}}`)}
	allTools        = []Tool{specialFunction, specialWithOpt, pythonTool, htmlTool, editTool, terminalTool, noArgsTool, typedTool}
)

func calls(nameArgs ...string) []Call {
	var out []Call
	for i := 0; i+1 < len(nameArgs); i += 2 {
		out = append(out, Call{Name: nameArgs[i], Arguments: nameArgs[i+1]})
	}
	return out
}

// runChunked feeds out to a new parser step bytes at a time.
func runChunked(s Spec, o Options, out string, step int) Result {
	p := s.NewParser(o)
	var r Result
	for i := 0; i < len(out); i += step {
		evs := p.Feed([]byte(out[i:min(i+step, len(out))]))
		checkEvents(evs)
		r.Collect(evs)
	}
	r.Collect(p.Finish())
	return r
}

// checkEvents panics on events a consumer cannot use: empty text pieces.
func checkEvents(evs []Event) {
	for _, e := range evs {
		if (e.Kind == EventText || e.Kind == EventReasoning) && len(e.Text) == 0 {
			panic("empty text event")
		}
	}
}

// sameResult compares content and reasoning trimmed (blanks before a
// marker stream before the marker is known) and arguments as JSON.
func sameResult(got, want Result) bool {
	if strings.TrimSpace(got.Content) != strings.TrimSpace(want.Content) || got.Reasoning != want.Reasoning || len(got.Calls) != len(want.Calls) {
		return false
	}
	for i := range got.Calls {
		if got.Calls[i].Name != want.Calls[i].Name {
			return false
		}
		if got.Calls[i].Arguments == want.Calls[i].Arguments {
			continue // also arguments a cut left incomplete
		}
		var a, b any
		if json.Unmarshal([]byte(got.Calls[i].Arguments), &a) != nil || json.Unmarshal([]byte(want.Calls[i].Arguments), &b) != nil || !reflect.DeepEqual(a, b) {
			return false
		}
	}
	return true
}

// runCases checks every case fed in pieces of every size from one byte to
// the whole output.
func runCases(t *testing.T, format string, reasoning string, cases []parseCase) {
	t.Helper()
	f, err := Lookup(format)
	if format == "" {
		f, err = nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := Spec{Tools: f, Reasoning: reasoning}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			if o.Tools == nil && o.Calls {
				o.Tools = allTools
			}
			for step := 1; step <= len(tc.out); step++ {
				got := runChunked(s, o, tc.out, step)
				if !sameResult(got, tc.want) {
					t.Fatalf("pieces of %d bytes:\n got %+v\nwant %+v", step, got, tc.want)
				}
			}
		})
	}
}

var withCalls = Options{Calls: true}

func TestDetectTable(t *testing.T) {
	// The reference templates of llama.cpp's models/templates (read with
	// llamacpp.Source in detect_templates_test.go) and the formats they
	// write, checked against the markup each renders for calls.
	for src, want := range map[string]Spec{
		"{{ '<tool_call>' }}{\"name\"":            {Tools: hermes},
		"<|start_header_id|> ipython":             {Tools: llama3JSON},
		"<|channel|> <|message|>":                 {Tools: harmony, Reasoning: ReasoningHarmony},
		"<tool_call><function=x><parameter=y>":    {Tools: qwen3Coder},
		"<think></think><tool_call><arg_key>":     {Tools: glm45, Reasoning: ReasoningThink},
		"[TOOL_CALLS][ARGS]":                      {Tools: mistralArgs},
		"[TOOL_CALLS]":                            {Tools: mistral},
		"<|tool_list_start|>[ ]<|tool_list_end|>": {Tools: lfm2},
		"List of tools: [ <think></think>":        {Tools: lfm2, Reasoning: ReasoningThink},
		// vLLM's Llama 3.2 pythonic template: Llama 3's headers and
		// "parameters", but the pythonic instruction.
		"<|start_header_id|> \"parameters\" [func_name1(params_name1=params_value1": {Tools: pythonic},
		"{{ messages }}": {},
		"<think> </think> <tool_call> <tool_calls>":     {Reasoning: ReasoningThink},
		"]<]minimax[>[<tool_call> <invoke name=":        {},
		"<think>\\n\\n</think> <tool_call>{\"name\": }": {Tools: hermes, Reasoning: ReasoningThink},
	} {
		if got := Detect(src); got != want {
			t.Errorf("Detect(%q) = %s/%q, want %s/%q", src, got.ToolsName(), got.Reasoning, want.ToolsName(), want.Reasoning)
		}
	}
}

// TestOverride: the runtime's flags replace or remove the detected
// formats; unknown names and harmony reasoning without harmony calls are
// errors naming them.
func TestOverride(t *testing.T) {
	qwen3 := Spec{Tools: hermes, Reasoning: ReasoningThink}
	for _, tc := range []struct {
		tools, reasoning string
		want             Spec
		err              bool
	}{
		{"", "", qwen3, false},
		{"qwen3_coder", "", Spec{Tools: qwen3Coder, Reasoning: ReasoningThink}, false},
		{"none", "none", Spec{}, false},
		{"harmony", "", Spec{Tools: harmony, Reasoning: ReasoningThink}, true},
		{"harmony", "harmony", Spec{Tools: harmony, Reasoning: ReasoningHarmony}, false},
		{"", "harmony", Spec{}, true},
		{"qwen3", "", Spec{}, true},
		{"", "deepseek", Spec{}, true},
	} {
		got, err := qwen3.Override(tc.tools, tc.reasoning)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("Override(%q, %q) = %s/%q, %v", tc.tools, tc.reasoning, got.ToolsName(), got.Reasoning, err)
		}
	}
}

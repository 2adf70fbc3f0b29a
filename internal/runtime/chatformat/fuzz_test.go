package chatformat

import (
	"testing"
)

// FuzzParsers feeds any output to every format's parser, with reasoning
// on and the prompt's reasoning open or not, whole and in pieces of a
// few bytes: no parser may panic or emit an empty text event, and the
// pieces give what the whole gives. testdata/fuzz/FuzzParsers holds the
// inputs `go test -fuzz FuzzParsers` found failing once (it writes them
// there), kept as regression cases.
func FuzzParsers(f *testing.F) {
	for _, seed := range []string{
		"<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
		"<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
		"<think>x</think><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
		"<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
		"[TOOL_CALLS]f[ARGS]{\"a\": [1]}",
		"[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}]",
		"<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">1</parameter>\n</invoke>\n</minimax:tool_call>",
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
		"{\"name\": \"f\", \"parameters\": {\"a\": \"}\"}}",
		"[f(a='x\\n', b=[1, 2.5, True], c={'k': None}, d=\"\"\"q\"\"\")]",
		"A<|tool_call_start|>[f(a=\"\\u00e9\\x41\"), g()]<|tool_call_end|>B",
	} {
		f.Add(seed, uint8(3), true)
	}
	f.Fuzz(func(t *testing.T, out string, step uint8, open bool) {
		if len(out) > 4096 {
			return
		}
		n := int(step%16) + 1
		for _, fm := range formats {
			reasoning := ReasoningThink
			if fm.ownsReasoning {
				reasoning = ReasoningHarmony
			}
			s := Spec{Tools: fm, Reasoning: reasoning}
			o := Options{Calls: true, Reasoning: true, InReasoning: open, Tools: allTools}
			whole := runChunked(s, o, out, max(1, len(out)))
			if got := runChunked(s, o, out, n); !sameResult(got, whole) {
				t.Fatalf("%s, pieces of %d: %+v; whole: %+v", fm.Name, n, got, whole)
			}
		}
	})
}

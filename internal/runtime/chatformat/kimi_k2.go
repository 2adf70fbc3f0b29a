package chatformat

import "strings"

// kimiK2 is Kimi K2's calls, between its special tokens, each named by an
// id "functions.NAME:INDEX":
//
//	<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_calls_section_end|>
var kimiK2 = &Format{
	Name:   "kimi_k2",
	detect: func(src string) bool { return strings.Contains(src, "<|tool_calls_section_begin|>") },
	calls: func(*Options) Parser {
		return &delimitedCalls{syn: &delimitedSyntax{
			sectionBegin: "<|tool_calls_section_begin|>", sectionEnd: "<|tool_calls_section_end|>",
			callBegin: "<|tool_call_begin|>", argsBegin: "<|tool_call_argument_begin|>", callEnd: "<|tool_call_end|>",
			name: kimiName,
		}}
	},
	callOpen:          []string{"<|tool_calls_section_begin|>"},
	KeepSpecialTokens: true,
	CallIDLen:         24,
	// The id's index is 0 for every forced call: the reader takes only
	// the name from it, and the response gives each call its own id.
	Forced: &Forced{
		Header: &HeaderShape{Begin: "<|tool_calls_section_begin|>", End: "<|tool_calls_section_end|>",
			Open: "<|tool_call_begin|>functions.", NameEnd: ":0<|tool_call_argument_begin|>", Close: "<|tool_call_end|>"},
		SpecialTokens: []string{"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"},
	},
}

// kimiName is the function an id "functions.NAME:INDEX" names (a bare
// "NAME:INDEX" or "NAME" too).
func kimiName(id string) string {
	id = strings.TrimPrefix(id, "functions.")
	if i := strings.LastIndexByte(id, ':'); i >= 0 {
		id = id[:i]
	}
	if strings.ContainsAny(id, " \t\r\n<>") {
		return ""
	}
	return id
}

package chatformat

import "strings"

// deepseekR1 is DeepSeek-R1's calls (and its distills'): the call's type,
// then its name, then the arguments in a fenced JSON block, between
// special tokens:
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//	```json
//	{…}
//	```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
var deepseekR1 = &Format{
	Name: "deepseek_r1",
	detect: func(src string) bool {
		return strings.Contains(src, "<｜tool▁calls▁begin｜>") && strings.Contains(src, "```json")
	},
	calls: func(*Options) Parser {
		return &delimitedCalls{syn: &delimitedSyntax{
			sectionBegin: "<｜tool▁calls▁begin｜>", sectionEnd: "<｜tool▁calls▁end｜>",
			callBegin: "<｜tool▁call▁begin｜>", argsBegin: "```json", callEnd: "```<｜tool▁call▁end｜>",
			name: deepseekR1Name,
		}}
	},
	callOpen:          []string{"<｜tool▁calls▁begin｜>"},
	KeepSpecialTokens: true,
	CallIDLen:         24,
	Forced: &Forced{
		Header: &HeaderShape{Begin: "<｜tool▁calls▁begin｜>", End: "<｜tool▁calls▁end｜>",
			Open: "<｜tool▁call▁begin｜>function<｜tool▁sep｜>", NameEnd: "\n```json\n", Close: "\n```<｜tool▁call▁end｜>"},
		SpecialTokens: []string{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"},
	},
}

// deepseekR1Name is the function "TYPE<｜tool▁sep｜>NAME" names.
func deepseekR1Name(s string) string {
	_, name, ok := strings.Cut(s, "<｜tool▁sep｜>")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n<>") {
		return ""
	}
	return name
}

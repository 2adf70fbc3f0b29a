package chatformat

import "strings"

// deepseekV31 is DeepSeek V3.1's calls, between its special tokens:
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//
// (DeepSeek-R1's older form, "function<｜tool▁sep｜>NAME" and a fenced
// JSON block, is not this one: its templates write ```json.)
var deepseekV31 = &Format{
	Name: "deepseek_v31",
	detect: func(src string) bool {
		return strings.Contains(src, "<｜tool▁calls▁begin｜>") && !strings.Contains(src, "```json")
	},
	calls: func(*Options) Parser {
		return &delimitedCalls{syn: &delimitedSyntax{
			sectionBegin: "<｜tool▁calls▁begin｜>", sectionEnd: "<｜tool▁calls▁end｜>",
			callBegin: "<｜tool▁call▁begin｜>", argsBegin: "<｜tool▁sep｜>", callEnd: "<｜tool▁call▁end｜>",
			name: func(s string) string { return s },
		}}
	},
	callOpen:          []string{"<｜tool▁calls▁begin｜>"},
	KeepSpecialTokens: true,
	CallIDLen:         24,
	Forced: &Forced{
		Header: &HeaderShape{Begin: "<｜tool▁calls▁begin｜>", End: "<｜tool▁calls▁end｜>",
			Open: "<｜tool▁call▁begin｜>", NameEnd: "<｜tool▁sep｜>", Close: "<｜tool▁call▁end｜>"},
		SpecialTokens: []string{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"},
	},
}

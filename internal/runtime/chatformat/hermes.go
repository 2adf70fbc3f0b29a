package chatformat

import "strings"

// hermes is <tool_call>{"name": …, "arguments": {…}}</tool_call> (Hermes 2
// Pro / 3, Qwen2.5, Qwen3, QwQ, MiMo, Granite 4): the <tool_call> tag with
// none of the markup of the formats that also use it.
var hermes = &Format{
	Name: "hermes",
	detect: func(src string) bool {
		return strings.Contains(src, "<tool_call>") && !strings.Contains(src, "<tool_calls>") &&
			!strings.Contains(src, "<invoke") && !strings.Contains(src, "<arg_key>") && !strings.Contains(src, "<function=")
	},
	calls:     func(*Options) Parser { return &jsonCalls{open: "<tool_call>", close: "</tool_call>"} },
	callOpen:  []string{"<tool_call>"},
	CallIDLen: 24,
	Forced:    &Forced{JSON: &JSONShape{Prefix: "<tool_call>\n", Suffix: "\n</tool_call>", Separator: "\n", ArgsKey: "arguments"}},
}

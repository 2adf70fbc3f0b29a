package chatformat

import "strings"

// qwen3Coder is Qwen3-Coder's and Qwen3.5's XML (also Nemotron 3 Nano and
// Step 3.5): each argument's value is untyped text, converted with the
// tool's schema.
//
//	<tool_call>
//	<function=NAME>
//	<parameter=KEY>
//	VALUE
//	</parameter>
//	</function>
//	</tool_call>
var qwen3Coder = &Format{
	Name: "qwen3_coder",
	detect: func(src string) bool {
		return strings.Contains(src, "<tool_call>") && strings.Contains(src, "<function=") && strings.Contains(src, "<parameter=")
	},
	calls:     func(o *Options) Parser { return newXMLCalls(qwen3CoderSyntax, o) },
	callOpen:  []string{"<tool_call>", "<function="},
	CallIDLen: 24,
	Forced: &Forced{XML: &XMLShape{
		Open: "<tool_call>\n<function=", NameEnd: ">\n",
		ArgOpen: "<parameter=", ArgKeyEnd: ">\n", ArgClose: "\n</parameter>\n",
		Close: "</function>\n</tool_call>", Separator: "\n", ValueTag: "</parameter>",
	}},
}

var qwen3CoderSyntax = &xmlSyntax{
	block: "<tool_call>", blockEnd: "</tool_call>", blockOptional: true,
	funcOpen: "<function=", nameEnd: ">", funcEnd: "</function>",
	argOpen: "<parameter=", keyEnd: ">", argEnd: "</parameter>",
	trimValue: true,
}

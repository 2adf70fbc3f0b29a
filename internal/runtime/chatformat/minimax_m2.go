package chatformat

import "strings"

// minimaxM2 is MiniMax-M2's calls: an <invoke> per call inside one
// <minimax:tool_call> block, a <parameter> tag per argument; string values
// are raw text, others JSON (the template writes them with tojson).
//
//	<minimax:tool_call>
//	<invoke name="NAME">
//	<parameter name="KEY">VALUE</parameter>
//	</invoke>
//	</minimax:tool_call>
var minimaxM2 = &Format{
	Name: "minimax_m2",
	detect: func(src string) bool {
		return strings.Contains(src, "minimax:tool_call") && strings.Contains(src, "<invoke name=")
	},
	calls:     func(o *Options) Parser { return newXMLCalls(minimaxM2Syntax, o) },
	callOpen:  []string{"<minimax:tool_call>"},
	CallIDLen: 24,
	Forced: &Forced{XML: &XMLShape{
		Open: "<minimax:tool_call>\n<invoke name=\"", NameEnd: "\">\n",
		ArgOpen: "<parameter name=\"", ArgKeyEnd: "\">", ArgClose: "</parameter>\n",
		Close: "</invoke>\n</minimax:tool_call>", Separator: "\n", ValueTag: "</parameter>",
	}},
}

var minimaxM2Syntax = &xmlSyntax{
	block: "<minimax:tool_call>", blockEnd: "</minimax:tool_call>",
	funcOpen: "<invoke name=\"", nameEnd: "\">", funcEnd: "</invoke>",
	argOpen: "<parameter name=\"", keyEnd: "\">", argEnd: "</parameter>",
}

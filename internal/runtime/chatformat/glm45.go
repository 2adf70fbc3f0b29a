package chatformat

import "strings"

// glm45 is GLM 4.5 / 4.6 / 4.7's calls (also Spark 2.5, Ling 3, Laguna):
// the name after the tag, then key/value tag pairs; string values are raw
// text, others JSON.
//
//	<tool_call>NAME
//	<arg_key>KEY</arg_key>
//	<arg_value>VALUE</arg_value>
//	</tool_call>
var glm45 = &Format{
	Name: "glm45",
	detect: func(src string) bool {
		return strings.Contains(src, "<tool_call>") && strings.Contains(src, "<arg_key>")
	},
	calls:     func(o *Options) Parser { return newXMLCalls(glm45Syntax, o) },
	callOpen:  []string{"<tool_call>"},
	CallIDLen: 24,
	Forced: &Forced{XML: &XMLShape{
		Open: "<tool_call>", NameEnd: "\n",
		ArgOpen: "<arg_key>", ArgKeyEnd: "</arg_key>\n<arg_value>", ArgClose: "</arg_value>\n",
		Close: "</tool_call>", Separator: "", ValueTag: "</arg_value>",
	}},
}

var glm45Syntax = &xmlSyntax{
	block: "<tool_call>", blockEnd: "</tool_call>",
	nameEnd: "\n",
	argOpen: "<arg_key>", keyEnd: "</arg_key>", valueOpen: "<arg_value>", argEnd: "</arg_value>",
}

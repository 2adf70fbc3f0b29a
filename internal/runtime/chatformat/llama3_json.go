package chatformat

import "strings"

// llama3JSON is Llama 3.1 / 3.2 / 3.3's {"name": …, "parameters": {…}} as
// the whole message, after an optional <|python_tag|>: Llama 3's headers
// with its "parameters" key or its ipython role.
var llama3JSON = &Format{
	Name: "llama3_json",
	detect: func(src string) bool {
		// Functionary (<function=…>, >>>) and FireFunction (functools)
		// share Llama 3's headers but not its calls.
		return strings.Contains(src, "<|start_header_id|>") && (strings.Contains(src, `"parameters"`) || strings.Contains(src, "ipython")) &&
			!strings.Contains(src, "<function=") && !strings.Contains(src, ">>>") && !strings.Contains(src, "functools")
	},
	calls:     func(*Options) Parser { return &jsonCalls{leads: []string{"<|python_tag|>"}, first: "{"} },
	EndTokens: []string{"<|eom_id|>"},
	// <|python_tag|> is a special token: the output keeps it for the
	// reader.
	KeepSpecialTokens: true,
	CallIDLen:         24,
	Forced:            &Forced{JSON: &JSONShape{Separator: "; ", ArgsKey: "parameters"}},
}

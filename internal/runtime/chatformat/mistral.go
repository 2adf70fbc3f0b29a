package chatformat

import "strings"

// mistral is Mistral's older [TOOL_CALLS] [{"name": …, "arguments": {…}}]
// (Mistral Nemo, Mistral 7B v0.3).
var mistral = &Format{
	Name:     "mistral",
	detect:   func(src string) bool { return strings.Contains(src, "[TOOL_CALLS]") },
	calls:    func(*Options) Parser { return &jsonCalls{leads: []string{"[TOOL_CALLS]"}, first: "[{"} },
	callOpen: []string{"[TOOL_CALLS]"},
	// [TOOL_CALLS] is a special token of Mistral's vocabularies: the
	// output keeps it for the reader.
	KeepSpecialTokens: true,
	CallIDLen:         9,
	Forced:            &Forced{JSON: &JSONShape{Open: "[", Close: "]", Separator: ", ", ArgsKey: "arguments"}},
}

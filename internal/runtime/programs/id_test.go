package programs

import (
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		ok       bool
	}{
		{"plain", "session-1", true},
		{"non-ASCII", "agent/é 日本", true},
		{"longest", strings.Repeat("x", MaxIDLen), true},
		{"no-break space", "a\u00a0b", true},
		{"empty", "", false},
		{"too long", strings.Repeat("x", MaxIDLen+1), false},
		{"invalid UTF-8", "a\xffb", false},
		{"tab", "a\tb", false},
		{"DEL", "a\x7fb", false},
		{"first C1 control", "a\u0080b", false},
		{"next line (C1)", "a\u0085b", false},
		{"last C1 control", "a\u009fb", false},
	} {
		if err := CheckID(tc.id); (err == nil) != tc.ok {
			t.Errorf("%s: CheckID(%q) = %v, want ok %v", tc.name, tc.id, err, tc.ok)
		}
	}
}

package archtest

import (
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// KeyEdit sets metadata Key to Value in a file (a nil Value deletes it);
// Want is what ReadConfig's error must say of it.
type KeyEdit = struct {
	Key   string
	Value any
	Want  string
}

// CheckRefused applies each edit alone to FileOf(a, c) and checks that
// a's ReadConfig refuses the file with an error saying its Want.
func CheckRefused(t testing.TB, a arch.Architecture, c arch.Config, edits []KeyEdit) {
	t.Helper()
	for _, e := range edits {
		f := FileOf(a, c)
		if e.Value == nil {
			delete(f.KV, e.Key)
		} else {
			f.KV[e.Key] = e.Value
		}
		if err := a.ReadConfig(f, &arch.Config{Arch: a.Name()}); err == nil || !strings.Contains(err.Error(), e.Want) {
			t.Errorf("%s = %v: error %v, want %q", e.Key, e.Value, err, e.Want)
		}
	}
}

// ConfigEdit changes a Config; Want is what Validate's error must say of
// it.
type ConfigEdit = struct {
	Edit func(*arch.Config)
	Want string
}

// CheckInvalid applies each edit alone to c and checks that a's Validate
// refuses it with an error saying its Want.
func CheckInvalid(t testing.TB, a arch.Architecture, c arch.Config, edits []ConfigEdit) {
	t.Helper()
	for _, e := range edits {
		d := c
		e.Edit(&d)
		if err := a.(arch.Validator).Validate(d); err == nil || !strings.Contains(err.Error(), e.Want) {
			t.Errorf("Validate: %v, want %q", err, e.Want)
		}
	}
}

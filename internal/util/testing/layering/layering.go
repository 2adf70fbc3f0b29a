// Package layering checks, in tests, which packages a package imports:
// the layering a package promises (the operator links no pod code, a wire
// package stays free of the engine).
package layering

import (
	"os/exec"
	"strings"
	"testing"
)

// Deps lists the packages pkg imports, directly or not (go list -deps).
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// RequireNoDeps fails t if pkg imports, directly or not, any package
// (other than itself) whose path is, or is below, one of forbidden:
// layering the package promises.
func RequireNoDeps(t testing.TB, pkg string, forbidden ...string) {
	t.Helper()
	for _, d := range Deps(t, pkg) {
		if d == pkg {
			continue
		}
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("%s imports %s", pkg, d)
			}
		}
	}
}

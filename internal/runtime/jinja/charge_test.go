package jinja

import (
	"errors"
	"strings"
	"testing"
)

// TestRenderChargedCountsTheOutput: a rendering tells its charge of
// OutputMemoryFactor a byte of what it writes, macros' and set blocks'
// text included, before it writes it, ahead by at most a quarter or a
// step; a refusal ends it with the charge's own error.
func TestRenderChargedCountsTheOutput(t *testing.T) {
	tmpl, err := Parse(`{% macro m(x) %}{{ x }}{% endmacro %}{% set s %}{{ x }}{% endset %}{% for i in range(n) %}{{ m(x) }}{{ s }}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	x := strings.Repeat("x", 1000)
	for _, n := range []int{1, 100, 5000} {
		var charged int64
		calls := 0
		out, err := tmpl.RenderCharged(map[string]any{"x": x, "n": n}, func(b int64) error {
			charged += b
			calls++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Each item is written twice: in its macro or block, then out.
		written := int64(len(out) + (n+1)*len(x))
		if lo, hi := OutputMemoryFactor*written, OutputMemoryFactor*max(written*5/4, written+minChargeStep); charged < lo || charged > hi {
			t.Errorf("n=%d: charged %d for %d bytes written, want %d to %d", n, charged, written, lo, hi)
		}
		if calls > 64 {
			t.Errorf("n=%d: charged %d times for %d bytes", n, calls, written)
		}
	}
	busy := errors.New("busy")
	var charged int64
	_, err = tmpl.RenderCharged(map[string]any{"x": x, "n": 5000}, func(b int64) error {
		if charged+b > 1<<20 {
			return busy
		}
		charged += b
		return nil
	})
	if err != busy {
		t.Errorf("a rendering past what its charge allows: %v, want the charge's error as it is", err)
	}
}

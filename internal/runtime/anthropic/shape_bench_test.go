package anthropic

import "testing"

// BenchmarkMessageShapeText is the Messages stream's per-token path: one
// text_delta event into a reused buffer.
func BenchmarkMessageShapeText(b *testing.B) {
	s := NewMessageShape("msg_1", "m")
	buf := s.Text(nil, []byte("x"))
	delta := []byte(" token")
	b.ReportAllocs()
	for b.Loop() {
		buf = s.Text(buf[:0], delta)
	}
}

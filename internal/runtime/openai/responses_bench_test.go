package openai

import "testing"

// BenchmarkResponseShapeText is the Responses stream's per-token path: one
// output_text.delta event into a reused buffer (0 allocs/op once the
// buffers have grown).
func BenchmarkResponseShapeText(b *testing.B) {
	s := NewResponseShape("resp_1", 0, "m", &ResponsesRequest{})
	buf := s.Text(nil, []byte("x"))
	delta := []byte(" token")
	b.ReportAllocs()
	for b.Loop() {
		if s.text.Len() > 1<<20 {
			s.text.Reset()
		}
		buf = s.Text(buf[:0], delta)
	}
}

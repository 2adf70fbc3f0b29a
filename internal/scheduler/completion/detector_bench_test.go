package completion

import (
	"strings"
	"testing"
)

// benchTokens is a chat answer cut into tokens of 1 to 6 bytes, some of
// which split multi-byte runes, as byte-level BPE tokens do.
func benchTokens() [][]byte {
	out := []byte(strings.Repeat("The KV cache holds keys and values of every token; "+
		"vLLM pages it in blocks. 日本語のテキストも混ざる \U0001F600 and "+
		"a partial </ans wer or STO P now and then.\n", 8))
	var toks [][]byte
	for i, n := 0, 0; i < len(out); n++ {
		size := min(1+(n*7)%6, len(out)-i)
		toks = append(toks, out[i:i+size])
		i += size
	}
	return toks
}

func BenchmarkDetectorAdd(b *testing.B) {
	for _, bc := range []struct {
		name  string
		stops []string
	}{
		{"no stop strings", nil},
		{"4 stop strings", []string{"</answer>", "\n\nUser:", "STOP", "<|im_end|>"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := Params{
				MaxTokens:        1 << 30,
				EOSTokenIDs:      []int32{idEOS},
				StopStrings:      bc.stops,
				MaxResponseChars: 1 << 30,
			}
			toks := benchTokens()
			var d Detector
			d.Reset(&p)
			var n int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tk := toks[i%len(toks)]
				if i%len(toks) == 0 {
					d.Reset(&p)
				}
				d.Add(idText, tk, false)
				n += int64(len(tk))
			}
			b.SetBytes(n / int64(max(b.N, 1)))
		})
	}
}

package kvstream

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

var testFormat = batch.BlockFormat{
	Geometry:  kvcache.Geometry{Layers: 2, KVHeads: 1, HeadDim: 4, DType: kvcache.DTypeF32},
	BlockSize: 2, Contents: true,
}

// encode is a stream of blocks blocks in chunks of chunk.
func encode(t testing.TB, f batch.BlockFormat, blocks, chunk int, end bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	toks := make([]int32, blocks*f.BlockSize)
	for i := range toks {
		toks[i] = int32(1000 + i)
	}
	enc, err := NewEncoder(&buf, &Header{Format: f, Salt: 77, Tokens: toks})
	if err != nil {
		t.Fatal(err)
	}
	size := f.BlockBytes()
	for sent := 0; sent < blocks; sent += chunk {
		n := min(chunk, blocks-sent)
		payload := make([]byte, n*size)
		for i := range payload {
			payload[i] = byte(sent*size + i)
		}
		if err := enc.Chunk(n, payload); err != nil {
			t.Fatal(err)
		}
	}
	if end {
		if err := enc.End(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// decodeAll reads a stream to its end and returns the blocks' bytes.
func decodeAll(r io.Reader) (*Header, []byte, error) {
	d, err := NewDecoder(r)
	if err != nil {
		return nil, nil, err
	}
	var all []byte
	for {
		_, data, err := d.Next()
		if err == io.EOF {
			return d.Header(), all, nil
		}
		if err != nil {
			return d.Header(), all, err
		}
		all = append(all, data...)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, f := range []batch.BlockFormat{testFormat, {Geometry: testFormat.Geometry, BlockSize: 4}} {
		h, data, err := decodeAll(bytes.NewReader(encode(t, f, 5, 2, true)))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(f, h.Format); diff != "" || h.Salt != 77 || h.Blocks() != 5 || h.Tokens[0] != 1000 {
			t.Fatalf("header %+v (-want +got format):\n%s", h, diff)
		}
		if len(data) != 5*f.BlockBytes() || (len(data) > 0 && data[len(data)-1] != byte(len(data)-1)) {
			t.Fatalf("%d bytes of contents", len(data))
		}
	}
}

// Every cut of a stream is io.ErrUnexpectedEOF (never a clean end), and
// the chunks before the cut are whole.
func TestTruncatedStreams(t *testing.T) {
	full := encode(t, testFormat, 5, 2, true)
	for cut := range len(full) {
		_, data, err := decodeAll(bytes.NewReader(full[:cut]))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d of %d: %v", cut, len(full), err)
		}
		if b := testFormat.BlockBytes(); len(data) != 0 && len(data) != 2*b && len(data) != 4*b && len(data) != 5*b {
			t.Fatalf("cut at %d: %d bytes of contents, not whole chunks", cut, len(data))
		}
	}
}

func TestCorruptStreams(t *testing.T) {
	full := encode(t, testFormat, 3, 1, true)
	for _, tc := range []struct {
		name string
		at   int
	}{
		{"magic", 0}, {"layers", 5}, {"block size", 21}, {"token", 40}, {"chunk count", len(full) - 8 - 3*(8+testFormat.BlockBytes())},
		{"payload", len(full) - 9}, {"end count", len(full) - 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(full)
			b[tc.at] ^= 0x55
			if _, _, err := decodeAll(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flipped byte %d: %v", tc.at, err)
			}
		})
	}
}

// FuzzDecoder: any bytes decode to a stream, a cut or a corrupt error,
// never a panic or an allocation beyond the bounds.
func FuzzDecoder(f *testing.F) {
	f.Add(encode(f, testFormat, 3, 2, true))
	f.Add(encode(f, testFormat, 3, 2, false))
	f.Add(encode(f, batch.BlockFormat{Geometry: testFormat.Geometry, BlockSize: 16}, 4, 3, true))
	f.Add([]byte("KVX1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, err := decodeAll(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(data) > len(b) || h.Blocks()*h.Format.BlockSize != len(h.Tokens) {
			t.Fatalf("decoded %d bytes of contents and %d tokens from %d bytes", len(data), len(h.Tokens), len(b))
		}
	})
}

// A bounded decoder refuses a header announcing a longer chain than the
// receiver takes, and reads no further than its fixed part: nothing of the
// token ids is read or allocated. A chain of exactly the bound is taken.
func TestBoundedDecoderRefusesLongChains(t *testing.T) {
	stream := encode(t, testFormat, 8, 4, true) // 16 tokens
	r := bytes.NewReader(stream)
	if _, err := NewBoundedDecoder(r, 15); !errors.Is(err, ErrTooLong) {
		t.Fatalf("16 tokens with a bound of 15: %v, want ErrTooLong", err)
	}
	if read := len(stream) - r.Len(); read != 36 {
		t.Errorf("read %d bytes before refusing, want the 36 of the fixed header", read)
	}
	h, _, err := decodeAllBounded(bytes.NewReader(stream), 16)
	if err != nil || len(h.Tokens) != 16 {
		t.Fatalf("16 tokens with a bound of 16: %v", err)
	}
}

func decodeAllBounded(r io.Reader, maxTokens int) (*Header, int, error) {
	d, err := NewBoundedDecoder(r, maxTokens)
	if err != nil {
		return nil, 0, err
	}
	blocks := 0
	for {
		n, _, err := d.Next()
		if err == io.EOF {
			return d.Header(), blocks, nil
		}
		if err != nil {
			return nil, blocks, err
		}
		blocks += n
	}
}

package kvstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
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

// hybridFormat is testFormat with recurrent states of 12 bytes.
var hybridFormat = func() batch.BlockFormat { f := testFormat; f.StateBytes = 12; return f }()

// encode is a stream of blocks blocks in chunks of chunk, and, when the
// format has states, the state after all of them (bytes 200, 201, …).
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
	if f.StateBytes > 0 {
		if err := enc.State(blocks, testState(f)); err != nil {
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

func testState(f batch.BlockFormat) []byte {
	st := make([]byte, f.StateBytes)
	for i := range st {
		st[i] = byte(200 + i)
	}
	return st
}

// decodeAll reads a stream to its end and returns the blocks' bytes.
func decodeAll(r io.Reader) (*Header, []byte, error) {
	h, all, _, err := decodeStates(r)
	return h, all, err
}

// decodeStates is decodeAll that also returns the states it read, keyed
// by the blocks they follow.
func decodeStates(r io.Reader) (*Header, []byte, map[int][]byte, error) {
	d, err := NewDecoder(r)
	if err != nil {
		return nil, nil, nil, err
	}
	var all []byte
	states := map[int][]byte{}
	for {
		fr, err := d.Next()
		if err == io.EOF {
			return d.Header(), all, states, nil
		}
		if err != nil {
			return d.Header(), all, states, err
		}
		if fr.StateAfter > 0 {
			states[fr.StateAfter] = bytes.Clone(fr.Data)
			continue
		}
		all = append(all, fr.Data...)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, f := range []batch.BlockFormat{testFormat, {Geometry: testFormat.Geometry, BlockSize: 4}, hybridFormat} {
		stream := encode(t, f, 5, 2, true)
		h, data, states, err := decodeStates(bytes.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		wantMagic, wantStates := "KVX1", map[int][]byte{}
		if f.StateBytes > 0 {
			wantMagic, wantStates = "KVX2", map[int][]byte{5: testState(f)}
		}
		if string(stream[:4]) != wantMagic {
			t.Errorf("format %+v: magic %q, want %q", f, stream[:4], wantMagic)
		}
		if diff := cmp.Diff(wantStates, states); diff != "" {
			t.Errorf("states (-want +got):\n%s", diff)
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
	for _, f := range []batch.BlockFormat{testFormat, hybridFormat} {
		checkTruncated(t, f)
	}
}

func checkTruncated(t *testing.T, f batch.BlockFormat) {
	full := encode(t, f, 5, 2, true)
	for cut := range len(full) {
		_, data, err := decodeAll(bytes.NewReader(full[:cut]))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d of %d: %v", cut, len(full), err)
		}
		if b := f.BlockBytes(); len(data) != 0 && len(data) != 2*b && len(data) != 4*b && len(data) != 5*b {
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
	f.Add(encode(f, hybridFormat, 3, 2, true))
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
		fr, err := d.Next()
		if err == io.EOF {
			return d.Header(), blocks, nil
		}
		if err != nil {
			return nil, blocks, err
		}
		blocks += fr.Blocks
	}
}

// A state frame is refused where it does not belong: in a stream without
// states, before the blocks it follows, of another size, or with a
// flipped byte; the encoder refuses to write such frames in the first
// place.
func TestStateFrames(t *testing.T) {
	var buf bytes.Buffer
	enc, err := NewEncoder(&buf, &Header{Format: hybridFormat, Tokens: make([]int32, 2*hybridFormat.BlockSize)})
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.State(1, testState(hybridFormat)); err == nil {
		t.Error("the encoder wrote a state before the blocks it follows")
	}
	if err := enc.Chunk(1, make([]byte, hybridFormat.BlockBytes())); err != nil {
		t.Fatal(err)
	}
	if err := enc.State(1, testState(hybridFormat)[1:]); err == nil {
		t.Error("the encoder wrote a state of another size than the header's")
	}
	plain, err := NewEncoder(io.Discard, &Header{Format: testFormat, Tokens: make([]int32, 2)})
	if err != nil {
		t.Fatal(err)
	}
	_ = plain.Chunk(1, make([]byte, testFormat.BlockBytes()))
	if err := plain.State(1, make([]byte, 12)); err == nil {
		t.Error("the encoder wrote a state into a stream without states")
	}

	// Hand-made frames after a stream's last chunk (its end frame cut off).
	stateFrame := func(after int, st []byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, stateMark)
		a := binary.LittleEndian.AppendUint32(nil, uint32(after))
		b = binary.LittleEndian.AppendUint32(b, crc32.Update(crc32.Checksum(a, crcTab), crcTab, st))
		return append(append(b, a...), st...)
	}
	withFrame := func(f batch.BlockFormat, frame []byte) []byte {
		s := encode(t, f, 2, 1, false)
		if f.StateBytes > 0 {
			s = s[:len(s)-(12+f.StateBytes)] // drop encode's own state frame
		}
		return append(s, frame...)
	}
	flipped := stateFrame(2, testState(hybridFormat))
	flipped[len(flipped)-1] ^= 1
	for _, tc := range []struct {
		name   string
		stream []byte
	}{
		{"in a stream without states", withFrame(testFormat, stateFrame(2, make([]byte, 12)))},
		{"after more blocks than sent", withFrame(hybridFormat, stateFrame(3, testState(hybridFormat)))},
		{"after no block", withFrame(hybridFormat, stateFrame(0, testState(hybridFormat)))},
		{"flipped byte", withFrame(hybridFormat, flipped)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := decodeAll(bytes.NewReader(tc.stream)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v, want ErrCorrupt", err)
			}
		})
	}
	// The same frame, intact, decodes.
	_, _, states, err := decodeStates(bytes.NewReader(append(withFrame(hybridFormat, stateFrame(2, testState(hybridFormat))),
		0, 0, 0, 0, 2, 0, 0, 0)))
	if err != nil || !bytes.Equal(states[2], testState(hybridFormat)) {
		t.Fatalf("intact state frame: %v, states %v", err, states)
	}
}

// A header announcing a state larger than MaxStateBytes is corrupt.
func TestHugeStateRefused(t *testing.T) {
	s := encode(t, hybridFormat, 1, 1, true)
	binary.LittleEndian.PutUint32(s[36:], MaxStateBytes+1)
	if _, err := NewDecoder(bytes.NewReader(s)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%v, want ErrCorrupt", err)
	}
}

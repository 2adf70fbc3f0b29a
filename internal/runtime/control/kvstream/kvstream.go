// Package kvstream is the byte format of a program's KV moving from one
// pod to another over the control port (GET /v1/kv/programs/{id}): a
// header naming the blocks (their format, the cache salt that seeds their
// prefix-hash chain, and the token ids that key them), then the blocks'
// contents in chunks, for a hybrid model a recurrent state after them,
// then an end frame. It is plain Go over io.Reader and io.Writer, so the
// control API, the tests and the fuzz target share it.
//
// Layout, all integers little endian:
//
//	header:  "KVX1" | layers u32 | kvHeads u32 | headDim u32 | dtype u8 |
//	         contents u8 | 0 u16 | blockSize u32 | salt u64 | blocks u32 |
//	         tokens (blocks × blockSize) × u32 | crc32c(all of the above) u32
//	  or, for a model with recurrent states (BlockFormat.StateBytes > 0):
//	         "KVX2" | the same up to blocks | stateBytes u32 | tokens | crc32c
//	chunk:   n u32 (≥ 1) | crc32c(payload) u32 | payload (n × block bytes)
//	state:   0xffffffff u32 | crc32c(after, payload) u32 | after u32 |
//	         payload (stateBytes): the state after the chain's first
//	         `after` blocks, all of them sent before it (KVX2 only)
//	end:     0 u32 | total blocks sent u32
//
// A block's bytes are batch.BlockIO's layout, a state's batch.StateIO's.
// The receiver may write each chunk as it arrives: the blocks form a chain
// from the first, so any whole chunks received make a usable prefix even
// if the stream is cut, and a stream without its end frame reads as
// io.ErrUnexpectedEOF. A stream of a model without states is "KVX1", as
// before states moved, so such pods of either version exchange KV.
package kvstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// Bounds a decoder enforces, whatever the sender says.
const (
	// MaxTokens bounds the token ids a header carries (16 MiB of them).
	MaxTokens = 1 << 22
	// MaxChunkBytes bounds one chunk's payload.
	MaxChunkBytes = 64 << 20
	// MaxBlockSize and MaxGeometry bound the header's shape fields.
	MaxBlockSize = 1 << 12
	MaxGeometry  = 1 << 16
	// MaxStateBytes bounds a recurrent state (a large hybrid model's is
	// tens of MiB).
	MaxStateBytes = 1 << 30
	// ChunkBytes is the payload an encoder aims for per chunk (at least one
	// block): big enough that the framing is noise, small enough that the
	// source holds its engine for one chunk briefly.
	ChunkBytes = 4 << 20
)

var (
	magic       = [4]byte{'K', 'V', 'X', '1'}
	magicStates = [4]byte{'K', 'V', 'X', '2'}
	crcTab      = crc32.MakeTable(crc32.Castagnoli)
)

// stateMark opens a state frame where a chunk's block count would be.
const stateMark = 0xffffffff

// Header names the blocks a stream carries.
type Header struct {
	Format batch.BlockFormat
	Salt   kvcache.Salt
	// Tokens key the blocks: len(Tokens) is Blocks × Format.BlockSize.
	Tokens []int32
}

// Blocks is the number of blocks the header announces.
func (h *Header) Blocks() int {
	if h.Format.BlockSize <= 0 {
		return 0
	}
	return len(h.Tokens) / h.Format.BlockSize
}

// ChunkBlocks is how many blocks an encoder puts in one chunk.
func ChunkBlocks(f batch.BlockFormat) int {
	if b := f.BlockBytes(); b > 0 {
		return max(1, ChunkBytes/b)
	}
	return 256
}

// Encoder writes a stream.
type Encoder struct {
	w          io.Writer
	sent       int
	stateBytes int
	buf        [12]byte
}

// NewEncoder writes h to w and returns an encoder for its chunks.
func NewEncoder(w io.Writer, h *Header) (*Encoder, error) {
	f := h.Format
	if f.BlockSize <= 0 || len(h.Tokens)%f.BlockSize != 0 {
		return nil, fmt.Errorf("kvstream: %d tokens are not whole blocks of %d", len(h.Tokens), f.BlockSize)
	}
	if f.StateBytes < 0 || f.StateBytes > MaxStateBytes {
		return nil, fmt.Errorf("kvstream: recurrent states of %d bytes", f.StateBytes)
	}
	b := make([]byte, 0, 40+4*len(h.Tokens)+4)
	if f.StateBytes > 0 {
		b = append(b, magicStates[:]...)
	} else {
		b = append(b, magic[:]...)
	}
	g := f.Geometry
	b = binary.LittleEndian.AppendUint32(b, uint32(g.Layers))
	b = binary.LittleEndian.AppendUint32(b, uint32(g.KVHeads))
	b = binary.LittleEndian.AppendUint32(b, uint32(g.HeadDim))
	contents := byte(0)
	if f.Contents {
		contents = 1
	}
	b = append(b, byte(g.DType), contents, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(f.BlockSize))
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Salt))
	b = binary.LittleEndian.AppendUint32(b, uint32(h.Blocks()))
	if f.StateBytes > 0 {
		b = binary.LittleEndian.AppendUint32(b, uint32(f.StateBytes))
	}
	for _, t := range h.Tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTab))
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	return &Encoder{w: w, stateBytes: f.StateBytes}, nil
}

// Chunk writes n blocks whose contents are payload.
func (e *Encoder) Chunk(n int, payload []byte) error {
	if n <= 0 {
		return fmt.Errorf("kvstream: chunk of %d blocks", n)
	}
	binary.LittleEndian.PutUint32(e.buf[:4], uint32(n))
	binary.LittleEndian.PutUint32(e.buf[4:8], crc32.Checksum(payload, crcTab))
	if _, err := e.w.Write(e.buf[:8]); err != nil {
		return err
	}
	if _, err := e.w.Write(payload); err != nil {
		return err
	}
	e.sent += n
	return nil
}

// State writes a recurrent state, the state after the chain's first after
// blocks (all of them sent before it): StateBytes of the header's format.
func (e *Encoder) State(after int, state []byte) error {
	switch {
	case e.stateBytes == 0:
		return errors.New("kvstream: a recurrent state in a stream of a model without states")
	case len(state) != e.stateBytes:
		return fmt.Errorf("kvstream: a recurrent state of %d bytes, the header says %d", len(state), e.stateBytes)
	case after <= 0 || after > e.sent:
		return fmt.Errorf("kvstream: a recurrent state after %d blocks, %d sent", after, e.sent)
	}
	binary.LittleEndian.PutUint32(e.buf[:4], stateMark)
	binary.LittleEndian.PutUint32(e.buf[8:], uint32(after))
	binary.LittleEndian.PutUint32(e.buf[4:8], crc32.Update(crc32.Checksum(e.buf[8:], crcTab), crcTab, state))
	if _, err := e.w.Write(e.buf[:]); err != nil {
		return err
	}
	_, err := e.w.Write(state)
	return err
}

// End writes the end frame.
func (e *Encoder) End() error {
	binary.LittleEndian.PutUint32(e.buf[:4], 0)
	binary.LittleEndian.PutUint32(e.buf[4:8], uint32(e.sent))
	_, err := e.w.Write(e.buf[:8])
	return err
}

// ErrCorrupt is a stream that breaks the format (as opposed to one that is
// cut short, io.ErrUnexpectedEOF).
var ErrCorrupt = errors.New("kvstream: corrupt stream")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Decoder reads a stream.
type Decoder struct {
	r        io.Reader
	h        Header
	size     int // bytes per block
	received int
	done     bool
	buf      []byte
}

// ErrTooLong is a header announcing a longer chain than the receiver
// takes (NewBoundedDecoder).
var ErrTooLong = errors.New("kvstream: chain too long")

// NewDecoder reads and checks the header.
func NewDecoder(r io.Reader) (*Decoder, error) { return NewBoundedDecoder(r, MaxTokens) }

// NewBoundedDecoder is NewDecoder for a receiver that takes chains of at
// most maxTokens tokens (and never more than MaxTokens): a header
// announcing more is refused with ErrTooLong before its token ids are read.
func NewBoundedDecoder(r io.Reader, maxTokens int) (*Decoder, error) {
	var buf [40]byte
	fixed := buf[:36]
	if _, err := io.ReadFull(r, fixed); err != nil {
		return nil, eof(err)
	}
	stateBytes := 0
	switch [4]byte(fixed[:4]) {
	case magic:
	case magicStates:
		fixed = buf[:40]
		if _, err := io.ReadFull(r, fixed[36:]); err != nil {
			return nil, eof(err)
		}
		stateBytes = int(binary.LittleEndian.Uint32(fixed[36:]))
		if stateBytes <= 0 || stateBytes > MaxStateBytes {
			return nil, corrupt("recurrent states of %d bytes", stateBytes)
		}
	default:
		return nil, corrupt("magic %q", fixed[:4])
	}
	u32 := func(off int) int { return int(binary.LittleEndian.Uint32(fixed[off:])) }
	g := kvcache.Geometry{Layers: u32(4), KVHeads: u32(8), HeadDim: u32(12), DType: kvcache.DType(fixed[16])}
	f := batch.BlockFormat{Geometry: g, BlockSize: u32(20), Contents: fixed[17] == 1, StateBytes: stateBytes}
	switch {
	case fixed[17] > 1 || fixed[18] != 0 || fixed[19] != 0:
		return nil, corrupt("flags %x", fixed[17:20])
	case g.Layers > MaxGeometry || g.KVHeads > MaxGeometry || g.HeadDim > MaxGeometry:
		return nil, corrupt("geometry %d × %d × %d", g.Layers, g.KVHeads, g.HeadDim)
	case f.BlockSize <= 0 || f.BlockSize > MaxBlockSize:
		return nil, corrupt("block size %d", f.BlockSize)
	}
	if f.Contents {
		if err := g.Validate(); err != nil {
			return nil, corrupt("%v", err)
		}
	}
	blocks := u32(32)
	if blocks > MaxTokens/f.BlockSize {
		return nil, corrupt("%d blocks of %d tokens: more than %d tokens", blocks, f.BlockSize, MaxTokens)
	}
	if blocks*f.BlockSize > maxTokens {
		return nil, fmt.Errorf("%w: %d blocks of %d tokens, more than the %d tokens taken here", ErrTooLong, blocks, f.BlockSize, max(maxTokens, 0))
	}
	size := f.BlockBytes()
	if f.Contents && (size <= 0 || size > MaxChunkBytes) {
		return nil, corrupt("blocks of %d bytes", size)
	}
	rest := make([]byte, 4*blocks*f.BlockSize+4)
	if _, err := io.ReadFull(r, rest); err != nil {
		return nil, eof(err)
	}
	crc := crc32.Update(crc32.Checksum(fixed, crcTab), crcTab, rest[:len(rest)-4])
	if crc != binary.LittleEndian.Uint32(rest[len(rest)-4:]) {
		return nil, corrupt("header checksum")
	}
	toks := make([]int32, blocks*f.BlockSize)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(rest[4*i:]))
	}
	return &Decoder{r: r, h: Header{Format: f, Salt: kvcache.Salt(binary.LittleEndian.Uint64(fixed[24:])), Tokens: toks}, size: size}, nil
}

// Header is the stream's header.
func (d *Decoder) Header() *Header { return &d.h }

// Received is how many blocks the chunks read so far carried.
func (d *Decoder) Received() int { return d.received }

// Frame is a frame of the stream after its header: a chunk of Blocks
// blocks, or (StateAfter > 0) the recurrent state after the chain's first
// StateAfter blocks. Data is its payload, the decoder's buffer, valid
// until the next call.
type Frame struct {
	Blocks, StateAfter int
	Data               []byte
}

// Next reads the next frame. At the end frame it returns io.EOF; a stream
// cut before it returns io.ErrUnexpectedEOF, one that breaks the format an
// error wrapping ErrCorrupt.
func (d *Decoder) Next() (Frame, error) {
	if d.done {
		return Frame{}, io.EOF
	}
	var fr [8]byte
	if _, err := io.ReadFull(d.r, fr[:]); err != nil {
		return Frame{}, eof(err)
	}
	n := int(binary.LittleEndian.Uint32(fr[:4]))
	second := binary.LittleEndian.Uint32(fr[4:])
	switch {
	case n == 0:
		if int(second) != d.received {
			return Frame{}, corrupt("end frame counts %d blocks, %d received", second, d.received)
		}
		d.done = true
		return Frame{}, io.EOF
	case n == stateMark:
		return d.state(second)
	case n > d.h.Blocks()-d.received:
		return Frame{}, corrupt("chunk of %d blocks after %d of %d", n, d.received, d.h.Blocks())
	case d.size > 0 && n > MaxChunkBytes/d.size:
		return Frame{}, corrupt("chunk of %d blocks of %d bytes", n, d.size)
	}
	if err := d.read(n * d.size); err != nil {
		return Frame{}, err
	}
	if crc32.Checksum(d.buf, crcTab) != second {
		return Frame{}, corrupt("chunk checksum after %d blocks", d.received)
	}
	d.received += n
	return Frame{Blocks: n, Data: d.buf}, nil
}

// state reads a state frame's rest, crc its checksum.
func (d *Decoder) state(crc uint32) (Frame, error) {
	states := d.h.Format.StateBytes
	if states == 0 {
		return Frame{}, corrupt("a recurrent state in a stream without states")
	}
	var a [4]byte
	if _, err := io.ReadFull(d.r, a[:]); err != nil {
		return Frame{}, eof(err)
	}
	after := int(binary.LittleEndian.Uint32(a[:]))
	if after <= 0 || after > d.received {
		return Frame{}, corrupt("a recurrent state after %d blocks, %d received", after, d.received)
	}
	if err := d.read(states); err != nil {
		return Frame{}, err
	}
	if crc32.Update(crc32.Checksum(a[:], crcTab), crcTab, d.buf) != crc {
		return Frame{}, corrupt("recurrent state checksum")
	}
	return Frame{StateAfter: after, Data: d.buf}, nil
}

// read fills the decoder's buffer with the next n bytes. The buffer grows
// at most twice what has arrived, so a sender that announces a large
// frame and sends little makes the receiver allocate little.
func (d *Decoder) read(n int) error {
	d.buf = d.buf[:0]
	for len(d.buf) < n {
		k := min(n-len(d.buf), max(len(d.buf), 1<<20))
		d.buf = slices.Grow(d.buf, k)
		if _, err := io.ReadFull(d.r, d.buf[len(d.buf):len(d.buf)+k]); err != nil {
			return eof(err)
		}
		d.buf = d.buf[:len(d.buf)+k]
	}
	return nil
}

// eof reads a clean EOF inside the stream as a cut one.
func eof(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

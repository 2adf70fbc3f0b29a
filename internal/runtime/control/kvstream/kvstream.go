// Package kvstream is the byte format of a program's KV moving from one
// pod to another over the control port (GET /v1/kv/programs/{id}): a
// header naming the blocks (their format, the cache salt that seeds their
// prefix-hash chain, and the token ids that key them), then the blocks'
// contents in chunks, then an end frame. It is plain Go over io.Reader and
// io.Writer, so the control API, the tests and the fuzz target share it.
//
// Layout, all integers little endian:
//
//	header:  "KVX1" | layers u32 | kvHeads u32 | headDim u32 | dtype u8 |
//	         contents u8 | 0 u16 | blockSize u32 | salt u64 | blocks u32 |
//	         tokens (blocks × blockSize) × u32 | crc32c(all of the above) u32
//	chunk:   n u32 (≥ 1) | crc32c(payload) u32 | payload (n × block bytes)
//	end:     0 u32 | total blocks sent u32
//
// A block's bytes are batch.BlockIO's layout. The receiver may write each
// chunk as it arrives: the blocks form a chain from the first, so any whole
// chunks received make a usable prefix even if the stream is cut, and a
// stream without its end frame reads as io.ErrUnexpectedEOF.
package kvstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

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
	// ChunkBytes is the payload an encoder aims for per chunk (at least one
	// block): big enough that the framing is noise, small enough that the
	// source holds its engine for one chunk briefly.
	ChunkBytes = 4 << 20
)

var (
	magic  = [4]byte{'K', 'V', 'X', '1'}
	crcTab = crc32.MakeTable(crc32.Castagnoli)
)

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
	w    io.Writer
	sent int
	buf  [8]byte
}

// NewEncoder writes h to w and returns an encoder for its chunks.
func NewEncoder(w io.Writer, h *Header) (*Encoder, error) {
	f := h.Format
	if f.BlockSize <= 0 || len(h.Tokens)%f.BlockSize != 0 {
		return nil, fmt.Errorf("kvstream: %d tokens are not whole blocks of %d", len(h.Tokens), f.BlockSize)
	}
	b := make([]byte, 0, 36+4*len(h.Tokens)+4)
	b = append(b, magic[:]...)
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
	for _, t := range h.Tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTab))
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	return &Encoder{w: w}, nil
}

// Chunk writes n blocks whose contents are payload.
func (e *Encoder) Chunk(n int, payload []byte) error {
	if n <= 0 {
		return fmt.Errorf("kvstream: chunk of %d blocks", n)
	}
	binary.LittleEndian.PutUint32(e.buf[:4], uint32(n))
	binary.LittleEndian.PutUint32(e.buf[4:], crc32.Checksum(payload, crcTab))
	if _, err := e.w.Write(e.buf[:]); err != nil {
		return err
	}
	if _, err := e.w.Write(payload); err != nil {
		return err
	}
	e.sent += n
	return nil
}

// End writes the end frame.
func (e *Encoder) End() error {
	binary.LittleEndian.PutUint32(e.buf[:4], 0)
	binary.LittleEndian.PutUint32(e.buf[4:], uint32(e.sent))
	_, err := e.w.Write(e.buf[:])
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
	var fixed [36]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return nil, eof(err)
	}
	if [4]byte(fixed[:4]) != magic {
		return nil, corrupt("magic %q", fixed[:4])
	}
	u32 := func(off int) int { return int(binary.LittleEndian.Uint32(fixed[off:])) }
	g := kvcache.Geometry{Layers: u32(4), KVHeads: u32(8), HeadDim: u32(12), DType: kvcache.DType(fixed[16])}
	f := batch.BlockFormat{Geometry: g, BlockSize: u32(20), Contents: fixed[17] == 1}
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
	crc := crc32.Update(crc32.Checksum(fixed[:], crcTab), crcTab, rest[:len(rest)-4])
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

// Next reads the next chunk: its number of blocks and their contents (the
// decoder's buffer, valid until the next call). At the end frame it returns
// 0, nil, io.EOF; a stream cut before it returns io.ErrUnexpectedEOF, one
// that breaks the format an error wrapping ErrCorrupt.
func (d *Decoder) Next() (int, []byte, error) {
	if d.done {
		return 0, nil, io.EOF
	}
	var fr [8]byte
	if _, err := io.ReadFull(d.r, fr[:]); err != nil {
		return 0, nil, eof(err)
	}
	n := int(binary.LittleEndian.Uint32(fr[:4]))
	second := binary.LittleEndian.Uint32(fr[4:])
	if n == 0 {
		if int(second) != d.received {
			return 0, nil, corrupt("end frame counts %d blocks, %d received", second, d.received)
		}
		d.done = true
		return 0, nil, io.EOF
	}
	if n > d.h.Blocks()-d.received {
		return 0, nil, corrupt("chunk of %d blocks after %d of %d", n, d.received, d.h.Blocks())
	}
	if d.size > 0 && n > MaxChunkBytes/d.size {
		return 0, nil, corrupt("chunk of %d blocks of %d bytes", n, d.size)
	}
	need := n * d.size
	if cap(d.buf) < need {
		d.buf = make([]byte, need)
	}
	d.buf = d.buf[:need]
	if _, err := io.ReadFull(d.r, d.buf); err != nil {
		return 0, nil, eof(err)
	}
	if crc32.Checksum(d.buf, crcTab) != second {
		return 0, nil, corrupt("chunk checksum after %d blocks", d.received)
	}
	d.received += n
	return n, d.buf, nil
}

// eof reads a clean EOF inside the stream as a cut one.
func eof(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

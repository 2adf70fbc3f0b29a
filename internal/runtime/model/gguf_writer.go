package model

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// ggufKV is one metadata entry to write.
type ggufKV struct {
	key   string
	value any
}

// ggufMetadataSource is implemented by the tokenizers and chat templates of
// this package: they describe themselves as GGUF metadata.
type ggufMetadataSource interface {
	ggufMetadata() []ggufKV
}

// WriteGGUF writes m as a GGUF v3 file: llama.cpp-style metadata and tensor
// names, tensors in their stored types.
func WriteGGUF(w io.Writer, m *Model) error {
	kvs, err := ggufMetadata(m)
	if err != nil {
		return fmt.Errorf("write gguf: %w", err)
	}
	if err := writeGGUF(w, kvs, m.Weights.Tensors()); err != nil {
		return fmt.Errorf("write gguf: %w", err)
	}
	return nil
}

// ggufMetadata is m's metadata as WriteGGUF writes it.
func ggufMetadata(m *Model) ([]ggufKV, error) {
	c := m.Config
	if err := c.Validate(); err != nil {
		return nil, err
	}
	a, err := arch.Lookup(c.Arch)
	if err != nil {
		return nil, err
	}
	kvs := []ggufKV{
		{"general.architecture", c.Arch},
		{"general.name", "kvpilot"},
		{"general.alignment", uint32(ggufDefaultAlignment)},
	}
	for _, kv := range a.Metadata(c) {
		kvs = append(kvs, ggufKV{kv.Key, kv.Value})
	}
	src, ok := m.Tokenizer.(ggufMetadataSource)
	if !ok {
		return nil, fmt.Errorf("tokenizer %T cannot be written as GGUF metadata", m.Tokenizer)
	}
	kvs = append(kvs, src.ggufMetadata()...)
	if c.BOS >= 0 {
		kvs = append(kvs, ggufKV{"tokenizer.ggml.bos_token_id", uint32(c.BOS)})
	}
	if len(c.EOS) > 0 {
		kvs = append(kvs, ggufKV{"tokenizer.ggml.eos_token_id", uint32(c.EOS[0])})
		kvs = append(kvs, ggufKV{keyEOSTokenIDs, append([]int32(nil), c.EOS...)})
	}
	if t, ok := m.ChatTemplate.(ggufMetadataSource); ok {
		kvs = append(kvs, t.ggufMetadata()...)
	}
	return kvs, nil
}

// writeGGUF writes a GGUF v3 file of kvs and tensors.
func writeGGUF(w io.Writer, kvs []ggufKV, tensors []*Tensor) error {
	ew := &errWriter{w: bufio.NewWriterSize(w, 1<<20)}
	ew.write([]byte(ggufMagic))
	ew.u32(3)
	ew.u64(uint64(len(tensors)))
	ew.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		ew.str(kv.key)
		if err := ew.value(kv.value); err != nil {
			return fmt.Errorf("metadata %s: %w", kv.key, err)
		}
	}
	var off uint64
	for _, t := range tensors {
		ew.str(t.Name)
		ew.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			ew.u64(uint64(d))
		}
		ew.u32(uint32(t.Type))
		ew.u64(off)
		off = uint64(alignUp(int(off)+len(t.Data), ggufDefaultAlignment))
	}
	ew.pad()
	for _, t := range tensors {
		ew.write(t.Data)
		ew.pad()
	}
	if ew.err == nil {
		ew.err = ew.w.Flush()
	}
	return ew.err
}

// keyEOSTokenIDs lists every end-of-generation token; llama.cpp's keys hold one each.
const keyEOSTokenIDs = "kvpilot.eos_token_ids"

type errWriter struct {
	w   *bufio.Writer
	n   int
	err error
	tmp [8]byte
}

func (e *errWriter) write(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += n
	e.err = err
}

func (e *errWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.tmp[:], v)
	e.write(e.tmp[:4])
}

func (e *errWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.tmp[:], v)
	e.write(e.tmp[:8])
}

func (e *errWriter) str(s string) {
	e.u64(uint64(len(s)))
	e.write([]byte(s))
}

func (e *errWriter) pad() {
	var zero [ggufDefaultAlignment]byte
	e.write(zero[:alignUp(e.n, ggufDefaultAlignment)-e.n])
}

func (e *errWriter) value(v any) error {
	switch x := v.(type) {
	case string:
		e.u32(ggufString)
		e.str(x)
	case uint16:
		e.u32(ggufU16)
		binary.LittleEndian.PutUint16(e.tmp[:], x)
		e.write(e.tmp[:2])
	case uint32:
		e.u32(ggufU32)
		e.u32(x)
	case int32:
		e.u32(ggufI32)
		e.u32(uint32(x))
	case float32:
		e.u32(ggufF32)
		e.u32(math.Float32bits(x))
	case bool:
		e.u32(ggufBool)
		b := byte(0)
		if x {
			b = 1
		}
		e.write([]byte{b})
	case []string:
		e.u32(ggufArray)
		e.u32(ggufString)
		e.u64(uint64(len(x)))
		for _, s := range x {
			e.str(s)
		}
	case []float32:
		e.u32(ggufArray)
		e.u32(ggufF32)
		e.u64(uint64(len(x)))
		for _, f := range x {
			e.u32(math.Float32bits(f))
		}
	case []bool:
		e.u32(ggufArray)
		e.u32(ggufBool)
		e.u64(uint64(len(x)))
		bs := make([]byte, len(x))
		for i, b := range x {
			if b {
				bs[i] = 1
			}
		}
		e.write(bs)
	case []int32:
		e.u32(ggufArray)
		e.u32(ggufI32)
		e.u64(uint64(len(x)))
		for _, i := range x {
			e.u32(uint32(i))
		}
	default:
		return fmt.Errorf("unsupported metadata type %T", v)
	}
	return nil
}

package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
)

const ggufMagic = "GGUF"

// ggufDefaultAlignment is the tensor data alignment when general.alignment is unset.
const ggufDefaultAlignment = 32

// GGUF metadata value types.
const (
	ggufU8 uint32 = iota
	ggufI8
	ggufU16
	ggufI16
	ggufU32
	ggufI32
	ggufF32
	ggufBool
	ggufString
	ggufArray
	ggufU64
	ggufI64
	ggufF64
)

// ErrTruncated is wrapped by errors about files that end early.
var ErrTruncated = errors.New("file truncated")

// ggufFile is a parsed GGUF file. Metadata values are Go scalars (uint8 …
// float64, bool, string) or slices of them for arrays ([]any for nested
// arrays). Tensor data aliases the parsed buffer.
type ggufFile struct {
	version   uint32
	kv        map[string]any
	tensors   []ggufTensor
	alignment int
}

type ggufTensor struct {
	name  string
	shape []int
	typ   DType
	data  []byte // nil for unsupported types, whose size is unknown
}

type ggufDecoder struct {
	buf []byte
	off int
}

func (d *ggufDecoder) need(n uint64) error {
	if n > uint64(len(d.buf)-d.off) {
		return fmt.Errorf("%w: need %d bytes at offset %d, file has %d", ErrTruncated, n, d.off, len(d.buf))
	}
	return nil
}

func (d *ggufDecoder) bytes(n uint64) ([]byte, error) {
	if err := d.need(n); err != nil {
		return nil, err
	}
	b := d.buf[d.off : d.off+int(n)]
	d.off += int(n)
	return b, nil
}

func (d *ggufDecoder) u32() (uint32, error) {
	b, err := d.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *ggufDecoder) u64() (uint64, error) {
	b, err := d.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (d *ggufDecoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	b, err := d.bytes(n)
	return string(b), err
}

// count reads an element count and checks that that many elements of at
// least minSize bytes each fit in the rest of the file, so corrupt counts
// fail before they allocate.
func (d *ggufDecoder) count(what string, minSize uint64) (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if rest := uint64(len(d.buf) - d.off); n > rest/minSize {
		return 0, fmt.Errorf("%w: %s count %d at offset %d does not fit in the %d remaining bytes", ErrTruncated, what, n, d.off-8, rest)
	}
	return int(n), nil
}

var ggufScalarSize = map[uint32]uint64{
	ggufU8: 1, ggufI8: 1, ggufBool: 1, ggufU16: 2, ggufI16: 2, ggufU32: 4, ggufI32: 4, ggufF32: 4,
	ggufU64: 8, ggufI64: 8, ggufF64: 8, ggufString: 8, ggufArray: 12,
}

func (d *ggufDecoder) value(typ uint32, depth int) (any, error) {
	switch typ {
	case ggufString:
		return d.str()
	case ggufArray:
		if depth > 2 {
			return nil, fmt.Errorf("arrays nested too deeply at offset %d", d.off)
		}
		et, err := d.u32()
		if err != nil {
			return nil, err
		}
		size, ok := ggufScalarSize[et]
		if !ok {
			return nil, fmt.Errorf("unknown array element type %d at offset %d", et, d.off-4)
		}
		n, err := d.count("array", size)
		if err != nil {
			return nil, err
		}
		return d.array(et, n, depth)
	}
	size, ok := ggufScalarSize[typ]
	if !ok {
		return nil, fmt.Errorf("unknown value type %d at offset %d", typ, d.off-4)
	}
	b, err := d.bytes(size)
	if err != nil {
		return nil, err
	}
	return scalar(typ, b), nil
}

func scalar(typ uint32, b []byte) any {
	le := binary.LittleEndian
	switch typ {
	case ggufU8:
		return b[0]
	case ggufI8:
		return int8(b[0])
	case ggufBool:
		return b[0] != 0
	case ggufU16:
		return le.Uint16(b)
	case ggufI16:
		return int16(le.Uint16(b))
	case ggufU32:
		return le.Uint32(b)
	case ggufI32:
		return int32(le.Uint32(b))
	case ggufF32:
		return math.Float32frombits(le.Uint32(b))
	case ggufU64:
		return le.Uint64(b)
	case ggufI64:
		return int64(le.Uint64(b))
	case ggufF64:
		return math.Float64frombits(le.Uint64(b))
	}
	panic("unreachable")
}

func (d *ggufDecoder) array(et uint32, n, depth int) (any, error) {
	switch et {
	case ggufString:
		out := make([]string, n)
		for i := range out {
			s, err := d.str()
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case ggufArray:
		out := make([]any, n)
		for i := range out {
			v, err := d.value(ggufArray, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case ggufF32:
		b, _ := d.bytes(uint64(n) * 4)
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out, nil
	case ggufI32, ggufU32:
		b, _ := d.bytes(uint64(n) * 4)
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		if et == ggufU32 {
			u := make([]uint32, n)
			for i, v := range out {
				u[i] = uint32(v)
			}
			return u, nil
		}
		return out, nil
	}
	size := ggufScalarSize[et]
	b, _ := d.bytes(uint64(n) * size)
	out := make([]any, n)
	for i := range out {
		out[i] = scalar(et, b[uint64(i)*size:])
	}
	return out, nil
}

// parseGGUF parses a GGUF v2 or v3 file held in buf.
func parseGGUF(buf []byte) (*ggufFile, error) {
	d := &ggufDecoder{buf: buf}
	magic, err := d.bytes(4)
	if err != nil {
		return nil, fmt.Errorf("not a GGUF file: %w", err)
	}
	if string(magic) != ggufMagic {
		return nil, fmt.Errorf("not a GGUF file: magic %q, want %q", magic, ggufMagic)
	}
	f := &ggufFile{kv: map[string]any{}, alignment: ggufDefaultAlignment}
	if f.version, err = d.u32(); err != nil {
		return nil, err
	}
	if f.version != 2 && f.version != 3 {
		return nil, fmt.Errorf("unsupported GGUF version %d (supported: 2, 3)", f.version)
	}
	const minTensorInfo, minKV = 8 + 4 + 4 + 8, 8 + 4 + 1
	nTensors, err := d.count("tensor", minTensorInfo)
	if err != nil {
		return nil, err
	}
	nKV, err := d.count("metadata", minKV)
	if err != nil {
		return nil, err
	}
	for range nKV {
		key, err := d.str()
		if err != nil {
			return nil, fmt.Errorf("metadata key: %w", err)
		}
		typ, err := d.u32()
		if err != nil {
			return nil, fmt.Errorf("metadata %q: %w", key, err)
		}
		v, err := d.value(typ, 0)
		if err != nil {
			return nil, fmt.Errorf("metadata %q: %w", key, err)
		}
		if _, dup := f.kv[key]; dup {
			return nil, fmt.Errorf("duplicate metadata key %q", key)
		}
		f.kv[key] = v
	}
	if v, ok := f.kv["general.alignment"]; ok {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, fmt.Errorf("general.alignment %v is not a power of two uint32", v)
		}
		f.alignment = int(a)
	}
	offsets := make([]uint64, nTensors)
	names := make(map[string]bool, nTensors)
	f.tensors = make([]ggufTensor, nTensors)
	for i := range f.tensors {
		t := &f.tensors[i]
		if t.name, err = d.str(); err != nil {
			return nil, fmt.Errorf("tensor %d name: %w", i, err)
		}
		if names[t.name] {
			return nil, fmt.Errorf("duplicate tensor %q", t.name)
		}
		names[t.name] = true
		nd, err := d.u32()
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.name, err)
		}
		if nd == 0 || nd > 4 {
			return nil, fmt.Errorf("tensor %q has %d dimensions (1 to 4 allowed)", t.name, nd)
		}
		elems := uint64(1)
		t.shape = make([]int, nd)
		for j := range t.shape {
			n, err := d.u64()
			if err != nil {
				return nil, fmt.Errorf("tensor %q: %w", t.name, err)
			}
			if n == 0 || n > 1<<40 || elems*n > 1<<50 {
				return nil, fmt.Errorf("tensor %q has bad dimension %d", t.name, n)
			}
			elems *= n
			t.shape[j] = int(n)
		}
		typ, err := d.u32()
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.name, err)
		}
		t.typ = DType(typ)
		if offsets[i], err = d.u64(); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.name, err)
		}
	}
	dataStart := alignUp(d.off, f.alignment)
	for i := range f.tensors {
		t := &f.tensors[i]
		if !t.typ.Supported() {
			continue
		}
		if offsets[i]%uint64(f.alignment) != 0 {
			return nil, fmt.Errorf("tensor %q: data offset %d is not aligned to %d", t.name, offsets[i], f.alignment)
		}
		rowBytes, err := t.typ.RowBytes(t.shape[0])
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.name, err)
		}
		size := uint64(rowBytes) * uint64((&Tensor{Shape: t.shape}).Rows())
		start := uint64(dataStart) + offsets[i]
		if start < uint64(dataStart) || start > uint64(len(buf)) || size > uint64(len(buf))-start {
			return nil, fmt.Errorf("%w: tensor %q needs bytes [%d, %d), file has %d", ErrTruncated, t.name, start, start+size, len(buf))
		}
		t.data = buf[start : start+size : start+size]
	}
	return f, nil
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// Typed metadata accessors. Integers of any width convert; a present key of
// the wrong type is an error, an absent one reports ok=false.

// bools is an array of booleans.
func (f *ggufFile) bools(key string) (v []bool, ok bool, err error) {
	raw, ok := f.kv[key]
	if !ok {
		return nil, false, nil
	}
	arr, isArr := raw.([]any)
	if !isArr {
		return nil, true, fmt.Errorf("metadata %s = %v is not an array of booleans", key, raw)
	}
	v = make([]bool, len(arr))
	for i, e := range arr {
		b, isBool := e.(bool)
		if !isBool {
			return nil, true, fmt.Errorf("metadata %s[%d] = %v is not a boolean", key, i, e)
		}
		v[i] = b
	}
	return v, true, nil
}

// ints is an array of integers of any width.
func (f *ggufFile) ints(key string) (v []int, ok bool, err error) {
	raw, ok := f.kv[key]
	if !ok {
		return nil, false, nil
	}
	rv := reflect.ValueOf(raw)
	if rv.Kind() != reflect.Slice {
		return nil, true, fmt.Errorf("metadata %s = %v is not an array of integers", key, raw)
	}
	v = make([]int, rv.Len())
	for i := range v {
		switch e := rv.Index(i); e.Kind() {
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v[i] = int(e.Int())
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v[i] = int(e.Uint())
		default:
			return nil, true, fmt.Errorf("metadata %s is an array of %s, not of integers", key, e.Kind())
		}
	}
	return v, true, nil
}

func (f *ggufFile) uint(key string) (v uint64, ok bool, err error) {
	raw, ok := f.kv[key]
	if !ok {
		return 0, false, nil
	}
	switch x := raw.(type) {
	case uint8:
		return uint64(x), true, nil
	case uint16:
		return uint64(x), true, nil
	case uint32:
		return uint64(x), true, nil
	case uint64:
		return x, true, nil
	case int8, int16, int32, int64:
		i := toInt64(x)
		if i >= 0 {
			return uint64(i), true, nil
		}
	}
	return 0, true, fmt.Errorf("metadata %s = %v is not a non-negative integer", key, raw)
}

func toInt64(x any) int64 {
	switch v := x.(type) {
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	}
	return -1
}

func (f *ggufFile) float(key string) (v float64, ok bool, err error) {
	raw, ok := f.kv[key]
	if !ok {
		return 0, false, nil
	}
	switch x := raw.(type) {
	case float32:
		return float64(x), true, nil
	case float64:
		return x, true, nil
	}
	return 0, true, fmt.Errorf("metadata %s = %v is not a float", key, raw)
}

func (f *ggufFile) string(key string) (string, bool, error) {
	raw, ok := f.kv[key]
	if !ok {
		return "", false, nil
	}
	s, isStr := raw.(string)
	if !isStr {
		return "", true, fmt.Errorf("metadata %s is %T, want a string", key, raw)
	}
	return s, true, nil
}

func (f *ggufFile) bool(key string) (v, ok bool, err error) {
	raw, ok := f.kv[key]
	if !ok {
		return false, false, nil
	}
	b, isBool := raw.(bool)
	if !isBool {
		return false, true, fmt.Errorf("metadata %s is %T, want a bool", key, raw)
	}
	return b, true, nil
}

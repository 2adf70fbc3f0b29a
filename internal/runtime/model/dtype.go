package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// DType is a GGML tensor type, numbered as in GGUF.
type DType uint32

// The tensor types this package reads and writes.
const (
	F32  DType = 0
	F16  DType = 1
	Q4_0 DType = 2
	Q8_0 DType = 8
	Q4_K DType = 12
	Q5_K DType = 13
	Q6_K DType = 14
	BF16 DType = 30
	// MXFP4 is OCP's microscaling FP4 (gpt-oss's experts as released):
	// blocks of 32 E2M1 values sharing an E8M0 scale (mxfp4.go).
	MXFP4 DType = 39
)

// blockLayouts gives, for the block-quantized types this package reads but
// does not decode, the weights per block and the bytes per block (ggml's
// block_q4_0, block_q4_K, block_q5_K and block_q6_K in ggml-common.h). Their
// tensors are handed as stored to an executor that runs them (ggml).
var blockLayouts = map[DType]struct{ n, bytes int }{
	Q4_0: {32, 2 + 16},
	Q4_K: {256, 2*2 + 12 + 128},
	Q5_K: {256, 2*2 + 12 + 32 + 128},
	Q6_K: {256, 128 + 64 + 16 + 2},
	// block_mxfp4: the E8M0 scale byte, then 16 bytes of 4-bit codes.
	MXFP4: {MXFP4Block, MXFP4BlockBytes},
}

// Q8Block is the number of weights in one Q8_0 block; Q8BlockBytes its size
// (an f16 scale followed by 32 int8 values).
const (
	Q8Block      = 32
	Q8BlockBytes = 2 + Q8Block
)

var ggmlTypeNames = map[DType]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
	10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K",
	16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S",
	22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
	29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
}

func (t DType) String() string {
	if s, ok := ggmlTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Supported reports whether this package can read tensors of type t (knows
// their size): F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and MXFP4.
func (t DType) Supported() bool {
	_, blocks := blockLayouts[t]
	return t.Decodable() || blocks
}

// Decodable reports whether this package can also decode (and encode)
// tensors of type t: F32, F16, BF16 and Q8_0, the types the cpu executor
// runs. The others are read as bytes only.
func (t DType) Decodable() bool { return t == F32 || t == F16 || t == BF16 || t == Q8_0 }

// ParseDType parses "f32", "f16", "bf16" or "q8_0" (any case).
func ParseDType(s string) (DType, error) {
	for _, t := range []DType{F32, F16, BF16, Q8_0} {
		if strings.EqualFold(s, t.String()) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unsupported tensor type %q (supported: f32, f16, bf16, q8_0)", s)
}

// RowBytes is the size of n consecutive elements of type t.
func (t DType) RowBytes(n int) (int, error) {
	switch t {
	case F32:
		return 4 * n, nil
	case F16, BF16:
		return 2 * n, nil
	case Q8_0:
		if n%Q8Block != 0 {
			return 0, fmt.Errorf("%s rows need a multiple of %d elements, got %d", t, Q8Block, n)
		}
		return n / Q8Block * Q8BlockBytes, nil
	}
	if l, ok := blockLayouts[t]; ok {
		if n%l.n != 0 {
			return 0, fmt.Errorf("%s rows need a multiple of %d elements, got %d", t, l.n, n)
		}
		return n / l.n * l.bytes, nil
	}
	return 0, fmt.Errorf("unsupported tensor type %s (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4)", t)
}

// F16ToF32 converts an IEEE half-precision value.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch exp {
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	case 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToF16 converts to IEEE half precision, rounding to nearest even.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	full, shift := mant, uint32(13)
	if e <= 0 {
		if e < -10 {
			return sign
		}
		full = mant | 0x800000
		shift = uint32(14 - e)
		e = 0
	}
	m := full >> shift
	rem := full & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && m&1 == 1) {
		m++
	}
	return sign | uint16(uint32(e)<<10+m)
}

// BF16ToF32 converts a bfloat16 value.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 converts to bfloat16, rounding to nearest even.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// QuantizeQ8_0 encodes src (a multiple of 32 values) as Q8_0 blocks into dst,
// as ggml's reference quantizer does.
func QuantizeQ8_0(dst []byte, src []float32) {
	for b := 0; b*Q8Block < len(src); b++ {
		x := src[b*Q8Block : (b+1)*Q8Block]
		out := dst[b*Q8BlockBytes : (b+1)*Q8BlockBytes]
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(out, F32ToF16(d))
		for j, v := range x {
			out[2+j] = byte(int8(math.Round(float64(v * id))))
		}
	}
}

// Dequantize decodes n elements of type t from src into dst[:n].
func Dequantize(t DType, dst []float32, src []byte) {
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := 0; b*Q8Block < len(dst); b++ {
			blk := src[b*Q8BlockBytes : (b+1)*Q8BlockBytes]
			d := F16ToF32(binary.LittleEndian.Uint16(blk))
			out := dst[b*Q8Block : (b+1)*Q8Block]
			for j := range out {
				out[j] = float32(int8(blk[2+j])) * d
			}
		}
	default:
		panic(fmt.Sprintf("model: dequantize %s", t))
	}
}

// Encode encodes src as type t (len(src) a multiple of 32 for Q8_0); t must
// be Decodable.
func Encode(t DType, src []float32) ([]byte, error) {
	if !t.Decodable() {
		return nil, fmt.Errorf("encoding %s is not implemented (encodable: F32, F16, BF16, Q8_0)", t)
	}
	n, err := t.RowBytes(len(src))
	if err != nil {
		return nil, err
	}
	out := make([]byte, n)
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		QuantizeQ8_0(out, src)
	}
	return out, nil
}

package model

import (
	"fmt"
	"math"
	"strings"
)

// MXFP4Block is the number of weights in one MXFP4 block; MXFP4BlockBytes
// its size: an E8M0 scale byte, then 16 bytes holding the block's 32
// 4-bit E2M1 codes, weight j in the low nibble of byte j and weight j+16
// in its high nibble (ggml's block_mxfp4).
const (
	MXFP4Block      = 32
	MXFP4BlockBytes = 1 + MXFP4Block/2
)

// mxfp4Values are the E2M1 codes' values doubled (ggml's kvalues_mxfp4),
// which the scale halves back.
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// EncodeMXFP4 encodes src (len a multiple of 32) as MXFP4 blocks, bit for
// bit as ggml's reference quantizer (quantize_row_mxfp4_ref) does: the
// scale byte is floor(log2(max |x|)) - 2 + 127 (0 for an all-zero block),
// and each weight gets the code whose value times the scale
// 2^(scale byte - 128) is nearest, the lowest code on a tie. The model
// files people download have gpt-oss's experts in MXFP4; this writes
// such files from random weights.
func EncodeMXFP4(src []float32) ([]byte, error) {
	if len(src)%MXFP4Block != 0 {
		return nil, fmt.Errorf("MXFP4 rows need a multiple of %d elements, got %d", MXFP4Block, len(src))
	}
	out := make([]byte, len(src)/MXFP4Block*MXFP4BlockBytes)
	for b := range len(src) / MXFP4Block {
		x := src[b*MXFP4Block : (b+1)*MXFP4Block]
		y := out[b*MXFP4BlockBytes : (b+1)*MXFP4BlockBytes]
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		var e uint8
		if amax > 0 {
			// log2f rounded to float32, as C computes it, then floored.
			e = uint8(int(math.Floor(float64(float32(math.Log2(float64(amax)))))) - 2 + 127)
		}
		d := e8m0Half(e)
		y[0] = e
		for j := range MXFP4Block / 2 {
			y[1+j] = mxfp4Index(x[j], d) | mxfp4Index(x[j+MXFP4Block/2], d)<<4
		}
	}
	return out, nil
}

// e8m0Half is the E8M0 scale e halved, 2^(e-128) (ggml's
// ggml_e8m0_to_fp32_half, denormal below e = 2).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// mxfp4Index is the code nearest x at scale d, the first on a tie
// (ggml's best_index_mxfp4, in float32 as it computes).
func mxfp4Index(x, d float32) byte {
	best, bestErr := 0, float32(math.Abs(float64(float32(float32(mxfp4Values[0])*d)-x)))
	for i := 1; i < 16; i++ {
		err := float32(math.Abs(float64(float32(float32(mxfp4Values[i])*d) - x)))
		if err < bestErr {
			best, bestErr = i, err
		}
	}
	return byte(best)
}

// DecodeMXFP4 is the inverse of EncodeMXFP4: code value times scale.
func DecodeMXFP4(data []byte) ([]float32, error) {
	if len(data)%MXFP4BlockBytes != 0 {
		return nil, fmt.Errorf("MXFP4 data of %d bytes is not whole blocks of %d", len(data), MXFP4BlockBytes)
	}
	out := make([]float32, len(data)/MXFP4BlockBytes*MXFP4Block)
	for b := range len(data) / MXFP4BlockBytes {
		y := data[b*MXFP4BlockBytes : (b+1)*MXFP4BlockBytes]
		d := e8m0Half(y[0])
		x := out[b*MXFP4Block : (b+1)*MXFP4Block]
		for j := range MXFP4Block / 2 {
			x[j] = float32(mxfp4Values[y[1+j]&0xf]) * d
			x[j+MXFP4Block/2] = float32(mxfp4Values[y[1+j]>>4]) * d
		}
	}
	return out, nil
}

// WithMXFP4Experts returns a copy of m whose mixture-of-experts stacks
// (the 3-D *_exps.weight tensors) are encoded as MXFP4 (EncodeMXFP4), the
// other tensors shared with m: the layout of gpt-oss as released, whose
// experts alone are MXFP4. m's experts must be decodable (F32, F16, BF16,
// Q8_0).
func (m *Model) WithMXFP4Experts() (*Model, error) {
	n := 0
	out, err := m.MapTensors(func(t *Tensor, _ bool) (*Tensor, error) {
		if len(t.Shape) != 3 || !strings.HasSuffix(t.Name, "_exps.weight") {
			return t, nil
		}
		if !t.Type.Decodable() {
			return nil, fmt.Errorf("experts %s are %s; MXFP4 encodes from F32, F16, BF16 or Q8_0", t.Name, t.Type)
		}
		data, err := EncodeMXFP4(t.Float32())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		n++
		return &Tensor{Name: t.Name, Type: MXFP4, Shape: append([]int(nil), t.Shape...), Data: data}, nil
	})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%s model has no experts to encode as MXFP4", m.Config.Arch)
	}
	return out, nil
}

package kvcache

import (
	"fmt"
	"strings"
)

// DType is the element type of the KV cache: what one key or value element
// costs in memory, and so how many tokens a pod holds. It is the one
// accounting of KV bytes in the project: executors size their caches, the
// runtime its block count and host tier, the metrics their bytes and the
// sim executor its roofline from it.
type DType uint8

const (
	// DTypeAuto is not a type but the choice left to the executor: the
	// model's activation type, as vLLM's cache_dtype "auto" (see
	// ResolveAuto).
	DTypeAuto DType = iota
	// DTypeF32 is IEEE single precision, 4 bytes per element.
	DTypeF32
	// DTypeF16 is IEEE half precision, 2 bytes per element: vLLM's and
	// llama.cpp's default.
	DTypeF16
	// DTypeBF16 is bfloat16, 2 bytes per element.
	DTypeBF16
	// DTypeQ8_0 is ggml's Q8_0: blocks of 32 elements, each an F16 scale
	// and 32 int8 values, 34 bytes per 32 elements (8.5 bits each). A row
	// must be a whole number of blocks.
	DTypeQ8_0
)

// Q8_0 block layout (ggml's block_q8_0).
const (
	q8Block      = 32
	q8BlockBytes = 34
)

var dtypeNames = [...]string{DTypeAuto: "auto", DTypeF32: "f32", DTypeF16: "f16", DTypeBF16: "bf16", DTypeQ8_0: "q8_0"}

// DTypeNames lists the spellings ParseDType accepts, for flag help and
// errors.
func DTypeNames() []string { return dtypeNames[:] }

// String is the type as --kv-cache-dtype and vllm:cache_config_info's
// cache_dtype label spell it.
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", d)
}

// ParseDType reads a KV cache type: auto, f32, f16, bf16 or q8_0 (any case;
// float32, float16, half, bfloat16 and fp32/fp16 as vLLM spells them, too).
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "":
		return DTypeAuto, nil
	case "f32", "fp32", "float32", "float":
		return DTypeF32, nil
	case "f16", "fp16", "float16", "half":
		return DTypeF16, nil
	case "bf16", "bfloat16":
		return DTypeBF16, nil
	case "q8_0":
		return DTypeQ8_0, nil
	}
	return 0, fmt.Errorf("unknown KV cache dtype %q (want one of %s)", s, strings.Join(DTypeNames(), ", "))
}

// MarshalText and UnmarshalText make a DType a flag.TextVar.
func (d DType) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses text with ParseDType.
func (d *DType) UnmarshalText(text []byte) error {
	v, err := ParseDType(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ResolveAuto returns d, or model when d is DTypeAuto.
func (d DType) ResolveAuto(model DType) DType {
	if d == DTypeAuto {
		return model
	}
	return d
}

// RowBytes is the size of a row of n elements; for Q8_0 n must be a
// multiple of 32. DTypeAuto has no size.
func (d DType) RowBytes(n int) (int64, error) {
	switch d {
	case DTypeF32:
		return 4 * int64(n), nil
	case DTypeF16, DTypeBF16:
		return 2 * int64(n), nil
	case DTypeQ8_0:
		if n%q8Block != 0 {
			return 0, fmt.Errorf("a q8_0 KV row holds whole blocks of %d elements, and this model's has %d", q8Block, n)
		}
		return int64(n/q8Block) * q8BlockBytes, nil
	case DTypeAuto:
		return 0, fmt.Errorf("KV cache dtype auto is not resolved to a type")
	}
	return 0, fmt.Errorf("unknown KV cache dtype %d", d)
}

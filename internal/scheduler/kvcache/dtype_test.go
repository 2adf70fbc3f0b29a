package kvcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDType(t *testing.T) {
	for in, want := range map[string]DType{
		"auto": DTypeAuto, "": DTypeAuto, "f32": DTypeF32, "FP32": DTypeF32, "float32": DTypeF32,
		"f16": DTypeF16, "half": DTypeF16, "float16": DTypeF16, "bf16": DTypeBF16, "bfloat16": DTypeBF16,
		"q8_0": DTypeQ8_0, " Q8_0 ": DTypeQ8_0,
	} {
		got, err := ParseDType(in)
		if err != nil || got != want {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"fp8", "q4_0", "int8", "f64"} {
		if _, err := ParseDType(bad); err == nil {
			t.Errorf("ParseDType(%q) accepted", bad)
		}
	}
	// Every name round-trips through String.
	for _, n := range DTypeNames() {
		d, err := ParseDType(n)
		if err != nil || d.String() != n {
			t.Errorf("ParseDType(%q) = %v, %v", n, d, err)
		}
	}
}

// TestBytesPerBlock: one table of what a block of Qwen2-0.5B's KV (24
// layers, 2 KV heads of 64) and Llama-3-8B's (32 layers, 8 KV heads of
// 128) costs in each type.
func TestBytesPerBlock(t *testing.T) {
	qwen := Geometry{Layers: 24, KVHeads: 2, HeadDim: 64}
	llama := Geometry{Layers: 32, KVHeads: 8, HeadDim: 128}
	got := map[string]int64{}
	for _, d := range []DType{DTypeF32, DTypeF16, DTypeBF16, DTypeQ8_0} {
		q, l := qwen, llama
		q.DType, l.DType = d, d
		got["qwen/"+d.String()] = q.BytesPerBlock(16)
		got["llama/"+d.String()] = l.BytesPerBlock(16)
	}
	want := map[string]int64{
		// 2 (K, V) × 24 layers × 16 tokens × 128 elements × size
		"qwen/f32": 393216, "qwen/f16": 196608, "qwen/bf16": 196608,
		"qwen/q8_0": 2 * 24 * 16 * 4 * 34, // 4 blocks of 32 per row, 34 bytes each
		"llama/f32": 4194304, "llama/f16": 2097152, "llama/bf16": 2097152,
		"llama/q8_0": 2 * 32 * 16 * 32 * 34,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BytesPerBlock (-want +got):\n%s", diff)
	}
}

// TestF16DoublesBlocks: on the same memory, an F16 cache holds twice the
// blocks of an F32 one, and Q8_0 32/17 of F16's.
func TestF16DoublesBlocks(t *testing.T) {
	g := Geometry{Layers: 24, KVHeads: 2, HeadDim: 64, DType: DTypeF32}
	budget := 1000 * g.BytesPerBlock(16)
	blocks := func(d DType) int {
		g.DType = d
		return BlocksForMemory(budget, g, 16)
	}
	f32, f16, q8 := blocks(DTypeF32), blocks(DTypeF16), blocks(DTypeQ8_0)
	if f16 != 2*f32 {
		t.Errorf("%d bytes hold %d F32 blocks and %d F16 blocks, want twice as many", budget, f32, f16)
	}
	if want := f16 * 32 / 17; q8 < want || q8 > want+1 {
		t.Errorf("%d bytes hold %d Q8_0 blocks, want %d (32/17 of F16's %d)", budget, q8, want, f16)
	}
}

func TestRowBytesQ8Alignment(t *testing.T) {
	if _, err := DTypeQ8_0.RowBytes(48); err == nil {
		t.Error("a Q8_0 row of 48 elements was accepted")
	}
	if _, err := DTypeAuto.RowBytes(64); err == nil {
		t.Error("auto has a size")
	}
	if err := (Geometry{Layers: 1, KVHeads: 3, HeadDim: 96, DType: DTypeQ8_0}).Validate(); err != nil {
		t.Errorf("3 heads of 96 in Q8_0: %v", err)
	}
}

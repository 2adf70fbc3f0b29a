//go:build amd64 && !purego

#include "textflag.h"

// See matrix_amd64.go for the summation order every kernel keeps.

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// REDUCE4 sums the lanes of four 8-lane accumulators (a..d, whose low
// halves are xa..xd) in the canonical tree and stores the four sums to dst.
// It clobbers X12-X15.
#define REDUCE4(a, b, c, d, xa, xb, xc, xd, dst) \
	VEXTRACTF128 $1, a, X12; \
	VADDPS       X12, xa, xa; \
	VEXTRACTF128 $1, b, X13; \
	VADDPS       X13, xb, xb; \
	VEXTRACTF128 $1, c, X14; \
	VADDPS       X14, xc, xc; \
	VEXTRACTF128 $1, d, X15; \
	VADDPS       X15, xd, xd; \
	VUNPCKLPS    xb, xa, X12; \
	VUNPCKHPS    xb, xa, X13; \
	VADDPS       X13, X12, X12; \
	VUNPCKLPS    xd, xc, X14; \
	VUNPCKHPS    xd, xc, X15; \
	VADDPS       X15, X14, X14; \
	VMOVLHPS     X14, X12, X13; \
	VMOVHLPS     X12, X14, X15; \
	VADDPS       X15, X13, X13; \
	VMOVUPS      X13, dst

// REDUCE1 sums the lanes of Y0 in the canonical tree into X0's low lane.
#define REDUCE1 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVHLPS     X0, X0, X1; \
	VADDPS       X1, X0, X0; \
	VMOVSHDUP    X0, X1; \
	VADDSS       X1, X0, X0

#define ZERO12 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11

// Row pointers: SI, BX, DX, R8 for rows 0-3 of w (row stride in R8 on entry).
#define ROWS4 \
	LEAQ (SI)(R8*1), BX; \
	LEAQ (BX)(R8*1), DX; \
	LEAQ (DX)(R8*1), R8

// The blocked kernels also prefetch (to L2) n bytes from pf.

// func f32x4x3(w *float32, ldw int, x *float32, ldx int, n int, out *float32, ldo int, pf *float32)
TEXT ·f32x4x3(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R8
	MOVQ x+16(FP), DI
	MOVQ ldx+24(FP), R9
	MOVQ n+32(FP), CX
	ROWS4
	LEAQ (DI)(R9*1), R10
	LEAQ (R10)(R9*1), R9
	MOVQ pf+56(FP), R11
	ZERO12
	XORQ AX, AX
	TESTQ CX, CX
	JEQ  f32x4x3reduce

f32x4x3loop:
	PREFETCHT1  (R11)(AX*1)
	VMOVUPS     (DI)(AX*1), Y12
	VMOVUPS     (R10)(AX*1), Y13
	VMOVUPS     (R9)(AX*1), Y14
	VMOVUPS     (SI)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS     (BX)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	VMOVUPS     (DX)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	VMOVUPS     (R8)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	ADDQ        $32, AX
	CMPQ        AX, CX
	JB          f32x4x3loop

f32x4x3reduce:
	MOVQ out+40(FP), DI
	MOVQ ldo+48(FP), R9
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, X2, X3, (DI))
	ADDQ R9, DI
	REDUCE4(Y4, Y5, Y6, Y7, X4, X5, X6, X7, (DI))
	ADDQ R9, DI
	REDUCE4(Y8, Y9, Y10, Y11, X8, X9, X10, X11, (DI))
	VZEROUPPER
	RET

// func f32x4x2(w *float32, ldw int, x *float32, ldx int, n int, out *float32, ldo int, pf *float32)
TEXT ·f32x4x2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R8
	MOVQ x+16(FP), DI
	MOVQ ldx+24(FP), R9
	MOVQ n+32(FP), CX
	ROWS4
	ADDQ DI, R9
	MOVQ pf+56(FP), R11
	ZERO12
	XORQ AX, AX
	TESTQ CX, CX
	JEQ  f32x4x2reduce

f32x4x2loop:
	PREFETCHT1  (R11)(AX*1)
	VMOVUPS     (DI)(AX*1), Y12
	VMOVUPS     (R9)(AX*1), Y13
	VMOVUPS     (SI)(AX*1), Y14
	VMOVUPS     (BX)(AX*1), Y15
	VFMADD231PS Y14, Y12, Y0
	VFMADD231PS Y14, Y13, Y4
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VMOVUPS     (DX)(AX*1), Y14
	VMOVUPS     (R8)(AX*1), Y15
	VFMADD231PS Y14, Y12, Y2
	VFMADD231PS Y14, Y13, Y6
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	ADDQ        $32, AX
	CMPQ        AX, CX
	JB          f32x4x2loop

f32x4x2reduce:
	MOVQ out+40(FP), DI
	MOVQ ldo+48(FP), R9
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, X2, X3, (DI))
	ADDQ R9, DI
	REDUCE4(Y4, Y5, Y6, Y7, X4, X5, X6, X7, (DI))
	VZEROUPPER
	RET

// func f32x4x1(w *float32, ldw int, x *float32, n int, out *float32)
TEXT ·f32x4x1(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), R8
	MOVQ x+16(FP), DI
	MOVQ n+24(FP), CX
	ROWS4
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
	TESTQ CX, CX
	JEQ  f32x4x1reduce

	// Two steps at a time where n allows: the accumulators' chains stay
	// the same, the loop overhead halves.
	MOVQ CX, R9
	ANDQ $~63, R9
	JEQ  f32x4x1one

f32x4x1two:
	VMOVUPS     (DI)(AX*1), Y12
	VMOVUPS     32(DI)(AX*1), Y13
	VFMADD231PS (SI)(AX*1), Y12, Y0
	VFMADD231PS (BX)(AX*1), Y12, Y1
	VFMADD231PS (DX)(AX*1), Y12, Y2
	VFMADD231PS (R8)(AX*1), Y12, Y3
	VFMADD231PS 32(SI)(AX*1), Y13, Y0
	VFMADD231PS 32(BX)(AX*1), Y13, Y1
	VFMADD231PS 32(DX)(AX*1), Y13, Y2
	VFMADD231PS 32(R8)(AX*1), Y13, Y3
	ADDQ        $64, AX
	CMPQ        AX, R9
	JB          f32x4x1two
	CMPQ        AX, CX
	JEQ         f32x4x1reduce

f32x4x1one:
	VMOVUPS     (DI)(AX*1), Y12
	VFMADD231PS (SI)(AX*1), Y12, Y0
	VFMADD231PS (BX)(AX*1), Y12, Y1
	VFMADD231PS (DX)(AX*1), Y12, Y2
	VFMADD231PS (R8)(AX*1), Y12, Y3
	ADDQ        $32, AX
	CMPQ        AX, CX
	JB          f32x4x1one

f32x4x1reduce:
	MOVQ out+32(FP), DI
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, X2, X3, (DI))
	VZEROUPPER
	RET

// func f32dot(w, x *float32, n int) float32
TEXT ·f32dot(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	XORQ AX, AX
	TESTQ CX, CX
	JEQ  f32dotreduce

f32dotloop:
	VMOVUPS     (DI)(AX*1), Y1
	VFMADD231PS (SI)(AX*1), Y1, Y0
	ADDQ        $32, AX
	CMPQ        AX, CX
	JB          f32dotloop

f32dotreduce:
	REDUCE1
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// Q8_0: DEQ widens the 8 int8 weights at src to f32 in dst and scales them
// by s (exact: an int8 times an f16-derived scale fits in 24 bits).
#define DEQ(src, s, dst) \
	VPMOVSXBD src, dst; \
	VCVTDQ2PS dst, dst; \
	VMULPS    s, dst, dst

// Q8 row pointers: SI, BX, DX, R8 (q rows, stride R8 on entry); R11-R14
// (scale rows, stride R12 on entry).
#define Q8ROWS \
	ROWS4; \
	LEAQ (R11)(R12*1), R13; \
	LEAQ (R13)(R12*1), R14; \
	LEAQ (R14)(R12*1), R10; \
	MOVQ R13, R12; \
	MOVQ R14, R13; \
	MOVQ R10, R14

// One 8-column step of q8x4x2 at byte offset qo within the block (xo = 4·qo).
#define Q8STEP2(qo, xo) \
	VMOVUPS     xo(DI)(AX*4), Y12; \
	VMOVUPS     xo(R9)(AX*4), Y13; \
	DEQ(qo(SI)(AX*1), Y8, Y14); \
	DEQ(qo(BX)(AX*1), Y9, Y15); \
	VFMADD231PS Y14, Y12, Y0; \
	VFMADD231PS Y14, Y13, Y4; \
	VFMADD231PS Y15, Y12, Y1; \
	VFMADD231PS Y15, Y13, Y5; \
	DEQ(qo(DX)(AX*1), Y10, Y14); \
	DEQ(qo(R8)(AX*1), Y11, Y15); \
	VFMADD231PS Y14, Y12, Y2; \
	VFMADD231PS Y14, Y13, Y6; \
	VFMADD231PS Y15, Y12, Y3; \
	VFMADD231PS Y15, Y13, Y7

// func q8x4x2(q *int8, ldq int, sc *float32, lds int, x *float32, ldx int, nb int, out *float32, ldo int)
TEXT ·q8x4x2(SB), NOSPLIT, $0-72
	MOVQ q+0(FP), SI
	MOVQ ldq+8(FP), R8
	MOVQ sc+16(FP), R11
	MOVQ lds+24(FP), R12
	MOVQ x+32(FP), DI
	MOVQ ldx+40(FP), R9
	MOVQ nb+48(FP), CX
	Q8ROWS
	ADDQ DI, R9
	SHLQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	XORQ R10, R10
	TESTQ CX, CX
	JEQ  q8x4x2reduce

q8x4x2loop:
	VBROADCASTSS (R11)(R10*1), Y8
	VBROADCASTSS (R12)(R10*1), Y9
	VBROADCASTSS (R13)(R10*1), Y10
	VBROADCASTSS (R14)(R10*1), Y11
	Q8STEP2(0, 0)
	Q8STEP2(8, 32)
	Q8STEP2(16, 64)
	Q8STEP2(24, 96)
	ADDQ $32, AX
	ADDQ $4, R10
	CMPQ AX, CX
	JB   q8x4x2loop

q8x4x2reduce:
	MOVQ out+56(FP), DI
	MOVQ ldo+64(FP), R9
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, X2, X3, (DI))
	ADDQ R9, DI
	REDUCE4(Y4, Y5, Y6, Y7, X4, X5, X6, X7, (DI))
	VZEROUPPER
	RET

#define Q8STEP1(qo, xo) \
	VMOVUPS     xo(DI)(AX*4), Y12; \
	DEQ(qo(SI)(AX*1), Y8, Y14); \
	DEQ(qo(BX)(AX*1), Y9, Y15); \
	VFMADD231PS Y14, Y12, Y0; \
	VFMADD231PS Y15, Y12, Y1; \
	DEQ(qo(DX)(AX*1), Y10, Y14); \
	DEQ(qo(R8)(AX*1), Y11, Y15); \
	VFMADD231PS Y14, Y12, Y2; \
	VFMADD231PS Y15, Y12, Y3

// func q8x4x1(q *int8, ldq int, sc *float32, lds int, x *float32, nb int, out *float32)
TEXT ·q8x4x1(SB), NOSPLIT, $0-56
	MOVQ q+0(FP), SI
	MOVQ ldq+8(FP), R8
	MOVQ sc+16(FP), R11
	MOVQ lds+24(FP), R12
	MOVQ x+32(FP), DI
	MOVQ nb+40(FP), CX
	Q8ROWS
	SHLQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
	XORQ R10, R10
	TESTQ CX, CX
	JEQ  q8x4x1reduce

q8x4x1loop:
	VBROADCASTSS (R11)(R10*1), Y8
	VBROADCASTSS (R12)(R10*1), Y9
	VBROADCASTSS (R13)(R10*1), Y10
	VBROADCASTSS (R14)(R10*1), Y11
	Q8STEP1(0, 0)
	Q8STEP1(8, 32)
	Q8STEP1(16, 64)
	Q8STEP1(24, 96)
	ADDQ $32, AX
	ADDQ $4, R10
	CMPQ AX, CX
	JB   q8x4x1loop

q8x4x1reduce:
	MOVQ out+48(FP), DI
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, X2, X3, (DI))
	VZEROUPPER
	RET

// func q8dot(q *int8, sc *float32, x *float32, nb int) float32
TEXT ·q8dot(SB), NOSPLIT, $0-36
	MOVQ q+0(FP), SI
	MOVQ sc+8(FP), R11
	MOVQ x+16(FP), DI
	MOVQ nb+24(FP), CX
	SHLQ $5, CX
	VXORPS Y0, Y0, Y0
	XORQ AX, AX
	XORQ R10, R10
	TESTQ CX, CX
	JEQ  q8dotreduce

q8dotloop:
	VBROADCASTSS (R11)(R10*1), Y8
	DEQ((SI)(AX*1), Y8, Y1)
	VFMADD231PS (DI)(AX*4), Y1, Y0
	DEQ(8(SI)(AX*1), Y8, Y1)
	VFMADD231PS 32(DI)(AX*4), Y1, Y0
	DEQ(16(SI)(AX*1), Y8, Y1)
	VFMADD231PS 64(DI)(AX*4), Y1, Y0
	DEQ(24(SI)(AX*1), Y8, Y1)
	VFMADD231PS 96(DI)(AX*4), Y1, Y0
	ADDQ $32, AX
	ADDQ $4, R10
	CMPQ AX, CX
	JB   q8dotloop

q8dotreduce:
	REDUCE1
	VMOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func axpyF32(dst, x *float32, a float32, n int)
TEXT ·axpyF32(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	VBROADCASTSS a+16(FP), Y0
	MOVQ         n+24(FP), CX
	XORQ         AX, AX
	TESTQ        CX, CX
	JEQ          axpydone

axpyloop:
	VMOVUPS     (DI)(AX*1), Y1
	VFMADD231PS (SI)(AX*1), Y0, Y1
	VMOVUPS     Y1, (DI)(AX*1)
	ADDQ        $32, AX
	CMPQ        AX, CX
	JB          axpyloop

axpydone:
	VZEROUPPER
	RET

// func f32pairs4(k *float32, ldk int, q *float32, ldq int, n int, out *float32)
TEXT ·f32pairs4(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), SI
	MOVQ ldk+8(FP), R8
	MOVQ q+16(FP), DI
	MOVQ ldq+24(FP), R9
	MOVQ n+32(FP), CX
	ROWS4
	LEAQ (DI)(R9*1), R10
	LEAQ (R10)(R9*1), R11
	ADDQ R11, R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
	TESTQ CX, CX
	JEQ  f32pairs4reduce

f32pairs4loop:
	VMOVUPS     (DI)(AX*1), Y4
	VMOVUPS     (R10)(AX*1), Y5
	VMOVUPS     (R11)(AX*1), Y6
	VMOVUPS     (R9)(AX*1), Y7
	VFMADD231PS (SI)(AX*1), Y4, Y0
	VFMADD231PS (BX)(AX*1), Y5, Y1
	VFMADD231PS (DX)(AX*1), Y6, Y2
	VFMADD231PS (R8)(AX*1), Y7, Y3
	ADDQ        $32, AX
	CMPQ        AX, CX
	JB          f32pairs4loop

f32pairs4reduce:
	MOVQ out+40(FP), DI
	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, X2, X3, (DI))
	VZEROUPPER
	RET

// func axpySegF32(dst, x, w *float32, nseg, seg int)
TEXT ·axpySegF32(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ nseg+24(FP), BX
	MOVQ seg+32(FP), CX
	TESTQ BX, BX
	JEQ  axpysegdone

axpysegnext:
	VBROADCASTSS (DX), Y0
	XORQ         AX, AX

axpyseg4:
	// Segments are multiples of 8 floats; take 4 vectors at a time while
	// they last.
	LEAQ 128(AX), R8
	CMPQ R8, CX
	JA   axpyseg1
	VMOVUPS     (DI)(AX*1), Y1
	VMOVUPS     32(DI)(AX*1), Y2
	VMOVUPS     64(DI)(AX*1), Y3
	VMOVUPS     96(DI)(AX*1), Y4
	VFMADD231PS (SI)(AX*1), Y0, Y1
	VFMADD231PS 32(SI)(AX*1), Y0, Y2
	VFMADD231PS 64(SI)(AX*1), Y0, Y3
	VFMADD231PS 96(SI)(AX*1), Y0, Y4
	VMOVUPS     Y1, (DI)(AX*1)
	VMOVUPS     Y2, 32(DI)(AX*1)
	VMOVUPS     Y3, 64(DI)(AX*1)
	VMOVUPS     Y4, 96(DI)(AX*1)
	MOVQ        R8, AX
	JMP         axpyseg4

axpyseg1:
	CMPQ AX, CX
	JAE  axpysegend
	VMOVUPS     (DI)(AX*1), Y1
	VFMADD231PS (SI)(AX*1), Y0, Y1
	VMOVUPS     Y1, (DI)(AX*1)
	ADDQ        $32, AX
	JMP         axpyseg1

axpysegend:
	ADDQ CX, DI
	ADDQ CX, SI
	ADDQ $4, DX
	DECQ BX
	JNE  axpysegnext

axpysegdone:
	VZEROUPPER
	RET

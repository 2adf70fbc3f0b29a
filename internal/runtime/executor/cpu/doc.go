// Package cpu is the pure-Go transformer executor: a Llama-family forward
// pass (RMSNorm, RoPE, grouped-query attention over the engine's paged KV
// blocks, SwiGLU) that runs one engine iteration as one batched pass.
//
// All tokens an iteration schedules, across all its sequences, form one
// activation matrix, so each weight matrix is read from memory once per
// iteration whatever the batch size: decode at batch 32 costs little more
// memory traffic than at batch 1, which is why batching pays.
//
// Numerics: every dot product is computed in the same order whatever the
// batch's shape, so a sequence's logits are bit-for-bit the same alone or
// batched, in one prompt chunk or several, and from shared prefix blocks.
//
// On amd64 with AVX2 and FMA the matrix and attention kernels are Go
// assembly (matrix_amd64.s; the purego tag or another GOARCH selects the
// pure-Go kernels): 8-lane FMA sums in a fixed order of their own
// (matrix_amd64.go), register-blocked four weight rows × three tokens so
// each weight load serves three tokens.
package cpu

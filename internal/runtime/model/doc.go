// Package model holds what the cpu executor and the runtime need to know about
// a Llama-family model: its geometry (Config), its weights, its tokenizer and
// its chat template. Models come from GGUF v3 files (memory-mapped, read-only)
// or are built in memory (Builtin, Random) and can be written back as GGUF.
package model

// Package model holds what the executors and the runtime need to know about
// a model: its geometry (Config, read by its architecture: see
// internal/runtime/arch and architectures.go, the registry), its weights,
// its tokenizer and its chat template. Models come from GGUF v3 files (memory-mapped, read-only)
// or are built in memory (Builtin, Random) and can be written back as GGUF.
package model

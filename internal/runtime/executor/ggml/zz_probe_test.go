//go:build linux && (amd64 || arm64)

package ggml

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

func taskCPU() map[string]int64 {
	out := map[string]int64{}
	ds, _ := os.ReadDir("/proc/self/task")
	for _, d := range ds {
		raw, err := os.ReadFile(filepath.Join("/proc/self/task", d.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		i := strings.LastIndex(s, ")")
		name := s[strings.Index(s, "(")+1 : i]
		f := strings.Fields(s[i+2:])
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[d.Name()+" "+name] = u + st
	}
	return out
}

func TestZZProbeDecodeThreads(t *testing.T) {
	v := vsModel{label: "qwen3moe", file: "qwen3moe-bench", cfg: qwen3moeBenchConfig, typ: model.Q8_0}
	dir := os.Getenv("PROBE_DIR")
	path := filepath.Join(dir, "probe.gguf")
	if _, err := os.Stat(path); err != nil {
		m, _ := model.Random(v.cfg, 1).Convert(v.typ)
		writeModel(t, m, path)
	}
	m, err := model.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ge, err := New(m, 256, benchBlockSize, Options{LibDir: testLibDir(t), Device: DeviceCPU, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ge.Close()
	vocab := m.Config.VocabSize
	blocks := contiguous(0, 200)
	run := func(seq batch.Seq) int32 {
		bt := &batch.Batch{Seqs: []batch.Seq{seq}, NumTokens: len(seq.Tokens), BlockSize: benchBlockSize}
		out := &batch.Output{Logits: make([][]float32, 1)}
		if err := ge.Execute(context.Background(), bt, out); err != nil {
			t.Fatal(err)
		}
		return argmax(out.Logits[0])
	}
	prompt := make([]int32, 512)
	for i := range prompt {
		prompt[i] = int32((i * 7919) % vocab)
	}
	tok := run(batch.Seq{Tokens: prompt, Blocks: blocks, Sample: true})
	before := taskCPU()
	c0 := processCPU()
	t0 := time.Now()
	const n = 200
	for i := range n {
		tok = run(batch.Seq{Tokens: []int32{tok}, Pos: 512 + i, Blocks: blocks, Sample: true})
	}
	wall := time.Since(t0)
	cpu := processCPU() - c0
	after := taskCPU()
	type kv struct {
		k string
		v int64
	}
	var ds []kv
	for k, a := range after {
		if d := a - before[k]; d > 0 {
			ds = append(ds, kv{k, d})
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].v > ds[j].v })
	fmt.Printf("decode %d steps: wall %v (%.1f tok/s), process CPU %v (%.1f tok/s by CPU); built %d reused %d\n", n, wall, n/wall.Seconds(), cpu, n/cpu.Seconds(), ge.graphsBuilt, ge.graphsReused)
	for _, d := range ds {
		fmt.Printf("  thread %s: %d ticks\n", d.k, d.v)
	}
}

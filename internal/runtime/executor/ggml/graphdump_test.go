//go:build linux && (amd64 || arm64)

package ggml

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/exectest"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/scheduler/batch"
)

// graphDump binds what dumping a built graph needs (test-only): its nodes
// and each node's op name and buffer type, read from ggml_tensor's fields
// at ggml.h's offsets (type, buffer, ne, op, src).
type graphDump struct {
	nNodes  func(cGraph) int32
	node    func(cGraph, int32) cTensor
	opName  func(cTensor) string
	typName func(int32) string
	bufType func(uintptr) cBuft
}

func newGraphDump(t testing.TB, l *Library) *graphDump {
	d := &graphDump{}
	sym := func(fptr any, name string) {
		p, err := purego.Dlsym(l.base, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		purego.RegisterFunc(fptr, p)
	}
	sym(&d.nNodes, "ggml_graph_n_nodes")
	sym(&d.node, "ggml_graph_node")
	sym(&d.opName, "ggml_op_desc")
	sym(&d.typName, "ggml_type_name")
	sym(&d.bufType, "ggml_backend_buffer_get_type")
	return d
}

func field[T any](t cTensor, off uintptr) T {
	return *(*T)(unsafe.Add(cPtr(uintptr(t)), off))
}

// describe is a tensor as "TYPE[ne0,ne1,ne2,ne3]".
func (d *graphDump) describe(e *Executor, t cTensor) string {
	ne := field[[4]int64](t, offNe)
	s := fmt.Sprintf("%s%v", d.typName(field[int32](t, offType)), ne)
	if b := field[uintptr](t, offBuf); b != 0 {
		if bt := d.bufType(b); bt != 0 {
			if n := e.a.buftName(bt); n != "CPU" {
				s += "@" + n
			}
		}
	}
	return s
}

// dump is one line per node of g: op, result, sources.
func (d *graphDump) dump(e *Executor, g cGraph) []string {
	var out []string
	for i := int32(0); i < d.nNodes(g); i++ {
		n := d.node(g, i)
		line := fmt.Sprintf("%4d %-14s %s <-", i, d.opName(n), d.describe(e, n))
		for j := uintptr(0); j < 10; j++ {
			s := field[cTensor](n, offSrc+8*j)
			if s == 0 {
				break
			}
			line += " " + d.describe(e, s)
		}
		out = append(out, line)
	}
	return out
}

// timeNodes computes g one node at a time, in its order (so each node
// reads what the ones before it wrote, as in one compute), and returns
// each node's time. It edits ggml_cgraph's nodes and n_nodes fields
// (ggml-impl.h: size, n_nodes, n_leafs, nodes) for each call and puts
// them back.
func (d *graphDump) timeNodes(e *Executor, g cGraph) []time.Duration {
	base := cPtr(uintptr(g))
	nNodes := (*int32)(unsafe.Add(base, 4))
	nodes := (*uintptr)(unsafe.Add(base, 16))
	n, first := *nNodes, *nodes
	defer func() { *nNodes, *nodes = n, first }()
	times := make([]time.Duration, n)
	for i := range n {
		*nNodes, *nodes = 1, first+8*uintptr(i)
		start := time.Now()
		e.a.graphCompute(e.be.h, g)
		times[i] = time.Since(start)
	}
	return times
}

// TestDumpMoEGraph writes the nodes of a qwen3moe prefill graph (the bench
// model's layout, two layers) to $KVPILOT_GRAPH_DUMP, to compare with what
// llama.cpp builds. A diagnostic: it runs only when that is set.
func TestDumpMoEGraph(t *testing.T) {
	path := os.Getenv("KVPILOT_GRAPH_DUMP")
	if path == "" {
		t.Skip("KVPILOT_GRAPH_DUMP not set")
	}
	cfg := qwen3moeBenchConfig
	cfg.Layers = 2
	if n, err := strconv.Atoi(os.Getenv("KVPILOT_GRAPH_DUMP_LAYERS")); err == nil {
		cfg.Layers = n
	}
	m, err := model.Random(cfg, 1).Convert(model.Q8_0)
	if err != nil {
		t.Fatal(err)
	}
	// As the bench runs it: from a GGUF file, 256 blocks of 16.
	file := filepath.Join(t.TempDir(), "m.gguf")
	writeModel(t, m, file)
	if m, err = model.Open(file, nil); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := New(m, 256, benchBlockSize, Options{LibDir: testLibDir(t), Device: testDevice(), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt := make([]int32, benchPrompt)
	for i := range prompt {
		prompt[i] = int32((i * 7919) % cfg.VocabSize)
	}
	seq := batch.Seq{Tokens: prompt, Blocks: contiguous(0, (benchPrompt+benchDecode)/benchBlockSize+1), Sample: true}
	exectest.Execute(t, e, benchBlockSize, []batch.Seq{seq}) // warm: page the buffers in
	for range 3 {
		u0, s0 := rusage()
		start := time.Now()
		var inCompute time.Duration
		e.computeHook = func(g cGraph) error {
			c := time.Now()
			defer func() { inCompute += time.Since(c) }()
			if st := e.a.graphCompute(e.be.h, g); st != gStatusSuccess {
				return fmt.Errorf("status %d", st)
			}
			return nil
		}
		exectest.Execute(t, e, benchBlockSize, []batch.Seq{seq})
		u1, s1 := rusage()
		t.Logf("prefill of %d: wall %v, compute %v, user %v, sys %v", len(prompt), time.Since(start), inCompute, u1-u0, s1-s0)
	}
	d := newGraphDump(t, e.lib)
	var times []time.Duration
	e.computeHook = func(g cGraph) error {
		times = d.timeNodes(e, g)
		return nil
	}
	exectest.Execute(t, e, benchBlockSize, []batch.Seq{seq})
	lines := d.dump(e, e.graph.g)
	byOp := map[string]time.Duration{}
	var total time.Duration
	for i, l := range lines {
		lines[i] = fmt.Sprintf("%8.3fms %s", times[i].Seconds()*1e3, l)
		byOp[strings.Fields(l)[1]] += times[i]
		total += times[i]
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return byOp[ops[i]] > byOp[ops[j]] })
	for _, op := range ops {
		t.Logf("%-16s %8.2fms %5.1f%%", op, byOp[op].Seconds()*1e3, 100*byOp[op].Seconds()/total.Seconds())
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d nodes; weights %s", len(lines), e.Weights())
}

func rusage() (user, sys time.Duration) {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano()), time.Duration(u.Stime.Nano())
}

// TestLastMLPOnSampledRows checks that a prefill runs its last layer's
// experts for the sampled row alone (as llama.cpp's qwen3moe graph does;
// its gpt-oss, qwen35moe and qwen3next graphs run them for every token),
// and the layers before it for every token.
func TestLastMLPOnSampledRows(t *testing.T) {
	for _, cfg := range []model.Config{qwen3moeConfig(), gptossConfig(), qwen35moeConfig(), qwen3nextConfig()} {
		t.Run(cfg.Arch, func(t *testing.T) {
			m, err := model.Random(cfg, 1).Convert(model.Q8_0)
			if err != nil {
				t.Fatal(err)
			}
			e := newTestExec(t, m, 8)
			prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
			execute(t, e, []batch.Seq{{Tokens: prompt, Blocks: contiguous(0, 3), Sample: true}})
			d := newGraphDump(t, e.lib)
			var rows []int64 // per MUL_MAT_ID node, its tokens
			for i := int32(0); i < d.nNodes(e.graph.g); i++ {
				if n := d.node(e.graph.g, i); d.opName(n) == "MUL_MAT_ID" {
					rows = append(rows, field[[4]int64](n, offNe)[2])
				}
			}
			layers := m.Config.Layers
			if len(rows) != 3*layers {
				t.Fatalf("%d MUL_MAT_ID nodes, want 3 a layer over %d layers", len(rows), layers)
			}
			for i, r := range rows {
				want := int64(len(prompt))
				if i/3 == layers-1 {
					want = 1
				}
				if r != want {
					t.Errorf("layer %d's experts ran for %d tokens, want %d", i/3, r, want)
				}
			}
		})
	}
}

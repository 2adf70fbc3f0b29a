package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kvpilot/kvpilot/internal/runtime/chatformat"
	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseOptionsDefaults(t *testing.T) {
	o, err := parseOptions(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := options{
		Model: "builtin:tiny", Executor: "cpu", SimAccelerator: "H100-SXM", SimModel: "llama-3.1-8b", TensorParallel: 1,
		Host: "0.0.0.0", Port: 8000, ControlPort: 8081, ProgramIdle: 10 * time.Minute, MaxNumSeqs: 256, MaxNumBatchedTokens: 2048, MaxNumPartialPrefills: 4, BlockSize: 16,
		KVCacheMemoryFraction: 0.9, MaxQueue: 4096, AgingRate: 0.1, DrainTimeout: 30 * time.Second, SWACache: "window",
		MaxBodyBytes: 4 << 20, PreprocessMemory: 512 << 20, StreamWriteTimeout: 5 * time.Second, StreamStallTimeout: 10 * time.Second, StreamMaxBuffered: 1 << 20, LogLevel: slog.LevelInfo,
		ResponsesStoreEntries: 1024, ResponsesStoreBytes: 64 << 20, GGMLFlashMaxSeqs: ggmlFlashAuto, GGMLDeviceArgmax: true,
	}
	if d := cmp.Diff(want, *o); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
}

func TestParseOptionsEnvAndFlags(t *testing.T) {
	o, err := parseOptions(
		[]string{"--executor", "sim", "--max-num-seqs=8", "--stop", "END", "--stop", "\n\n", "-kv-cache-memory", "512Mi",
			"--long-prefill-token-threshold", "-1", "--max-long-partial-prefills", "2"},
		env(map[string]string{
			"KVPILOT_MAX_NUM_PARTIAL_PREFILLS": "3",
			"KVPILOT_MAX_NUM_SEQS":             "99", // the flag wins
			"KVPILOT_PORT":                     "9000",
			"KVPILOT_DRAIN_TIMEOUT":            "5s",
			"KVPILOT_LOG_LEVEL":                "debug",
			"KVPILOT_MAX_BODY_BYTES":           "1Mi",
			"KVPILOT_SIM_MODEL":                "llama-3.1-70b",
		}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.Executor, o.MaxNumSeqs, []string(o.Stop), int64(o.KVCacheMemory), o.Port, o.DrainTimeout, o.LogLevel, int64(o.MaxBodyBytes), o.SimModel,
		o.LongPrefillTokenThreshold, o.MaxNumPartialPrefills, o.MaxLongPartialPrefills}
	want := []any{"sim", 8, []string{"END", "\n\n"}, int64(512 << 20), 9000, 5 * time.Second, slog.LevelDebug, int64(1 << 20), "llama-3.1-70b",
		-1, 3, 2}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestParseOptionsStopFromEnv(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want []string
	}{
		{`["a","b,c"]`, []string{"a", "b,c"}},
		{`</s>`, []string{"</s>"}},
	} {
		o, err := parseOptions(nil, env(map[string]string{"KVPILOT_STOP": tt.env}), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tt.want, []string(o.Stop)); d != "" {
			t.Errorf("KVPILOT_STOP=%s (-want +got):\n%s", tt.env, d)
		}
	}
}

func TestParseOptionsErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
	}{
		{args: []string{"--executor", "gpu"}},
		{args: []string{"--executor", "ggml", "--device", "gpu"}},
		{args: []string{"--device", "cpu"}},                                   // --device is the ggml executor's
		{args: []string{"--ggml-flash-max-seqs", "4"}},                        // the ggml executor's too
		{args: []string{"--executor", "ggml", "--ggml-flash-max-seqs", "-2"}}, // -1 is the device's default
		{args: []string{"--ggml-device-argmax"}},                              // the ggml executor's, when given
		{args: []string{"--ggml-cuda-graphs"}},                                // the ggml executor's
		{args: []string{"--port", "70000"}},
		{args: []string{"--preprocess-memory", "0"}},
		{args: []string{"--max-num-seqs", "0"}},
		{args: []string{"--max-num-partial-prefills", "0"}},
		{args: []string{"--max-long-partial-prefills", "5"}}, // more than --max-num-partial-prefills
		{args: []string{"--max-long-partial-prefills", "-1"}},
		{args: []string{"--kv-cache-memory", "lots"}},
		{args: []string{"--kv-cache-memory-fraction", "1.5"}},
		{args: []string{"--aging-rate", "NaN"}},
		{args: []string{"--aging-rate", "+Inf"}},
		{env: map[string]string{"KVPILOT_AGING_RATE": "Inf"}},
		{args: []string{"--log-level", "loud"}},
		{args: []string{"positional"}},
		{args: []string{"--stop", ""}},
		{env: map[string]string{"KVPILOT_MAX_QUEUE": "many"}},
		{env: map[string]string{"KVPILOT_STOP": `["unterminated`}},
		{args: []string{"--kv-cache-dtype", "fp8"}},
		{args: []string{"--kv-cache-dtype", "f16"}}, // the cpu executor keeps f32
		{args: []string{"--executor", "cpu", "--kv-cache-dtype", "q8_0"}},
		{args: []string{"--executor", "sim", "--kv-cache-memory-fraction", "0"}},
		// The fraction sizes the KV cache from a GPU's memory.
		{args: []string{"--kv-cache-memory-fraction", "0.5"}},
		{env: map[string]string{"KVPILOT_KV_CACHE_MEMORY_FRACTION": "0.5"}},
		{args: []string{"--executor", "ggml", "--device", "cpu", "--kv-cache-memory-fraction", "0.5"}},
		{args: []string{"--executor", "sim", "--kv-cache-memory-fraction", "0.5", "--kv-cache-memory", "1Gi"}},
		{args: []string{"--executor", "ggml", "--kv-cache-blocks", "100"}, env: map[string]string{"KVPILOT_KV_CACHE_MEMORY_FRACTION": "0.9"}},
		// Only the sim executor spans devices.
		{args: []string{"--tensor-parallel", "2"}},
		{args: []string{"--executor", "ggml", "--tensor-parallel", "2"}},
		{args: []string{"--tool-call-parser", "qwen3"}},
		{args: []string{"--reasoning-parser", "deepseek"}},
		{env: map[string]string{"KVPILOT_TOOL_CALL_PARSER": "nope"}},
	} {
		if _, err := parseOptions(tt.args, env(tt.env), io.Discard); err == nil {
			t.Errorf("args %q env %v: want an error", tt.args, tt.env)
		}
	}
}

// TestParseOptionsGPUSettings: the settings only some executors use are
// accepted there, and a given fraction is told apart from the default.
func TestParseOptionsGPUSettings(t *testing.T) {
	for _, tt := range []struct {
		args        []string
		env         map[string]string
		fractionSet bool
	}{
		{args: []string{"--executor", "sim"}},
		{args: []string{"--executor", "sim", "--tensor-parallel", "4", "--kv-cache-memory-fraction", "0.8"}, fractionSet: true},
		{args: []string{"--executor", "ggml", "--kv-cache-memory-fraction", "0.9"}, fractionSet: true},
		{args: []string{"--executor", "ggml", "--device", "cuda"}, env: map[string]string{"KVPILOT_KV_CACHE_MEMORY_FRACTION": "1"}, fractionSet: true},
		{args: []string{"--executor", "ggml", "--tensor-parallel", "1", "--kv-cache-memory", "8Gi"}},
	} {
		o, err := parseOptions(tt.args, env(tt.env), io.Discard)
		if err != nil {
			t.Errorf("%q env %v: %v", tt.args, tt.env, err)
			continue
		}
		if o.KVCacheMemoryFractionSet != tt.fractionSet {
			t.Errorf("%q env %v: fraction set = %v, want %v", tt.args, tt.env, o.KVCacheMemoryFractionSet, tt.fractionSet)
		}
	}
}

// TestCRDEngineDefaultsMatchFlags: the InferencePool CEL rules that compare
// maxNumBatchedTokens with maxNumSeqs, and maxLongPartialPrefills with
// maxNumPartialPrefills, fall back to the runtime's defaults when one is
// unset, and must name the defaults these flags have.
func TestCRDEngineDefaultsMatchFlags(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "api", "v1alpha1", "inferencepool_types.go"))
	if err != nil {
		t.Fatal(err)
	}
	fs := newFlagSet(&options{}, io.Discard)
	rule := fmt.Sprintf("(has(self.maxNumBatchedTokens) ? self.maxNumBatchedTokens : %s) >= (has(self.maxNumSeqs) ? self.maxNumSeqs : %s)",
		fs.Lookup("max-num-batched-tokens").DefValue, fs.Lookup("max-num-seqs").DefValue)
	if !strings.Contains(string(src), rule) {
		t.Errorf("api/v1alpha1/inferencepool_types.go has no rule %s: update its defaults to the flags'", rule)
	}
	rule = fmt.Sprintf("self.maxLongPartialPrefills <= (has(self.maxNumPartialPrefills) ? self.maxNumPartialPrefills : %s)",
		fs.Lookup("max-num-partial-prefills").DefValue)
	if !strings.Contains(string(src), rule) {
		t.Errorf("api/v1alpha1/inferencepool_types.go has no rule %s: update its default to the flag's", rule)
	}
}

// TestCRDChatFormatsMatchRuntime: the InferencePool's engine.toolCallParser
// and engine.reasoningParser enums (in the generated CRD) are the
// runtime's registered formats and "none", so a format added to the
// runtime is offered by the API and the API offers none the runtime would
// refuse at start.
func TestCRDChatFormatsMatchRuntime(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "serving.kvpilot.dev_inferencepools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type props map[string]struct {
		Enum       []string `json:"enum"`
		Properties props    `json:"properties"`
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties props `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(src, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) == 0 {
		t.Fatal("the CRD has no versions")
	}
	engine := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["engine"].Properties
	for field, names := range map[string][]string{
		"toolCallParser":  chatformat.Names(),
		"reasoningParser": chatformat.ReasoningNames(),
	} {
		want := append(slices.Clone(names), "none")
		got := slices.Clone(engine[field].Enum)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("spec.engine.%s enum %q, want the runtime's %q: update the marker in api/v1alpha1/inferencepool_types.go and run make manifests", field, got, want)
		}
	}
}

func TestParseOptionsKVCacheDType(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want kvcache.DType
	}{
		{args: []string{"--executor", "ggml"}, want: kvcache.DTypeAuto},
		{args: []string{"--executor", "ggml", "--kv-cache-dtype", "q8_0"}, want: kvcache.DTypeQ8_0},
		{args: []string{"--executor", "sim"}, env: map[string]string{"KVPILOT_KV_CACHE_DTYPE": "f32"}, want: kvcache.DTypeF32},
		{args: []string{"--kv-cache-dtype", "f32"}, want: kvcache.DTypeF32},
		{args: []string{"--kv-cache-dtype", "auto"}, want: kvcache.DTypeAuto},
	} {
		o, err := parseOptions(tt.args, env(tt.env), io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if o.KVCacheDType != tt.want {
			t.Errorf("%q env %v: KV cache dtype %s, want %s", tt.args, tt.env, o.KVCacheDType, tt.want)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1024": 1024, "512Mi": 512 << 20, "8Gi": 8 << 30, "8GiB": 8 << 30, "1.5Gi": 3 << 29,
		"2G": 2e9, "100k": 1e5, "64KiB": 64 << 10, " 1Ti ": 1 << 40,
	} {
		got, err := parseByteSize(in)
		if err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "Gi", "1Xi", "NaN", "1e400"} {
		if _, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q): want an error", in)
		}
	}
}

func TestEnvName(t *testing.T) {
	if got := EnvName("kv-cache-memory-fraction"); got != "KVPILOT_KV_CACHE_MEMORY_FRACTION" {
		t.Errorf("EnvName = %q", got)
	}
}

func TestNameFromModel(t *testing.T) {
	for in, want := range map[string]string{
		"builtin:tiny": "tiny", "/models/Qwen2.5-0.5B-Instruct-Q8_0.gguf": "Qwen2.5-0.5B-Instruct-Q8_0", "m.gguf": "m",
	} {
		if got := nameFromModel(in); got != want {
			t.Errorf("nameFromModel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestREADMEDocumentsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := newFlagSet(&options{}, io.Discard)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(string(readme), "`--"+f.Name+"`") {
			t.Errorf("docs/api.md does not document --%s", f.Name)
		}
	})
}

// TestParseOptionsParsers: the output-format overrides take the formats'
// names and none, from flags or the environment.
func TestParseOptionsParsers(t *testing.T) {
	o, err := parseOptions([]string{"--tool-call-parser", "qwen3_coder", "--reasoning-parser", "none"}, env(nil), io.Discard)
	if err != nil || o.ToolCallParser != "qwen3_coder" || o.ReasoningParser != "none" {
		t.Fatalf("flags: %+v, %v", o, err)
	}
	o, err = parseOptions(nil, env(map[string]string{"KVPILOT_REASONING_PARSER": "think"}), io.Discard)
	if err != nil || o.ReasoningParser != "think" {
		t.Fatalf("env: %+v, %v", o, err)
	}
}

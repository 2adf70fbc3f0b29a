// Command kvpilot-model writes models as GGUF files (the built-in one, or
// random-weight ones of any geometry) for tests and demos, and describes
// GGUF files.
//
//	kvpilot-model write --out tiny.gguf --builtin tiny
//	kvpilot-model write --out m.gguf --layers 12 --dim 768 --heads 12 --ffn 2048 --vocab 32000 --dtype q8_0
//	kvpilot-model info m.gguf
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	archs "github.com/kvpilot/kvpilot/internal/runtime/arch"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/gptoss"
	"github.com/kvpilot/kvpilot/internal/runtime/arch/qwen35"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kvpilot-model:", err)
		os.Exit(2)
	}
}

const usage = `usage:
  kvpilot-model write --out FILE [--builtin tiny | geometry flags] [--dtype f32|f16|bf16|q8_0] [--chat-template FILE] [--split-max-tensors N]
  kvpilot-model info FILE|builtin:NAME

Random-weight models use a byte vocabulary padded to --vocab tokens; their
text is noise. Run "kvpilot-model write -h" for the geometry flags.`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "write":
		return write(args[1:], stdout, stderr)
	case "info":
		if len(args) != 2 {
			return errors.New(usage)
		}
		return info(args[1], stdout)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

func write(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("write", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tiny := model.TinyConfig()
	out := fs.String("out", "", "output GGUF `file` (required)")
	builtin := fs.String("builtin", "", "write a built-in model (tiny) instead of a random geometry")
	arch := fs.String("arch", model.ArchLlama, "architecture: "+strings.Join(archs.Names(), ", "))
	layers := fs.Int("layers", tiny.Layers, "transformer blocks")
	dim := fs.Int("dim", tiny.Dim, "embedding width")
	heads := fs.Int("heads", tiny.Heads, "query heads")
	kvHeads := fs.Int("kv-heads", 0, "key/value heads (0: same as --heads)")
	headDim := fs.Int("head-dim", 0, "head width (0: dim/heads)")
	ffn := fs.Int("ffn", tiny.FFN, "MLP hidden width")
	vocab := fs.Int("vocab", model.ByteVocabSize, fmt.Sprintf("vocabulary size (at least %d)", model.ByteVocabSize))
	ctxLen := fs.Int("context", tiny.ContextLen, "context length")
	theta := fs.Float64("rope-theta", float64(tiny.RopeTheta), "rotary embedding base")
	tied := fs.Bool("tied", false, "tie the output head to the token embedding")
	bias := fs.Bool("qkv-bias", false, "q/k/v projection biases (Qwen2-style)")
	experts := fs.Int("experts", 0, "mixture-of-experts MLPs: experts per layer (qwen3moe)")
	expertsUsed := fs.Int("experts-used", 0, "experts each token runs (with --experts)")
	expertFFN := fs.Int("expert-ffn", 0, "one expert's MLP hidden width (0: ffn/experts-used)")
	sharedExperts := fs.Int("shared-experts", 0, "experts every token runs besides the routed ones (glm4moe, deepseek2)")
	denseLayers := fs.Int("dense-layers", 0, "leading layers with a dense MLP of --ffn (glm4moe, deepseek2)")
	expertNorm := fs.Bool("expert-weights-norm", false, "divide the chosen experts' weights by their sum (glm4moe, deepseek2; qwen3moe always does)")
	expertScale := fs.Float64("expert-weights-scale", 0, "routed scaling factor of the experts' weights (glm4moe, deepseek2; 0: none)")
	qRank := fs.Int("q-lora-rank", 0, "queries' low rank (deepseek2; 0: projected directly, as DeepSeek-V2-Lite)")
	kvRank := fs.Int("kv-lora-rank", 0, "multi-head latent attention's latent width (deepseek2; required there)")
	keyMLA := fs.Int("key-length-mla", 0, "a head's key width, unrotated part and --rope-dims (deepseek2; required there)")
	valueMLA := fs.Int("value-length-mla", 0, "a head's value width (deepseek2; required there)")
	selectionBias := fs.Bool("expert-selection-bias", false, "routers with a selection bias, exp_probs_b.bias (deepseek2; glm4moe always has one)")
	groups := fs.Int("expert-groups", 0, "grouped expert selection: equal groups of experts (deepseek2, DeepSeek-V3's; 0: none)")
	groupsUsed := fs.Int("expert-groups-used", 0, "the best groups a token chooses its experts from (with --expert-groups)")
	gating := fs.String("expert-gating", "", "experts' gating: softmax or sigmoid (empty: the architecture's default)")
	window := fs.Int("sliding-window", 0, "sliding-window layers' window in tokens (gpt-oss; required there)")
	swaPattern := fs.Int("sliding-window-pattern", 2, "of every N layers all but the last slide (gpt-oss; 0: all)")
	seed := fs.Int64("seed", 1, "weight seed")
	dtype := fs.String("dtype", "f32", "matrix type: f32, f16, bf16 or q8_0")
	ropeScaling := fs.String("rope-scaling", "", "RoPE scaling: "+strings.Join(archs.RopeScalingTypes, ", ")+" (empty: no rope.scaling.type key)")
	ropeFactor := fs.Float64("rope-scaling-factor", 0, "RoPE scaling factor, the context's stretch (0: none)")
	ropeOrigCtx := fs.Int("rope-orig-ctx", 0, "context trained before RoPE scaling (0: --context)")
	ropeAttnFactor := fs.Float64("rope-attn-factor", 0, "rope.scaling.attn_factor, a multiplier of the rotated values (0: none)")
	yarnBetaFast := fs.Float64("yarn-beta-fast", 0, "YaRN's beta_fast (mistral3; 0: llama.cpp's 32)")
	yarnBetaSlow := fs.Float64("yarn-beta-slow", 0, "YaRN's beta_slow (mistral3; 0: llama.cpp's 1)")
	yarnLogMul := fs.Float64("yarn-log-mul", 0, "YaRN's log multiplier (mistral3; deepseek2: the file's value, 0.1·mscale_all_dim; 0: none)")
	attnTemp := fs.Float64("attn-temp-scale", 0, "attention temperature scale, stepping every --rope-orig-ctx (else --context) positions (mistral3; 0: none)")
	ropeFreqs := fs.Bool("rope-freqs", false, "write rope_freqs.weight, divisors of RoPE's frequencies (Llama 3.1's scaling; random in [1, 8])")
	ropeDims := fs.Int("rope-dims", 0, "dimensions of a head RoPE rotates (0: the whole head; the llama family rotates whole heads)")
	fusedExps := fs.Bool("fused-gate-up-exps", false, "the experts' gate and up projections in one ffn_gate_up_exps tensor, as newer llama.cpp conversions store them (deepseek2, qwen35moe, qwen3next)")
	expertDType := fs.String("expert-dtype", "", "mixture-of-experts stacks' type: mxfp4 (as gpt-oss is released), or empty for --dtype's")
	attnInterval := fs.Int("full-attention-interval", 4, "of every N layers the last attends, the others are gated DeltaNet (qwen35, qwen3next)")
	ssmConv := fs.Int("ssm-conv-kernel", 4, "the recurrent layers' convolution width (qwen35, qwen3next)")
	ssmState := fs.Int("ssm-state-size", 0, "the recurrent layers' key and value head width (qwen35, qwen3next; 0: the head dim / 2)")
	ssmKeyHeads := fs.Int("ssm-key-heads", 0, "the recurrent layers' key heads (qwen35, qwen3next; 0: --kv-heads)")
	ssmValueHeads := fs.Int("ssm-value-heads", 0, "the recurrent layers' value heads, a multiple of the key heads (qwen35, qwen3next; 0: --heads)")
	ssmFused := fs.Bool("ssm-fused-qkvz", false, "the recurrent layers' inputs through one ssm_in, as older conversions store them (qwen3next; default: attn_qkv and attn_gate)")
	ropeSections := fs.String("rope-sections", "", "M-RoPE sections in rotated pairs, comma-separated, up to 4 (qwen35, qwen35moe; empty: all of --rope-dims' pairs in the first)")
	chatTemplate := fs.String("chat-template", "", "Jinja chat template `file` to store as tokenizer.chat_template (default: the built-in ChatML)")
	splitMax := fs.Int("split-max-tensors", 0, "write the model in parts of at most N tensors, as llama.cpp's gguf-split does: --out's name less .gguf, then -00001-of-0000M.gguf … (0: one file)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return errors.New("write needs --out FILE and no positional arguments")
	}
	typ, err := model.ParseDType(*dtype)
	if err != nil {
		return err
	}
	var m *model.Model
	if *builtin != "" {
		if m, err = model.Builtin(*builtin); err != nil {
			return err
		}
	} else {
		cfg := model.Config{
			Arch: *arch, VocabSize: *vocab, Dim: *dim, Layers: *layers, Heads: *heads, KVHeads: *kvHeads, HeadDim: *headDim,
			FFN: *ffn, ContextLen: *ctxLen, RopeTheta: float32(*theta), TiedEmbeddings: *tied, QKVBias: *bias,
			Experts: *experts, ExpertsUsed: *expertsUsed, ExpertFFN: *expertFFN, ExpertGroups: *groups, ExpertGroupsUsed: *groupsUsed,
			SharedExperts: *sharedExperts, DenseLayers: *denseLayers, ExpertWeightsNorm: *expertNorm, ExpertWeightsScale: float32(*expertScale),
			RopeDims: *ropeDims,
			RopeScaling: archs.RopeScaling{
				Type: *ropeScaling, Factor: float32(*ropeFactor), OrigContext: *ropeOrigCtx, AttnFactor: float32(*ropeAttnFactor),
				YarnBetaFast: float32(*yarnBetaFast), YarnBetaSlow: float32(*yarnBetaSlow), YarnLogMul: float32(*yarnLogMul),
			},
			AttnTempScale: float32(*attnTemp), RopeFreqFactors: *ropeFreqs, FusedGateUpExperts: *fusedExps,
		}.WithDefaults()
		if err := slidingWindow(&cfg, *window, *swaPattern); err != nil {
			return err
		}
		if err := hybrid(&cfg, hybridFlags{*attnInterval, *ssmConv, *ssmState, *ssmKeyHeads, *ssmValueHeads, *ropeSections, *ssmFused}); err != nil {
			return err
		}
		if err := latentAttention(&cfg, archs.MLA{QRank: *qRank, KVRank: *kvRank, KeyLength: *keyMLA, ValueLength: *valueMLA}, *selectionBias, *kvHeads, *headDim); err != nil {
			return err
		}
		switch *gating {
		case "":
		case "softmax":
			cfg.ExpertGating = archs.GatingSoftmax
		case "sigmoid":
			cfg.ExpertGating = archs.GatingSigmoid
		default:
			return fmt.Errorf("--expert-gating %q: want softmax or sigmoid", *gating)
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		if cfg.VocabSize < model.ByteVocabSize {
			return fmt.Errorf("--vocab %d is below the byte vocabulary's %d tokens", cfg.VocabSize, model.ByteVocabSize)
		}
		m = model.Random(cfg, *seed)
	}
	if *chatTemplate != "" {
		src, err := os.ReadFile(*chatTemplate)
		if err != nil {
			return fmt.Errorf("--chat-template: %w", err)
		}
		j, err := model.NewJinjaTemplate(string(src), "", "")
		if err != nil {
			return fmt.Errorf("--chat-template %s: %w", *chatTemplate, err)
		}
		m.ChatTemplate = j
	}
	if m, err = m.Convert(typ); err != nil {
		return err
	}
	switch strings.ToLower(*expertDType) {
	case "":
	case "mxfp4":
		if m, err = m.WithMXFP4Experts(); err != nil {
			return fmt.Errorf("--expert-dtype mxfp4: %w", err)
		}
	default:
		return fmt.Errorf("--expert-dtype %q: want mxfp4 or nothing", *expertDType)
	}
	if *splitMax > 0 {
		return writeSplit(*out, m, *splitMax, stdout)
	}
	if err := writeFile(*out, m); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %.1fM parameters, %s, %d bytes\n", *out, describe(m.Config), float64(m.Config.NumParams())/1e6, typ, st.Size())
	return nil
}

// slidingWindow sets what gpt-oss needs besides the common flags: its
// window and layer pattern, its biases (every gpt-oss has them) and its
// routing. --sliding-window elsewhere is refused rather than dropped.
func slidingWindow(c *model.Config, window, pattern int) error {
	if c.Arch != model.ArchGptOss {
		if window != 0 {
			return fmt.Errorf("--sliding-window: architecture %s has no sliding-window layers here (gpt-oss has)", c.Arch)
		}
		return nil
	}
	if window <= 0 {
		return fmt.Errorf("--sliding-window %d: gpt-oss needs a positive window", window)
	}
	if pattern < 0 {
		return fmt.Errorf("--sliding-window-pattern %d must be 0 or more", pattern)
	}
	c.SlidingWindow, c.LayerKinds = window, gptoss.LayerKinds(c.Layers, pattern)
	c.QKVBias, c.ExpertGating = true, archs.GatingSoftmaxWeight
	return nil
}

// latentAttention sets what deepseek2 needs besides the common flags: its
// latent's geometry, which makes the cache's (one KV head of kv rank +
// rope dims), and the routers' selection bias. Elsewhere they are
// refused rather than dropped.
func latentAttention(c *model.Config, m archs.MLA, selectionBias bool, kvHeads, headDim int) error {
	if c.Arch != model.ArchDeepSeek2 {
		switch {
		case m != archs.MLA{}:
			return fmt.Errorf("--q-lora-rank, --kv-lora-rank, --key-length-mla, --value-length-mla: architecture %s has no multi-head latent attention (deepseek2 has)", c.Arch)
		case selectionBias:
			return fmt.Errorf("--expert-selection-bias: architecture %s does not read it (deepseek2 does; glm4moe always has one)", c.Arch)
		}
		return nil
	}
	if m.KVRank <= 0 || m.KeyLength <= 0 || m.ValueLength <= 0 || c.RopeDims <= 0 {
		return errors.New("deepseek2 needs --kv-lora-rank, --key-length-mla, --value-length-mla and --rope-dims")
	}
	hd := m.KVRank + c.RopeDims
	if (kvHeads != 0 && kvHeads != 1) || (headDim != 0 && headDim != hd) {
		return fmt.Errorf("--kv-heads %d, --head-dim %d: deepseek2 caches one latent of --kv-lora-rank + --rope-dims = %d (leave them out)", kvHeads, headDim, hd)
	}
	c.MLA, c.ExpertSelectionBias, c.KVHeads, c.HeadDim = m, selectionBias, 1, hd
	return nil
}

// writeSplit writes m in parts of at most maxTensors tensors named after
// out, once the whole model has passed writeFile's checks, and loads them
// back from the first part.
func writeSplit(out string, m *model.Model, maxTensors int, stdout io.Writer) error {
	whole := filepath.Join(filepath.Dir(out), ".kvpilot-model-whole.gguf")
	defer os.Remove(whole)
	if err := writeFile(whole, m); err != nil {
		return err
	}
	paths, err := model.WriteSplitGGUF(strings.TrimSuffix(out, ".gguf"), m, maxTensors)
	if err != nil {
		return err
	}
	back, err := model.Open(paths[0], nil)
	if err != nil {
		return fmt.Errorf("the parts written do not load: %w", err)
	}
	if err := back.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d parts of at most %d tensors: %s, %.1fM parameters\n", len(paths), maxTensors, describe(m.Config), float64(m.Config.NumParams())/1e6)
	for _, p := range paths {
		fmt.Fprintln(stdout, " ", p)
	}
	return nil
}

// writeFile writes through a temporary file so a failed write leaves no
// half-written model behind.
func writeFile(path string, m *model.Model) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".kvpilot-model-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := model.WriteGGUF(f, m); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// What the architecture's ReadConfig refuses (partial RoPE in the llama
	// family …) or does not read (mistral3's keys in a llama file) is not
	// written.
	back, err := model.Open(f.Name(), nil)
	if err != nil {
		return fmt.Errorf("the model written does not load: %w", err)
	}
	got := back.Config
	if err := back.Close(); err != nil {
		return err
	}
	if want := m.Config; got.RopeDims != want.RopeDims || got.RopeScaling != want.RopeScaling || got.AttnTempScale != want.AttnTempScale || got.RopeFreqFactors != want.RopeFreqFactors {
		return fmt.Errorf("architecture %s does not store the model's RoPE: written rope dims %d, scaling %+v, attention temperature %g; read back %d, %+v, %g",
			want.Arch, want.RopeDims, want.RopeScaling, want.AttnTempScale, got.RopeDims, got.RopeScaling, got.AttnTempScale)
	}
	if want := m.Config; got.FusedGateUpExperts != want.FusedGateUpExperts {
		return fmt.Errorf("architecture %s does not read its experts' gate and up projections fused (ffn_gate_up_exps; llama.cpp reads them so for deepseek2, qwen35moe and qwen3next)", want.Arch)
	}
	if want := m.Config; got.MLA != want.MLA || got.ExpertSelectionBias != want.ExpertSelectionBias || got.ExpertGroups != want.ExpertGroups || got.ExpertGroupsUsed != want.ExpertGroupsUsed {
		return fmt.Errorf("architecture %s does not store the model's latent attention or expert groups: written %+v (selection bias %t, groups %d of %d), read back %+v (%t, %d of %d)",
			want.Arch, want.MLA, want.ExpertSelectionBias, want.ExpertGroupsUsed, want.ExpertGroups, got.MLA, got.ExpertSelectionBias, got.ExpertGroupsUsed, got.ExpertGroups)
	}
	return os.Rename(f.Name(), path)
}

func describe(c model.Config) string {
	s := fmt.Sprintf("%s vocab %d, dim %d, %d layers, %d heads (%d kv, head dim %d), ffn %d, context %d, rope theta %g",
		c.Arch, c.VocabSize, c.Dim, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.FFN, c.ContextLen, c.RopeTheta)
	if c.TiedEmbeddings {
		s += ", tied head"
	}
	if c.QKVBias {
		s += ", qkv bias"
	}
	if c.Experts > 0 {
		s += fmt.Sprintf(", %d experts (%d used, ffn %d)", c.Experts, c.ExpertsUsed, c.ExpertFFN)
	}
	if c.SharedExperts > 0 {
		s += fmt.Sprintf(", %d shared", c.SharedExperts)
	}
	if c.DenseLayers > 0 {
		s += fmt.Sprintf(", %d leading dense layers", c.DenseLayers)
	}
	if c.ExpertSelectionBias {
		s += ", expert selection bias"
	}
	if c.ExpertGroups > 1 {
		s += fmt.Sprintf(", experts in %d groups (%d used)", c.ExpertGroups, c.ExpertGroupsUsed)
	}
	if c.FusedGateUpExperts {
		s += ", experts' gate and up fused"
	}
	if m := c.MLA; m != (archs.MLA{}) {
		s += fmt.Sprintf(", latent attention (q rank %d, kv rank %d, key %d, value %d)", m.QRank, m.KVRank, m.KeyLength, m.ValueLength)
	}
	if c.SlidingWindow > 0 {
		n := 0
		for _, k := range c.LayerKinds {
			if k == archs.SlidingWindow {
				n++
			}
		}
		s += fmt.Sprintf(", sliding window %d in %d of %d layers", c.SlidingWindow, n, c.Layers)
	}
	if c.RopeDims > 0 && c.RopeDims != c.HeadDim {
		s += fmt.Sprintf(", rope over %d of %d dims", c.RopeDims, c.HeadDim)
	}
	if r := c.RopeScaling; r != (archs.RopeScaling{}) {
		s += fmt.Sprintf(", rope scaling %q factor %g (original context %d, attention factor %g)", r.Type, r.Factor, r.OrigContext, r.AttnFactor)
		if r.YarnBetaFast != 0 || r.YarnBetaSlow != 0 || r.YarnLogMul != 0 {
			s += fmt.Sprintf(", yarn beta fast %g, beta slow %g, log multiplier %g", r.YarnBetaFast, r.YarnBetaSlow, r.YarnLogMul)
		}
	}
	if c.RopeFreqFactors {
		s += ", rope frequency factors"
	}
	if c.AttnTempScale != 0 {
		s += fmt.Sprintf(", attention temperature scale %g every %d positions", c.AttnTempScale, c.AttnTempFloor())
	}
	return s
}

func info(spec string, stdout io.Writer) error {
	m, err := model.Open(spec, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	c := m.Config
	fmt.Fprintf(stdout, "model:      %s\n", spec)
	fmt.Fprintf(stdout, "geometry:   %s\n", describe(c))
	fmt.Fprintf(stdout, "parameters: %.1fM\n", float64(c.NumParams())/1e6)
	fmt.Fprintf(stdout, "tokenizer:  %T, %d tokens, bos %d, eos %v\n", m.Tokenizer, m.Tokenizer.VocabSize(), c.BOS, c.EOS)
	fmt.Fprintf(stdout, "chat:       %s\n", m.ChatTemplate.Name())
	types := map[model.DType]int{}
	for _, t := range m.Weights.Tensors() {
		types[t.Type]++
	}
	fmt.Fprintf(stdout, "tensors:    %v\n", types)
	return nil
}

// hybridFlags are the hybrid geometries' flags (qwen35, qwen35moe,
// qwen3next).
type hybridFlags struct {
	interval, conv, state, keyHeads, valueHeads int
	sections                                    string
	fused                                       bool
}

// hybrid sets what a hybrid model (qwen35, qwen35moe, qwen3next) needs
// besides the common flags: its layer pattern, its recurrent layers'
// geometry and, but for qwen3next's NEOX RoPE, its M-RoPE sections (by
// default a quarter of each head rotates, all of it in the first
// section).
func hybrid(c *model.Config, f hybridFlags) error {
	mrope := c.Arch == "qwen35" || c.Arch == "qwen35moe"
	if !mrope && c.Arch != "qwen3next" {
		if f.sections != "" || f.state != 0 || f.keyHeads != 0 || f.valueHeads != 0 || f.fused {
			return fmt.Errorf("--rope-sections and --ssm-* are qwen35's, qwen35moe's and qwen3next's, not %s's", c.Arch)
		}
		return nil
	}
	if !mrope && f.sections != "" {
		return fmt.Errorf("--rope-sections: %s rotates by NEOX RoPE, without M-RoPE sections", c.Arch)
	}
	if mrope && f.fused {
		return fmt.Errorf("--ssm-fused-qkvz is qwen3next's, not %s's", c.Arch)
	}
	if f.interval < 1 {
		return fmt.Errorf("--full-attention-interval %d must be positive", f.interval)
	}
	c.LayerKinds = qwen35.LayerKinds(c.Layers, f.interval)
	g := archs.RecurrentGeometry{ConvKernel: f.conv, StateSize: f.state, KeyHeads: f.keyHeads, ValueHeads: f.valueHeads}
	if g.StateSize == 0 {
		g.StateSize = c.HeadDim / 2
	}
	if g.KeyHeads == 0 {
		g.KeyHeads = c.KVHeads
	}
	if g.ValueHeads == 0 {
		g.ValueHeads = c.Heads
	}
	g.Inner = g.StateSize * g.ValueHeads
	g.FusedQKVZ = f.fused
	c.Recurrent = g
	if c.RopeDims == 0 {
		c.RopeDims = c.HeadDim / 4
	}
	if !mrope {
		return nil
	}
	if f.sections == "" {
		c.RopeSections = [4]int{c.RopeDims / 2}
		return nil
	}
	parts := strings.Split(f.sections, ",")
	if len(parts) > 4 {
		return fmt.Errorf("--rope-sections %q: at most 4 sections", f.sections)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return fmt.Errorf("--rope-sections %q: %q is not a count of pairs", f.sections, p)
		}
		c.RopeSections[i] = n
	}
	return nil
}

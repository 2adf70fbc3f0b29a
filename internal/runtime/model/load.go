package model

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/kvpilot/kvpilot/internal/runtime/arch"
)

// Load opens a GGUF v2/v3 file: it maps it read-only, reads the geometry,
// tokenizer and chat template from the metadata, and checks every tensor's
// name, type and shape. A part of a split model (llama.cpp's gguf-split,
// <prefix>-00001-of-00003.gguf …) loads the whole model, every part mapped
// (split.go). progress, when set, is called with bytes of tensor data
// paged in so far and the total. Errors name the path and the cause.
func Load(path string, progress func(done, total int64)) (*Model, error) {
	return LoadWith(path, progress, LoadOptions{})
}

// LoadOptions change what Load accepts.
type LoadOptions struct {
	// PreTokenizerFallback, when not empty, is the tokenizer.ggml.pre value
	// (one kvpilot supports, e.g. "gpt-2") to split text with when the
	// file's is unknown, instead of refusing the model. Text then splits
	// unlike the model's training, so tokens differ from llama.cpp's and
	// quality may drop: for trying a model out. The loaded Model's
	// PreTokenizerFallback says when it was used.
	PreTokenizerFallback string
}

// LoadWith is Load with options.
func LoadWith(path string, progress func(done, total int64), opts LoadOptions) (*Model, error) {
	m, err := load(path, progress, opts)
	if err != nil {
		return nil, fmt.Errorf("load model %q: %w", path, err)
	}
	return m, nil
}

func load(path string, progress func(done, total int64), opts LoadOptions) (*Model, error) {
	g, err := openGGUF(path)
	if err != nil {
		return nil, err
	}
	m, err := fromFile(g.f, progress, opts)
	if err != nil {
		_ = g.unmap()
		return nil, err
	}
	m.unmap = g.unmap
	return m, nil
}

// mapGGUF maps the file at path read-only.
func mapGGUF(path string) (data []byte, unmap func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, errors.New("not a regular file")
	}
	if st.Size() == 0 {
		return nil, nil, fmt.Errorf("not a GGUF file: %w: the file is empty", ErrTruncated)
	}
	return mapFile(f, st.Size())
}

// LoadTokenizer reads only the tokenizer of a GGUF file: the vocabulary
// files llama.cpp tests its tokenizers with (models/ggml-vocab-*.gguf) have
// no tensors and no geometry, and a tool that only counts tokens need not
// map a model's weights. It refuses what Load refuses (an unknown
// tokenizer model or pre-tokenizer), with the same errors.
func LoadTokenizer(path string) (Tokenizer, error) {
	tok, err := loadTokenizer(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %q: %w", path, err)
	}
	return tok, nil
}

func loadTokenizer(path string) (Tokenizer, error) {
	g, err := openGGUF(path)
	if err != nil {
		return nil, err
	}
	// The parsed metadata copies its strings out of the mapping, so it
	// can go as soon as the tokenizer is built.
	defer func() { _ = g.unmap() }()
	tok, err := tokenizerFromGGUF(g.f)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return tok, nil
}

// fromGGUF builds a model whose tensors alias data.
func fromGGUF(data []byte, progress func(done, total int64), opts LoadOptions) (*Model, error) {
	f, err := parseGGUF(data)
	if err != nil {
		return nil, err
	}
	return fromFile(f, progress, opts)
}

// fromFile builds a model whose tensors alias f's.
func fromFile(f *ggufFile, progress func(done, total int64), opts LoadOptions) (*Model, error) {
	tensors := make(map[string]*ggufTensor, len(f.tensors))
	for i := range f.tensors {
		tensors[f.tensors[i].name] = &f.tensors[i]
	}
	cfg, err := configFromGGUF(f, tensors)
	if err != nil {
		return nil, err
	}
	var fallback string
	tok, err := readTokenizer(f, opts, &fallback)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if tok.VocabSize() != cfg.VocabSize {
		return nil, fmt.Errorf("tokenizer has %d tokens, the embedding %d rows", tok.VocabSize(), cfg.VocabSize)
	}
	m := &Model{Tokenizer: tok, PreTokenizerFallback: fallback}
	src, _, err := f.string("tokenizer.chat_template")
	if err != nil {
		return nil, err
	}
	m.ChatTemplate = ChatTemplateFor(src, tok)
	if err := tokensFromGGUF(f, &cfg, m.ChatTemplate, src, tok); err != nil {
		return nil, err
	}
	if src != "" {
		// The model's own template. One the Jinja engine cannot parse stops
		// the load: a built-in prompt in its place would run the model on a
		// format it was not trained on, silently.
		eos := int32(-1)
		if len(cfg.EOS) > 0 {
			eos = cfg.EOS[0]
		}
		j, err := NewJinjaTemplate(src, tokenText(tok, cfg.BOS), tokenText(tok, eos))
		if err != nil {
			return nil, fmt.Errorf("tokenizer.chat_template: %w", err)
		}
		m.ChatTemplate = j
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m.Config = cfg

	var total, done int64
	specs := m.Weights.specs(cfg)
	for _, s := range specs {
		if t := tensors[s.name]; t != nil {
			total += int64(len(t.data))
		}
	}
	for _, s := range specs {
		t := tensors[s.name]
		if t == nil {
			return nil, fmt.Errorf("missing tensor %s", s.name)
		}
		if !t.typ.Supported() {
			return nil, fmt.Errorf("tensor %s has type %s; supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4", s.name, t.typ)
		}
		if !s.matrix && t.typ != F32 {
			return nil, fmt.Errorf("tensor %s has type %s; norms and biases must be F32", s.name, t.typ)
		}
		if !sameShape(t.shape, s.shape) {
			return nil, fmt.Errorf("tensor %s has shape %v, want %v", s.name, t.shape, s.shape)
		}
		*s.slot = &Tensor{Name: t.name, Type: t.typ, Shape: t.shape, Data: t.data}
		if progress != nil {
			// Touch a byte per page so that progress follows the disk.
			var sink byte
			for i := 0; i < len(t.data); i += 4096 {
				sink ^= t.data[i]
			}
			touchSink = sink
			done += int64(len(t.data))
			progress(done, total)
		}
	}
	return m, nil
}

var touchSink byte

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// configFromGGUF reads the geometry through the file's architecture.
func configFromGGUF(f *ggufFile, tensors map[string]*ggufTensor) (Config, error) {
	var c Config
	name, ok, err := f.string("general.architecture")
	if err != nil {
		return c, err
	}
	if !ok {
		return c, errors.New("metadata general.architecture is missing")
	}
	a, err := arch.Lookup(name)
	if err != nil {
		return c, err
	}
	c.Arch = name
	if err := a.ReadConfig(archFile{f, tensors}, &c); err != nil {
		return c, err
	}
	return c, nil
}

// archFile is a parsed GGUF file as architectures read it.
type archFile struct {
	f       *ggufFile
	tensors map[string]*ggufTensor
}

func (a archFile) String(key string) (string, bool, error) { return a.f.string(key) }
func (a archFile) Uint(key string) (uint64, bool, error)   { return a.f.uint(key) }
func (a archFile) Float(key string) (float64, bool, error) { return a.f.float(key) }
func (a archFile) Bool(key string) (bool, bool, error)     { return a.f.bool(key) }
func (a archFile) Ints(key string) ([]int, bool, error)    { return a.f.ints(key) }
func (a archFile) Bools(key string) ([]bool, bool, error)  { return a.f.bools(key) }
func (a archFile) Shape(name string) []int {
	if t := a.tensors[name]; t != nil {
		return t.shape
	}
	return nil
}

// tokensFromGGUF sets BOS and EOS: kvpilot.eos_token_ids when present, else
// eos_token_id, eot_token_id and the chat template's end-of-turn tokens,
// less those its output format says end no turn (src is the template's
// source).
func tokensFromGGUF(f *ggufFile, c *Config, tmpl ChatTemplate, src string, tok Tokenizer) error {
	c.BOS = -1
	if v, ok, err := f.uint("tokenizer.ggml.bos_token_id"); err != nil {
		return err
	} else if ok && v < uint64(c.VocabSize) {
		c.BOS = int32(v)
	}
	if ids, ok := f.kv[keyEOSTokenIDs].([]int32); ok {
		c.EOS = append([]int32(nil), ids...)
		return nil
	}
	seen := map[int32]bool{}
	add := func(id int32) {
		if !seen[id] && id >= 0 && int(id) < c.VocabSize {
			seen[id] = true
			c.EOS = append(c.EOS, id)
		}
	}
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		v, ok, err := f.uint(key)
		if err != nil {
			return err
		}
		if ok && v < 1<<31 {
			add(int32(v))
		}
	}
	end, notEnd := endOfTurnTokens(tmpl, src)
	for _, text := range notEnd {
		if id, ok := tokenID(tok, text); ok {
			seen[id] = true // never added below
			c.EOS = slices.DeleteFunc(c.EOS, func(e int32) bool { return e == id })
		}
	}
	for _, text := range end {
		if id, ok := tokenID(tok, text); ok {
			add(id)
		}
	}
	return nil
}

func tokenizerFromGGUF(f *ggufFile) (Tokenizer, error) {
	return readTokenizer(f, LoadOptions{}, new(string))
}

// readTokenizer builds the file's tokenizer; when opts' pre-tokenizer
// fallback stands in for an unknown one, it sets *fallback to what
// Model.PreTokenizerFallback says.
func readTokenizer(f *ggufFile, opts LoadOptions, fallback *string) (Tokenizer, error) {
	kind, ok, err := f.string("tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("metadata tokenizer.ggml.model is missing")
	}
	tokens, ok := f.kv["tokenizer.ggml.tokens"].([]string)
	if !ok {
		return nil, errors.New("metadata tokenizer.ggml.tokens is missing or not a string array")
	}
	var types []int32
	switch v := f.kv["tokenizer.ggml.token_type"].(type) {
	case nil:
	case []int32:
		types = v
	case []uint32:
		types = make([]int32, len(v))
		for i, x := range v {
			types[i] = int32(x)
		}
	default:
		return nil, errors.New("metadata tokenizer.ggml.token_type is not an integer array")
	}
	optID := func(key string) (int32, error) {
		v, ok, err := f.uint(key)
		if err != nil || !ok || v >= uint64(len(tokens)) {
			return -1, err
		}
		return int32(v), nil
	}
	bos, err := optID("tokenizer.ggml.bos_token_id")
	if err != nil {
		return nil, err
	}
	addBOS, hasAddBOS, err := f.bool("tokenizer.ggml.add_bos_token")
	if err != nil {
		return nil, err
	}
	switch kind {
	case "gpt2":
		merges, _ := f.kv["tokenizer.ggml.merges"].([]string)
		if _, ok := f.kv["tokenizer.ggml.merges"]; ok && merges == nil {
			return nil, errors.New("metadata tokenizer.ggml.merges is not a string array")
		}
		pre, _, err := f.string("tokenizer.ggml.pre")
		if err != nil {
			return nil, err
		}
		splitAs := pre
		p, err := lookupPreTokenizer(pre)
		if err != nil {
			if opts.PreTokenizerFallback == "" {
				return nil, err
			}
			splitAs = opts.PreTokenizerFallback
			if p, err = lookupPreTokenizer(splitAs); err != nil {
				return nil, fmt.Errorf("pre-tokenizer fallback: %w", err)
			}
			*fallback = fmt.Sprintf("pre-tokenizer %q (tokenizer.ggml.pre) is unsupported: text is split as %q instead, unlike the model's training", pre, splitAs)
		}
		if !hasAddBOS {
			addBOS = p.addBOS
		}
		tok, err := NewBPETokenizer(tokens, types, merges, bos, addBOS, splitAs)
		if err != nil {
			return nil, err
		}
		// Written back as the file names it.
		tok.pre = pre
		return tok, nil
	case "gemma4":
		merges, ok := f.kv["tokenizer.ggml.merges"].([]string)
		if !ok {
			return nil, errors.New("metadata tokenizer.ggml.merges is missing or not a string array")
		}
		return newGemma4Tokenizer(tokens, types, merges, bos)
	case "llama":
		scores, ok := f.kv["tokenizer.ggml.scores"].([]float32)
		if !ok {
			return nil, errors.New("metadata tokenizer.ggml.scores is missing or not a float32 array")
		}
		unk, err := optID("tokenizer.ggml.unknown_token_id")
		if err != nil {
			return nil, err
		}
		space, hasSpace, err := f.bool("tokenizer.ggml.add_space_prefix")
		if err != nil {
			return nil, err
		}
		if !hasAddBOS {
			addBOS = true
		}
		return NewSPMTokenizer(tokens, scores, types, bos, unk, addBOS, space || !hasSpace)
	}
	return nil, fmt.Errorf("tokenizer model %q (tokenizer.ggml.model) is unsupported (supported: gpt2, gemma4, llama)", kind)
}

package arch

import (
	"errors"
	"fmt"
)

// Binder resolves a forward pass's weights by name through Bind's weight
// function, noting the names the executor has no weight for.
type Binder struct {
	weight  func(name string) Tensor
	missing []string
}

// NewBinder is a Binder over weight.
func NewBinder(weight func(name string) Tensor) *Binder { return &Binder{weight: weight} }

// Get is the named weight, or 0, noted as missing.
func (b *Binder) Get(name string) Tensor {
	t := b.weight(name)
	if t == 0 {
		b.missing = append(b.missing, name)
	}
	return t
}

// Err names the weights Get did not find (arch names the architecture),
// or is nil.
func (b *Binder) Err(arch string) error {
	if len(b.missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s: the executor has no weights %v", arch, b.missing)
}

// ReadVocab sets c.VocabSize from the token embedding's shape, and
// c.TiedEmbeddings when the file has no output.weight.
func ReadVocab(file File, c *Config) error {
	emb := file.Shape("token_embd.weight")
	if emb == nil {
		return errors.New("missing tensor token_embd.weight")
	}
	if len(emb) != 2 {
		return fmt.Errorf("tensor token_embd.weight has shape %v, want 2 dimensions", emb)
	}
	c.VocabSize = emb[1]
	c.TiedEmbeddings = file.Shape("output.weight") == nil
	return nil
}

// ReadUnscaledRope reads what an architecture whose RoPE runs unscaled
// reads besides its geometry: it refuses a rope.scaling.type other than
// none, then reads rope.freq_base (10000 when absent), the RMS norm's
// epsilon and the vocabulary (ReadVocab).
func ReadUnscaledRope(file File, p string, c *Config) error {
	if s, _, _ := file.String(p + "rope.scaling.type"); s != "" && s != "none" {
		return fmt.Errorf("rope scaling %q is unsupported", s)
	}
	c.RopeTheta = 10000
	if err := Read(file,
		OptFloat(p+"rope.freq_base", &c.RopeTheta),
		Float(p+"attention.layer_norm_rms_epsilon", &c.NormEps),
	); err != nil {
		return err
	}
	return ReadVocab(file, c)
}

// Package codec turns request text into prompt token ids for the runtime's
// HTTP API: with a model's tokenizer and chat template, or, for the sim
// executor, with its synthetic vocabulary. It knows no HTTP, so benchmarks
// and tools encode prompts as the server does without importing it.
package codec

import (
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// Codec turns request text into prompt token ids. Implementations must be
// safe for concurrent use.
type Codec interface {
	// EncodePrompt tokenizes a completion prompt.
	EncodePrompt(text string) []int32
	// EncodeChat renders a conversation as the model expects it, ending with
	// the header of an assistant turn, and tokenizes it.
	EncodeChat(msgs []model.Message) []int32
}

// Model encodes with a model's tokenizer and chat template.
type Model struct {
	Tokenizer model.Tokenizer
	Template  model.ChatTemplate
}

var _ Codec = Model{}

// EncodePrompt implements Codec: the model's BOS is added when it wants one.
func (c Model) EncodePrompt(text string) []int32 { return c.Tokenizer.Encode(text, true) }

// EncodeChat implements Codec.
func (c Model) EncodeChat(msgs []model.Message) []int32 {
	return c.Tokenizer.Encode(c.Template.Apply(msgs, true), true)
}

// Sim encodes for the sim executor: word by word with its synthetic
// vocabulary (only prompt lengths matter to the cost model), chat messages
// joined as "role: content" lines.
type Sim struct {
	Vocab *sim.Vocabulary
}

var _ Codec = Sim{}

// EncodePrompt implements Codec.
func (c Sim) EncodePrompt(text string) []int32 { return c.Vocab.Encode(text) }

// EncodeChat implements Codec.
func (c Sim) EncodeChat(msgs []model.Message) []int32 {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	b.WriteString("assistant:")
	return c.Vocab.Encode(b.String())
}

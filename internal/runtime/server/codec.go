package server

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

// ModelCodec encodes with a model's tokenizer and chat template.
type ModelCodec struct {
	Tokenizer model.Tokenizer
	Template  model.ChatTemplate
}

var _ Codec = ModelCodec{}

// EncodePrompt implements Codec: the model's BOS is added when it wants one.
func (c ModelCodec) EncodePrompt(text string) []int32 { return c.Tokenizer.Encode(text, true) }

// EncodeChat implements Codec.
func (c ModelCodec) EncodeChat(msgs []model.Message) []int32 {
	return c.Tokenizer.Encode(c.Template.Apply(msgs, true), true)
}

// SimCodec encodes for the sim executor: word by word with its synthetic
// vocabulary (only prompt lengths matter to the cost model), chat messages
// joined as "role: content" lines.
type SimCodec struct {
	Vocab *sim.Vocabulary
}

var _ Codec = SimCodec{}

// EncodePrompt implements Codec.
func (c SimCodec) EncodePrompt(text string) []int32 { return c.Vocab.Encode(text) }

// EncodeChat implements Codec.
func (c SimCodec) EncodeChat(msgs []model.Message) []int32 {
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

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

// Codec turns request text into prompt token ids and back. Implementations
// must be safe for concurrent use.
type Codec interface {
	// EncodePrompt tokenizes a completion prompt.
	EncodePrompt(text string) []int32
	// EncodeChat renders a conversation as the model expects it and
	// tokenizes it.
	EncodeChat(msgs []model.Message, o ChatOptions) []int32
	// Encode tokenizes text, with the model's special tokens (BOS) when
	// addSpecial is set (/tokenize, bad_words).
	Encode(text string, addSpecial bool) []int32
	// Decode turns token ids back into text (/detokenize, echo).
	Decode(ids []int32) string
}

// ChatOptions say how a conversation is rendered.
type ChatOptions struct {
	// AddGenerationPrompt ends the prompt with the header of an assistant
	// turn, so the model answers as the assistant (the API's default).
	AddGenerationPrompt bool
	// ContinueFinalMessage leaves the last message (the assistant's) open:
	// the prompt ends with its content, without the end-of-turn marker, so
	// the model continues it. It overrides AddGenerationPrompt.
	ContinueFinalMessage bool
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
func (c Model) EncodeChat(msgs []model.Message, o ChatOptions) []int32 {
	text := c.Template.Apply(msgs, o.AddGenerationPrompt && !o.ContinueFinalMessage)
	if o.ContinueFinalMessage {
		text = cutAfterFinal(text, msgs)
	}
	return c.Tokenizer.Encode(text, true)
}

// cutAfterFinal ends a rendered conversation right after the last
// message's content, dropping the end-of-turn markup the template put
// after it. Templates may trim content, so the trimmed content is what is
// looked for.
func cutAfterFinal(text string, msgs []model.Message) string {
	if len(msgs) == 0 {
		return text
	}
	last := strings.TrimSpace(msgs[len(msgs)-1].Content)
	if last == "" {
		return text
	}
	if i := strings.LastIndex(text, last); i >= 0 {
		return text[:i+len(last)]
	}
	return text
}

// Encode implements Codec.
func (c Model) Encode(text string, addSpecial bool) []int32 {
	return c.Tokenizer.Encode(text, addSpecial)
}

// Decode implements Codec.
func (c Model) Decode(ids []int32) string { return c.Tokenizer.Decode(ids) }

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
func (c Sim) EncodeChat(msgs []model.Message, o ChatOptions) []int32 {
	var b strings.Builder
	for i, m := range msgs {
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.Content)
		if o.ContinueFinalMessage && i == len(msgs)-1 {
			return c.Vocab.Encode(b.String())
		}
		b.WriteString("\n")
	}
	if o.AddGenerationPrompt {
		b.WriteString("assistant:")
	}
	return c.Vocab.Encode(b.String())
}

// Encode implements Codec: the synthetic vocabulary has no special tokens.
func (c Sim) Encode(text string, _ bool) []int32 { return c.Vocab.Encode(text) }

// Decode implements Codec.
func (c Sim) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.Write(c.Vocab.TokenBytes(id))
	}
	return b.String()
}

// Package codec turns request text into prompt token ids for the runtime's
// HTTP API: with a model's tokenizer and chat template, or, for the sim
// executor, with its synthetic vocabulary. It knows no HTTP, so benchmarks
// and tools encode prompts as the server does without importing it.
package codec

import (
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/chatformat"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
)

// Codec turns request text into prompt token ids and back. Implementations
// must be safe for concurrent use.
type Codec interface {
	// EncodePrompt tokenizes a completion prompt.
	EncodePrompt(text string) []int32
	// EncodeChat renders a conversation as the model expects it and
	// tokenizes it. c carries the messages, the tools and the rendering
	// options (add_generation_prompt, continue_final_message); the text is
	// tokenized with the model's special tokens (BOS) when addSpecial is
	// set, as Encode. Errors wrap model.ErrTemplate when the template
	// refuses the conversation.
	EncodeChat(c *model.Chat, addSpecial bool) ([]int32, error)
	// ToolFormat is how the model writes tool calls (model.ToolFormat*),
	// "" when its template knows no tools.
	ToolFormat() string
	// Encode tokenizes text, with the model's special tokens (BOS) when
	// addSpecial is set (/tokenize, bad_words).
	Encode(text string, addSpecial bool) []int32
	// Decode turns token ids back into text (/detokenize, echo).
	Decode(ids []int32) string
}

// Model encodes with a model's tokenizer and chat template.
type Model struct {
	Tokenizer model.Tokenizer
	Template  model.ChatTemplate
}

var _ Codec = Model{}

// EncodePrompt implements Codec: the model's BOS is added when it wants one.
func (c Model) EncodePrompt(text string) []int32 { return c.Tokenizer.Encode(text, true) }

// EncodeChat implements Codec: the chat is rendered by model.RenderAll,
// so no message is left out of the prompt silently.
// The template renders continue_final_message itself (it cuts the text
// after the final message's content), so the options reach it unchanged.
// The rendered text does not start with the BOS (model.ChatTemplate): it
// is the tokenizer's to add.
//
// The rendered text is charged (chat.Charge) TokenizeMemoryFactor times
// its size before it is tokenized: a template can make it far longer
// than the request's messages.
func (c Model) EncodeChat(chat *model.Chat, addSpecial bool) ([]int32, error) {
	text, err := model.RenderAll(c.Template, chat)
	if err != nil {
		return nil, err
	}
	if chat.Charge != nil {
		if err := chat.Charge(int64(len(text)) * TokenizeMemoryFactor); err != nil {
			return nil, err
		}
	}
	return c.Tokenizer.Encode(text, addSpecial), nil
}

// TokenizeMemoryFactor is the memory tokenizing takes per byte of text:
// the token ids (a token a byte at worst, four bytes each, in a slice
// grown by doubling) and the merge's working memory. Tokenizing 4 MiB
// with the built-in model's byte-level vocabulary allocated 4 (ASCII
// words) to 16.2 (two-byte UTF-8) bytes a byte, 10.5 of them live.
const TokenizeMemoryFactor = 16

// ToolFormat implements Codec: the name of ChatFormat's tool-call format.
func (c Model) ToolFormat() string { return c.ChatFormat().ToolsName() }

// Formatter is a Codec that knows its model's output formats (tool calls
// and reasoning); a Codec that is not one is read by its ToolFormat alone.
type Formatter interface {
	ChatFormat() chatformat.Spec
}

var _ Formatter = Model{}

// ChatFormat implements Formatter: the formats the template's source
// shows its model (chatformat.Detect); the built-in templates, which
// carry no source of their own, write Hermes (ChatML) or Llama 3 JSON
// calls.
func (c Model) ChatFormat() chatformat.Spec {
	if s, ok := c.Template.(interface{ Source() string }); ok {
		return chatformat.Detect(s.Source())
	}
	var spec chatformat.Spec
	if f, err := chatformat.Lookup(string(c.Template.ToolFormat())); err == nil {
		spec.Tools = f
	}
	return spec
}

// FormatOf is c's output formats: its own when it is a Formatter, else
// the tool-call format its ToolFormat names.
func FormatOf(c Codec) chatformat.Spec {
	if f, ok := c.(Formatter); ok {
		return f.ChatFormat()
	}
	var spec chatformat.Spec
	if f, err := chatformat.Lookup(c.ToolFormat()); err == nil {
		spec.Tools = f
	}
	return spec
}

// Encode implements Codec.
func (c Model) Encode(text string, addSpecial bool) []int32 {
	return c.Tokenizer.Encode(text, addSpecial)
}

// Decode implements Codec.
func (c Model) Decode(ids []int32) string { return c.Tokenizer.Decode(ids) }

// Sim encodes for the sim executor: word by word with its synthetic
// vocabulary (only prompt lengths matter to the cost model), chat messages
// joined as "role: content" lines, tools as their JSON.
type Sim struct {
	Vocab *sim.Vocabulary
}

var _ Codec = Sim{}

// EncodePrompt implements Codec.
func (c Sim) EncodePrompt(text string) []int32 { return c.Vocab.Encode(text) }

// EncodeChat implements Codec: the synthetic vocabulary has no special
// tokens.
func (c Sim) EncodeChat(chat *model.Chat, _ bool) ([]int32, error) {
	var b strings.Builder
	for _, t := range chat.Tools {
		b.WriteString("tool: ")
		b.Write(t)
		b.WriteString("\n")
	}
	msgs := chat.Messages
	for i, m := range msgs {
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.Content)
		if chat.ContinueFinalMessage && i == len(msgs)-1 {
			return c.Vocab.Encode(b.String()), nil
		}
		b.WriteString("\n")
	}
	if chat.AddGenerationPrompt {
		b.WriteString("assistant:")
	}
	return c.Vocab.Encode(b.String()), nil
}

// ToolFormat implements Codec: the sim's synthetic output is read as
// Hermes calls.
func (c Sim) ToolFormat() string { return string(model.ToolFormatHermes) }

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

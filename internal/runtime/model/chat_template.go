package model

import (
	"cmp"
	"strings"
)

// Message is one chat turn.
type Message struct {
	Role, Content string
}

// ChatTemplate renders a conversation as the prompt text the model was
// trained on. The text does not start with the BOS token: encode it with
// Tokenizer.Encode(text, true), which adds BOS where the model wants one.
type ChatTemplate interface {
	// Name identifies the format ("chatml", "llama3").
	Name() string
	// Apply renders msgs; with addGenerationPrompt it ends with the header
	// of an assistant turn, so the model continues as the assistant.
	Apply(msgs []Message, addGenerationPrompt bool) string
}

// ChatTemplateFor picks the template for a GGUF tokenizer.chat_template
// source: ChatML when it uses <|im_start|>, Llama-3 when it uses
// <|start_header_id|>. Without a template, or with one in neither format,
// the fallback is Llama-3 when the vocabulary has <|start_header_id|> and
// ChatML otherwise.
func ChatTemplateFor(source string, tok Tokenizer) ChatTemplate {
	switch {
	case strings.Contains(source, "<|im_start|>"):
		return ChatML{Source: source}
	case strings.Contains(source, "<|start_header_id|>"):
		return Llama3{Source: source}
	}
	if _, ok := tokenID(tok, "<|start_header_id|>"); ok {
		return Llama3{}
	}
	return ChatML{}
}

// ChatML is the <|im_start|>role\ncontent<|im_end|> format (Qwen, many others).
type ChatML struct {
	// Source is the Jinja text it was recognized from, written back to GGUF;
	// empty means chatMLSource.
	Source string
}

const chatMLSource = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// Name implements ChatTemplate.
func (ChatML) Name() string { return "chatml" }

// Apply implements ChatTemplate.
func (ChatML) Apply(msgs []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>")
		b.WriteString(m.Role)
		b.WriteString("\n")
		b.WriteString(m.Content)
		b.WriteString("<|im_end|>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String()
}

func (t ChatML) ggufMetadata() []ggufKV {
	return []ggufKV{{"tokenizer.chat_template", cmp.Or(t.Source, chatMLSource)}}
}

// Llama3 is Llama 3's <|start_header_id|>role<|end_header_id|> format.
type Llama3 struct {
	// Source is as in ChatML; empty means llama3Source.
	Source string
}

const llama3Source = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"

// Name implements ChatTemplate.
func (Llama3) Name() string { return "llama3" }

// Apply implements ChatTemplate. Contents are trimmed, as Llama 3's template
// does.
func (Llama3) Apply(msgs []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|start_header_id|>")
		b.WriteString(m.Role)
		b.WriteString("<|end_header_id|>\n\n")
		b.WriteString(strings.TrimSpace(m.Content))
		b.WriteString("<|eot_id|>")
	}
	if addGenerationPrompt {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return b.String()
}

func (t Llama3) ggufMetadata() []ggufKV {
	return []ggufKV{{"tokenizer.chat_template", cmp.Or(t.Source, llama3Source)}}
}

// endOfTurnTokens are the texts of the tokens that end an assistant turn in
// each format; they are added to Config.EOS when the vocabulary has them.
func endOfTurnTokens(t ChatTemplate) []string {
	switch t.(type) {
	case ChatML:
		return []string{"<|im_end|>", "<|endoftext|>"}
	case Llama3:
		return []string{"<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"}
	}
	return nil
}

func tokenID(tok Tokenizer, text string) (int32, bool) {
	v, ok := tok.(interface{ tokenID(string) (int32, bool) })
	if !ok {
		return 0, false
	}
	return v.tokenID(text)
}

func (v *vocab) tokenID(text string) (int32, bool) {
	id, ok := v.ids[text]
	return id, ok
}

package openai

import (
	"bytes"
	"encoding/json"
)

// Refused are request fields vLLM or OpenAI define whose effect this
// server does not implement. Each is refused with a 400 naming it when it
// asks for something, never ignored: the answer would be to another
// request than the one sent.
type Refused struct {
	// PromptLogprobs asks for the prompt tokens' logprobs, which the
	// runtime does not compute.
	PromptLogprobs   json.RawMessage `json:"prompt_logprobs"`
	UseBeamSearch    bool            `json:"use_beam_search"`
	LogitsProcessors json.RawMessage `json:"logits_processors"`
	PromptEmbeds     json.RawMessage `json:"prompt_embeds"`
}

func (r *Refused) check() *Error {
	switch {
	case !isAbsent(r.PromptLogprobs):
		return BadRequest("prompt_logprobs", "prompt_logprobs is not supported: the runtime does not compute the prompt's logprobs")
	case r.UseBeamSearch:
		return BadRequest("use_beam_search", "use_beam_search is not supported: the runtime samples, it does not search beams")
	case !isEmpty(r.LogitsProcessors):
		return BadRequest("logits_processors", "logits_processors is not supported")
	case !isAbsent(r.PromptEmbeds):
		return BadRequest("prompt_embeds", "prompt_embeds is not supported; send the prompt as text or token ids")
	}
	return nil
}

// ChatRefused are the chat fields of Refused's kind.
type ChatRefused struct {
	// ChatTemplate would replace the model's template (vLLM too refuses it
	// unless started with --trust-request-chat-template).
	ChatTemplate *string `json:"chat_template"`
	// Echo (vLLM's) would put the last message before the reply.
	Echo             bool            `json:"echo"`
	Documents        json.RawMessage `json:"documents"`
	Audio            json.RawMessage `json:"audio"`
	Modalities       []string        `json:"modalities"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
}

func (r *ChatRefused) check() *Error {
	switch {
	case r.ChatTemplate != nil && *r.ChatTemplate != "":
		return BadRequest("chat_template", "chat_template is not supported: the conversation is rendered with the model's own template")
	case r.Echo:
		return BadRequest("echo", "echo is not supported on chat completions")
	case !isEmpty(r.Documents):
		return BadRequest("documents", "documents are not supported")
	case !isAbsent(r.Audio):
		return BadRequest("audio", "audio output is not supported")
	case !isAbsent(r.WebSearchOptions):
		return BadRequest("web_search_options", "web search is not supported")
	}
	for _, m := range r.Modalities {
		if m != "text" {
			return BadRequest("modalities", "modality %q is not supported; only text", m)
		}
	}
	return nil
}

// isEmpty reports whether raw is absent, null or an empty array.
func isEmpty(raw json.RawMessage) bool {
	if isAbsent(raw) {
		return true
	}
	t := bytes.TrimSpace(raw)
	return len(t) >= 2 && t[0] == '[' && len(bytes.TrimSpace(t[1:len(t)-1])) == 0
}

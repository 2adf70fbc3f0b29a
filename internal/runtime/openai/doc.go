// Package openai is the wire format of the OpenAI-compatible API the runtime
// serves: request parsing for /v1/completions and /v1/chat/completions
// (strict about types, lenient about what it can ignore), response and
// streaming chunk types, an allocation-free server-sent-events encoder, and
// OpenAI-shaped errors that carry their HTTP status.
//
// It knows nothing about HTTP serving or tokenization; the server package
// turns a parsed request into an engine request.
package openai

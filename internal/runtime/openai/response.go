package openai

// Object names.
const (
	ObjectCompletion     = "text_completion"
	ObjectChatCompletion = "chat.completion"
	ObjectChatChunk      = "chat.completion.chunk"
	ObjectModel          = "model"
	ObjectList           = "list"
)

// Usage is a response's token accounting.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails reports prefix-cache hits as OpenAI reports cached
// prompt tokens.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// CompletionChoice is one choice of a completion (or of a streaming chunk).
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	// StopReason is what stopped the choice, as vLLM reports it: the stop
	// string or stop token id matched, or null (EOS, length); always
	// written, as vLLM writes it.
	StopReason any `json:"stop_reason"`
	// PromptTokenIDs and TokenIDs answer return_token_ids.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
	TokenIDs       []int32 `json:"token_ids,omitempty"`
}

// CompletionLogprobs is a completion choice's "logprobs" (the legacy
// format): per token its text, log-probability, the most likely
// alternatives and its offset in the choice's text.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// ChatLogprobs is a chat choice's "logprobs".
type ChatLogprobs struct {
	Content []ChatTokenLogprob `json:"content"`
}

// ChatTokenLogprob is one output token's log-probability and alternatives.
type ChatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []ChatTopLogprob `json:"top_logprobs"`
}

// ChatTopLogprob is one alternative token.
type ChatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// CompletionResponse is the body of a non-streaming completion, and the
// shape of its streaming chunks.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// ChatMessage is an assistant reply.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is the reasoning the model wrote before its answer
	// (vLLM's and DeepSeek's field); Reasoning is the same text under the
	// name vLLM's newer releases and OpenRouter use.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	Reasoning        string `json:"reasoning,omitempty"`
	// ToolCalls are the calls the model made (content is then null when
	// empty); FunctionCall is the legacy form for requests that used
	// functions.
	ToolCalls    []ToolCall    `json:"tool_calls,omitempty"`
	FunctionCall *FunctionCall `json:"function_call,omitempty"`
}

// ChatChoice is one choice of a chat completion.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      ChatMessage   `json:"message"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	// StopReason and TokenIDs: see CompletionChoice.
	StopReason any     `json:"stop_reason"`
	TokenIDs   []int32 `json:"token_ids,omitempty"`
}

// ChatResponse is the body of a non-streaming chat completion.
type ChatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
	// PromptTokenIDs answers return_token_ids.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
}

// ChatDelta is the incremental message of a streaming chat chunk.
type ChatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent and Reasoning carry reasoning text (the same
	// text under both names).
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	Reasoning        string     `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	// FunctionCall is the legacy streamed call.
	FunctionCall *FunctionCall `json:"function_call,omitempty"`
}

// ChatChunkChoice is one choice of a streaming chat chunk.
type ChatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        ChatDelta     `json:"delta"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	StopReason   any           `json:"stop_reason,omitempty"`
	TokenIDs     []int32       `json:"token_ids,omitempty"`
}

// ChatChunk is one server-sent event of a streaming chat completion.
type ChatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	Usage   *Usage            `json:"usage,omitempty"`
}

// Turn is one generated reply, as the APIs that are not chat completions
// (Responses, Anthropic Messages) report it.
type Turn struct {
	// Content is the text outside tool calls (trimmed when there are
	// calls); Calls are the tool calls, in order.
	Content string
	Calls   []ToolCall
	// Reasoning is the reasoning the model wrote before them.
	Reasoning string
	// Finish is "stop" or "length"; StopMatched is the stop string that
	// ended the reply, if one did.
	Finish      string
	StopMatched string
	// Token counts: CachedTokens of the PromptTokens came from the prefix
	// cache.
	PromptTokens, CompletionTokens, CachedTokens int
	// ReasoningTokens is how many of the CompletionTokens were reasoning
	// (0 when not counted).
	ReasoningTokens int
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
	// Architecture is the model file's general.architecture ("qwen3"); none
	// for the sim executor, which runs no model file.
	Architecture string `json:"architecture,omitempty"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// TokenizeRequest is the body of POST /tokenize (vLLM's): a prompt, or chat
// messages rendered through the chat template.
type TokenizeRequest struct {
	Model                string    `json:"model"`
	Prompt               *string   `json:"prompt"`
	Messages             []Message `json:"messages"`
	AddSpecialTokens     *bool     `json:"add_special_tokens"`
	AddGenerationPrompt  *bool     `json:"add_generation_prompt"`
	ContinueFinalMessage bool      `json:"continue_final_message"`
	ReturnTokenStrs      bool      `json:"return_token_strs"`
	// Tools and ChatTemplateKwargs are rendered as a chat request renders
	// them, so the count is the chat request's prompt tokens.
	Tools              []Tool         `json:"tools"`
	ChatTemplateKwargs TemplateKwargs `json:"chat_template_kwargs"`
}

// TokenizeResponse is the body of a /tokenize answer.
type TokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

// DetokenizeRequest is the body of POST /detokenize.
type DetokenizeRequest struct {
	Model  string   `json:"model"`
	Tokens TokenIDs `json:"tokens"`
}

// DetokenizeResponse is the body of a /detokenize answer.
type DetokenizeResponse struct {
	Prompt string `json:"prompt"`
}

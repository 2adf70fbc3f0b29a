package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kvpilot/kvpilot/internal/scheduler/engine"
)

// StreamOptions is "stream_options".
type StreamOptions struct {
	// IncludeUsage adds a last chunk with the usage and no choices.
	IncludeUsage bool `json:"include_usage"`
	// ContinuousUsageStats (vLLM's usage in every chunk) is refused.
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// ExtraBody is "extra_body" as some clients send it literally (the OpenAI
// Python client merges it into the body instead; both work).
type ExtraBody struct {
	ProgramID ProgramIDText `json:"program_id"`
}

// ProgramIDText is a program id in a JSON body. Go's decoder turns an
// escaped lone surrogate ("\ud800") into U+FFFD, so different invalid ids
// would name one program; such an id is refused instead, with a 400
// naming program_id.
type ProgramIDText string

// UnmarshalJSON implements json.Unmarshaler.
func (p *ProgramIDText) UnmarshalJSON(b []byte) error {
	if hasLoneSurrogate(b) {
		return BadRequest("program_id", "program_id holds an unpaired UTF-16 surrogate escape; not valid Unicode")
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*p = ProgramIDText(s)
	return nil
}

// hasLoneSurrogate reports whether a JSON string literal escapes a UTF-16
// surrogate that is not half of a pair (high then low).
func hasLoneSurrogate(b []byte) bool { return loneSurrogateAt(b) >= 0 }

// loneSurrogateAt is the offset in b (JSON text) of the first escape of a
// UTF-16 surrogate that is not half of a pair (high then low), -1 if none.
func loneSurrogateAt(b []byte) int {
	// surrogate reads the escape at i, if it is one of a surrogate.
	surrogate := func(i int) (v rune, ok bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		for _, c := range b[i+2 : i+6] {
			switch {
			case c >= '0' && c <= '9':
				v = v<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				v = v<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				v = v<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return v, v >= 0xD800 && v <= 0xDFFF
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		v, ok := surrogate(i)
		switch {
		case !ok:
			i++ // skip the escaped character
		case v >= 0xDC00:
			return i // a low half first
		default:
			lo, ok := surrogate(i + 6)
			if !ok || lo < 0xDC00 {
				return i
			}
			i += 11
		}
	}
	return -1
}

// Common are the fields both endpoints share. Pointers tell "absent" from
// zero.
type Common struct {
	Model         string         `json:"model"`
	MaxTokens     *int           `json:"max_tokens"`
	Temperature   *float64       `json:"temperature"`
	TopP          *float64       `json:"top_p"`
	TopK          *int           `json:"top_k"`
	Seed          *int64         `json:"seed"`
	Stop          StopList       `json:"stop"`
	N             *int           `json:"n"`
	User          string         `json:"user"`
	Stream        bool           `json:"stream"`
	StreamOptions *StreamOptions `json:"stream_options"`

	// Extensions.
	Priority  PriorityField `json:"priority"`
	IgnoreEOS bool          `json:"ignore_eos"`
	MinTokens *int          `json:"min_tokens"`
	ProgramID ProgramIDText `json:"program_id"`
	ExtraBody *ExtraBody    `json:"extra_body"`
	// Output text, as vLLM defines these: IncludeStopStrInOutput keeps the
	// stop string that ended a choice in its text; SkipSpecialTokens
	// (default true) leaves special tokens' text out;
	// SpacesBetweenSpecialTokens (default true) puts a space between two
	// special tokens in a row when they are kept.
	IncludeStopStrInOutput     bool  `json:"include_stop_str_in_output"`
	SkipSpecialTokens          *bool `json:"skip_special_tokens"`
	SpacesBetweenSpecialTokens *bool `json:"spaces_between_special_tokens"`
	// CacheSalt keeps the request's prefix-cache entries apart from those
	// of other salts (vLLM's cache_salt); a non-empty string when given.
	CacheSalt *string `json:"cache_salt"`
	// PromptCacheKey (OpenAI's, on chat and responses) groups requests
	// that share a prefix; here it names the request's program when no
	// program id does (ProgramID).
	PromptCacheKey string `json:"prompt_cache_key"`
	// AddSpecialTokens (default true) tokenizes the prompt with the
	// model's special tokens (its BOS, where the model wants one); false
	// tokenizes the text alone, as /tokenize does.
	AddSpecialTokens *bool `json:"add_special_tokens"`
	// ReturnTokensAsTokenIDs writes each logprob entry's token as
	// "token_id:<id>" (vLLM's).
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`

	Sampling
	Refused

	// Structured outputs (structured.go).
	Guided
}

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Common
	Prompt Prompt `json:"prompt"`
	// Echo puts the prompt's text before each choice's text.
	Echo bool `json:"echo"`
	// BestOf generates best_of choices and returns the n with the highest
	// cumulative log-probability.
	BestOf *int `json:"best_of"`
	// Logprobs asks for each token's log-probability and that many most
	// likely alternatives.
	Logprobs *int `json:"logprobs"`
	// Suffix is refused when set: the runtime does not implement it.
	Suffix *string `json:"suffix"`
}

// Message is one chat turn.
type Message struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
	Name    string  `json:"name,omitempty"`
	// ToolCalls are an assistant turn's calls; ToolCallID is the call a
	// tool turn answers; FunctionCall is the legacy form of one call.
	ToolCalls    []ToolCall    `json:"tool_calls,omitempty"`
	ToolCallID   string        `json:"tool_call_id,omitempty"`
	FunctionCall *FunctionCall `json:"function_call,omitempty"`
	// ReasoningContent is an assistant turn's reasoning, as this server
	// returned it (reasoning_content; reasoning, its other name, is read
	// when reasoning_content is absent).
	ReasoningContent string `json:"reasoning_content,omitempty"`
	Reasoning        string `json:"reasoning,omitempty"`
}

// ReasoningText is the message's reasoning under either name.
func (m *Message) ReasoningText() string {
	if m.ReasoningContent != "" {
		return m.ReasoningContent
	}
	return m.Reasoning
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Common
	Messages            []Message `json:"messages"`
	MaxCompletionTokens *int      `json:"max_completion_tokens"`
	// Logprobs asks for each output token's log-probability, TopLogprobs
	// for that many most likely alternatives too.
	Logprobs    *bool `json:"logprobs"`
	TopLogprobs *int  `json:"top_logprobs"`
	// AddGenerationPrompt (default true) ends the prompt with the header
	// of an assistant turn; ContinueFinalMessage instead leaves the last
	// message open so the model continues it.
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
	ContinueFinalMessage bool  `json:"continue_final_message"`
	// ChatTemplateKwargs are further variables of the chat template
	// (vLLM's), e.g. {"enable_thinking": false} for Qwen3's.
	ChatTemplateKwargs TemplateKwargs `json:"chat_template_kwargs"`
	// ReasoningEffort (none, minimal, low, medium, high, xhigh) reaches
	// the template as reasoning_effort (gpt-oss's "Reasoning: …"); none
	// also as enable_thinking false (Qwen3's switch), as vLLM passes it.
	ReasoningEffort *string `json:"reasoning_effort"`
	// ThinkingBudget caps the tokens of a model's <think> reasoning (0:
	// no cap). No chat field sets it: Anthropic's thinking.budget_tokens
	// does, through the Messages translation.
	ThinkingBudget int `json:"-"`

	// BestOf generates best_of choices and returns the n with the highest
	// cumulative log-probability, as on completions.
	BestOf *int `json:"best_of"`

	// Tool calling (tools.go).
	ToolFields
	ChatRefused
}

// TemplateKwargs are chat_template_kwargs: variables handed to the chat
// template as they are.
type TemplateKwargs map[string]json.RawMessage

// reservedTemplateVars are the variables the server itself sets when it
// renders a template; the request's own fields set them (vLLM lets these
// keys replace its fields, and refuses chat_template and tokenize).
var reservedTemplateVars = []string{"messages", "tools", "add_generation_prompt", "continue_final_message",
	"documents", "chat_template", "tokenize", "bos_token", "eos_token", "raise_exception", "strftime_now"}

// Check refuses the variables the server sets itself, with a 400 naming
// chat_template_kwargs.
func (k TemplateKwargs) Check() *Error {
	for _, name := range reservedTemplateVars {
		if _, ok := k[name]; ok {
			return BadRequest("chat_template_kwargs", "chat_template_kwargs.%s is not accepted: it is set from the request's own fields", name)
		}
	}
	return nil
}

// GenerationPrompt reports whether the rendered prompt ends with an open
// assistant turn header.
func (r *ChatRequest) GenerationPrompt() bool {
	return r.AddGenerationPrompt == nil || *r.AddGenerationPrompt
}

// SpecialTokens reports whether the prompt is tokenized with the model's
// special tokens (add_special_tokens, default true).
func (c *Common) SpecialTokens() bool { return c.AddSpecialTokens == nil || *c.AddSpecialTokens }

// IncludeUsage reports whether a streaming response ends with a usage chunk.
func (c *Common) IncludeUsage() bool { return c.StreamOptions != nil && c.StreamOptions.IncludeUsage }

// BodyProgram is what a request body says of its program: its program
// id, and its prompt_cache_key, which ProgramID ranks below the session
// header X-Session-ID.
type BodyProgram struct {
	ID       string
	CacheKey string
}

// BodyProgram is the program the body names: program_id, else
// extra_body.program_id; and prompt_cache_key.
func (c *Common) BodyProgram() BodyProgram {
	b := BodyProgram{ID: string(c.ProgramID), CacheKey: c.PromptCacheKey}
	if b.ID == "" && c.ExtraBody != nil {
		b.ID = string(c.ExtraBody.ProgramID)
	}
	return b
}

// Salt is cache_salt ("" when absent).
func (c *Common) Salt() string {
	if c.CacheSalt == nil {
		return ""
	}
	return *c.CacheSalt
}

// Choices is n: how many choices each prompt gets.
func (c *Common) Choices() int {
	if c.N == nil {
		return 1
	}
	return *c.N
}

// Logprob settings of a request: whether each token's log-probability is
// returned, and how many alternatives with it.
type Logprob struct {
	On  bool
	Top int
	// TokenIDs: each token is written "token_id:<id>"
	// (return_tokens_as_token_ids).
	TokenIDs bool
}

// LogprobSettings resolves "logprobs" (an integer: the alternatives).
func (r *CompletionRequest) LogprobSettings() Logprob {
	if r.Logprobs == nil {
		return Logprob{}
	}
	return Logprob{On: true, Top: *r.Logprobs, TokenIDs: r.ReturnTokensAsTokenIDs}
}

// LogprobSettings resolves "logprobs" and "top_logprobs".
func (r *ChatRequest) LogprobSettings() Logprob {
	if r.Logprobs == nil || !*r.Logprobs {
		return Logprob{}
	}
	l := Logprob{On: true, TokenIDs: r.ReturnTokensAsTokenIDs}
	if r.TopLogprobs != nil {
		l.Top = *r.TopLogprobs
	}
	return l
}

// Candidates is best_of when set, else n: the sequences generated per
// prompt.
func (r *CompletionRequest) Candidates() int { return candidates(r.BestOf, &r.Common) }

// Candidates is best_of when set, else n.
func (r *ChatRequest) Candidates() int { return candidates(r.BestOf, &r.Common) }

func candidates(bestOf *int, c *Common) int {
	if bestOf != nil {
		return *bestOf
	}
	return c.Choices()
}

// checkBestOf checks best_of against n and streaming.
func checkBestOf(bestOf *int, c *Common) *Error {
	switch {
	case bestOf != nil && (*bestOf < c.Choices() || *bestOf > MaxN):
		return BadRequest("best_of", "best_of must be in [n, %d], got %d with n %d", MaxN, *bestOf, c.Choices())
	case bestOf != nil && *bestOf > c.Choices() && c.Stream:
		return BadRequest("best_of", "best_of > n cannot be streamed")
	}
	return nil
}

// ParseCompletion parses and validates a completion request body.
func ParseCompletion(body []byte) (*CompletionRequest, *Error) {
	var r CompletionRequest
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	if !r.Prompt.Set() {
		return nil, BadRequest("prompt", "prompt is required")
	}
	if err := checkBestOf(r.BestOf, &r.Common); err != nil {
		return nil, err
	}
	switch {
	case r.Suffix != nil && *r.Suffix != "":
		return nil, BadRequest("suffix", "suffix is not supported")
	case r.Logprobs != nil && (*r.Logprobs < 0 || *r.Logprobs > MaxTopLogprobs):
		return nil, BadRequest("logprobs", "logprobs must be in [0, %d], got %d", MaxTopLogprobs, *r.Logprobs)
	case r.Echo && r.Logprobs != nil:
		return nil, BadRequest("echo", "echo with logprobs needs the prompt's logprobs, which the runtime does not compute")
	}
	if err := r.Common.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// ParseChat parses and validates a chat completion request body.
func ParseChat(body []byte) (*ChatRequest, *Error) {
	var r ChatRequest
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	if len(r.Messages) == 0 {
		return nil, BadRequest("messages", "messages must contain at least one message")
	}
	if err := checkMessages(r.Messages); err != nil {
		return nil, err
	}
	if e := r.ReasoningEffort; e != nil && !slices.Contains(reasoningEfforts, *e) {
		return nil, BadRequest("reasoning_effort", "reasoning_effort %q: want one of %s", *e, strings.Join(reasoningEfforts, ", "))
	}
	if r.ReasoningEffort != nil {
		r.ChatTemplateKwargs = effortKwargs(r.ChatTemplateKwargs, *r.ReasoningEffort)
	}
	switch lp := r.LogprobSettings(); {
	case r.TopLogprobs != nil && (*r.TopLogprobs < 0 || *r.TopLogprobs > MaxTopLogprobs):
		return nil, BadRequest("top_logprobs", "top_logprobs must be in [0, %d], got %d", MaxTopLogprobs, *r.TopLogprobs)
	case r.TopLogprobs != nil && *r.TopLogprobs > 0 && !lp.On:
		return nil, BadRequest("top_logprobs", "top_logprobs needs logprobs: true")
	case r.ContinueFinalMessage && r.GenerationPrompt() && r.AddGenerationPrompt != nil:
		return nil, BadRequest("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true")
	case r.ContinueFinalMessage && r.Messages[len(r.Messages)-1].Role != "assistant":
		return nil, BadRequest("continue_final_message", "continue_final_message needs the last message to be the assistant's")
	}
	if err := r.ChatTemplateKwargs.Check(); err != nil {
		return nil, err
	}
	if err := checkBestOf(r.BestOf, &r.Common); err != nil {
		return nil, err
	}
	if err := r.ChatRefused.check(); err != nil {
		return nil, err
	}
	if r.MaxCompletionTokens != nil {
		if r.MaxTokens != nil && *r.MaxTokens != *r.MaxCompletionTokens {
			return nil, BadRequest("max_completion_tokens", "max_tokens (%d) and max_completion_tokens (%d) disagree",
				*r.MaxTokens, *r.MaxCompletionTokens)
		}
		r.MaxTokens = r.MaxCompletionTokens
	}
	if err := r.Common.validate(); err != nil {
		if err.Param == "max_tokens" && r.MaxCompletionTokens != nil {
			err.Param = "max_completion_tokens"
		}
		return nil, err
	}
	return &r, nil
}

// Decode unmarshals a request body into dst as every endpoint's parser
// does (decode): the other APIs' parsers (Anthropic's Messages) read their
// bodies through it, so they answer the same 400s for the same bytes.
func Decode(body []byte, dst any) *Error { return decode(body, dst) }

// decode unmarshals a JSON object, mapping every failure to a 400 that
// names the field when it can: a top-level key that matches a field only
// case-insensitively is refused (checkKeyCase), the lenient number and
// boolean strings are read as their values, and invalid UTF-8 or an
// unpaired surrogate escape inside a string is refused (checkText).
func decode(body []byte, dst any) *Error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return BadRequest("", "request body is empty; want a JSON object")
	}
	if body[0] != '{' {
		return BadRequest("", "request body must be a JSON object")
	}
	in, apiErr := prepare(body, dst)
	if apiErr != nil {
		return apiErr
	}
	err := json.Unmarshal(in, dst)
	if err == nil {
		return checkText(body)
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &typeErr):
		field := typeErrorField(in, typeErr)
		if field == "" {
			return BadRequest("", "request body: %s is not a valid %s", typeErr.Value, typeErr.Type)
		}
		want := jsonType(typeErr.Type.String())
		if k, ok := reflect.Zero(typeErr.Type).Interface().(JSONKinds); ok {
			want = k.JSONKinds()
		}
		return BadRequest(field, "%s: want %s, got %s", field, want, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return BadRequest("", "invalid JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	}
	return BadRequest("", "invalid JSON: %v", err)
}

// JSONKinds is a type that decodes JSON values of more than one kind; a
// type error naming it says which ("a string or an array of content
// blocks") instead of its Go kind's.
type JSONKinds interface{ JSONKinds() string }

// typeErrorField is the JSON path (messages[1].role) of the field a type
// error is about, in body, the document decoded. The decoder's own Field
// has no array indexes and names embedded structs by their Go names
// (Guided.response_format): the path is that of the first value in body
// at that field, its indexes put back, that has the kind the error names.
// An index at its end (an element of the field's array) is left out:
// stop_token_ids, not stop_token_ids[0].
func typeErrorField(body []byte, e *json.UnmarshalTypeError) string {
	parts := strings.Split(e.Field, ".")
	parts = slices.DeleteFunc(parts, func(p string) bool {
		r, _ := utf8.DecodeRuneInString(p)
		return unicode.IsUpper(r) // a Go struct name: the request's JSON names are lower case
	})
	field := strings.Join(parts, ".")
	kind, _, _ := strings.Cut(e.Value, " ") // "number 1e999"
	if p := valueOfKind(body, field, kind); p != "" {
		field = p
	}
	for strings.HasSuffix(field, "]") {
		field = field[:strings.LastIndexByte(field, '[')]
	}
	return field
}

// withoutIndexes drops a path's array indexes: messages[1].role becomes
// messages.role.
func withoutIndexes(path string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '[')
		if i < 0 {
			b.WriteString(path)
			return b.String()
		}
		b.WriteString(path[:i])
		j := strings.IndexByte(path[i:], ']')
		if j < 0 {
			return b.String()
		}
		path = path[i+j+1:]
	}
}

// jsonType names a Go type the way a JSON client thinks of it.
func jsonType(goType string) string {
	goType = strings.TrimPrefix(goType, "*")
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// Validate checks the fields' ranges, as the chat and completion parsers
// do (for requests other APIs translate into a ChatRequest).
func (c *Common) Validate() *Error { return c.validate() }

// validate checks ranges; the engine re-checks what depends on the model.
func (c *Common) validate() *Error {
	if err := c.Sampling.validate(c.Choices()); err != nil {
		return err
	}
	if err := c.Refused.check(); err != nil {
		return err
	}
	if c.StreamOptions != nil && c.StreamOptions.ContinuousUsageStats {
		return BadRequest("stream_options.continuous_usage_stats", "stream_options.continuous_usage_stats is not supported; include_usage gives the usage in a last chunk")
	}
	switch {
	case c.MaxTokens != nil && *c.MaxTokens < 1:
		return BadRequest("max_tokens", "max_tokens must be at least 1, got %d", *c.MaxTokens)
	case c.MinTokens != nil && *c.MinTokens < 0:
		return BadRequest("min_tokens", "min_tokens must be >= 0, got %d", *c.MinTokens)
	case c.MinTokens != nil && c.MaxTokens != nil && *c.MinTokens > *c.MaxTokens:
		return BadRequest("min_tokens", "min_tokens (%d) is more than max_tokens (%d)", *c.MinTokens, *c.MaxTokens)
	case c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > math.MaxFloat32 || math.IsNaN(*c.Temperature)):
		return BadRequest("temperature", "temperature must be >= 0, got %g", *c.Temperature)
	case c.TopP != nil && !(*c.TopP > 0 && *c.TopP <= 1):
		return BadRequest("top_p", "top_p must be in (0, 1], got %g", *c.TopP)
	case c.TopK != nil && *c.TopK < -1:
		return BadRequest("top_k", "top_k must be -1 (disabled), 0 (disabled) or positive, got %d", *c.TopK)
	}
	if c.CacheSalt != nil && *c.CacheSalt == "" {
		return BadRequest("cache_salt", "cache_salt must be a non-empty string when given")
	}
	if len(c.Stop) > MaxStopStrings {
		return BadRequest("stop", "stop has %d strings; at most %d", len(c.Stop), MaxStopStrings)
	}
	total := 0
	for i, s := range c.Stop {
		if s == "" {
			return BadRequest("stop", "stop[%d] is empty", i)
		}
		if total += len(s); total > MaxStopBytes {
			return BadRequest("stop", "stop strings add up to more than %d bytes", MaxStopBytes)
		}
	}
	return nil
}

// Defaults are what the server fills in for absent fields.
type Defaults struct {
	// Stop applies when the request gives no stop strings.
	Stop []string
	// MaxResponseChars limits the output text (0 = none).
	MaxResponseChars int
}

// EngineParams converts the sampling fields; maxTokens is the resolved
// output limit (the request's, or the server's default).
func (c *Common) EngineParams(maxTokens int, d Defaults) engine.Params {
	p := engine.Params{
		MaxTokens:        maxTokens,
		Temperature:      1,
		IgnoreEOS:        c.IgnoreEOS,
		MaxResponseChars: d.MaxResponseChars,
	}
	if c.Temperature != nil {
		p.Temperature = float32(*c.Temperature)
	}
	if c.TopP != nil {
		p.TopP = float32(*c.TopP)
	}
	if c.TopK != nil && *c.TopK > 0 {
		p.TopK = *c.TopK
	}
	if c.Seed != nil {
		p.Seed, p.HasSeed = uint64(*c.Seed), true
	}
	if c.MinTokens != nil {
		p.MinTokens = *c.MinTokens
	}
	f32 := func(v *float64) float32 {
		if v == nil {
			return 0
		}
		return float32(*v)
	}
	p.PresencePenalty = f32(c.PresencePenalty)
	p.FrequencyPenalty = f32(c.FrequencyPenalty)
	p.RepetitionPenalty = f32(c.RepetitionPenalty)
	p.MinP = f32(c.MinP)
	p.LogitBias = c.Biases()
	p.StopTokenIDs = c.StopTokenIDs
	p.IncludeStopStr = c.IncludeStopStrInOutput
	p.KeepSpecialTokens = c.SkipSpecialTokens != nil && !*c.SkipSpecialTokens
	p.SpecialTokenSpaces = p.KeepSpecialTokens && (c.SpacesBetweenSpecialTokens == nil || *c.SpacesBetweenSpecialTokens)
	if len(c.Stop) > 0 {
		p.Stop = c.Stop
	} else {
		p.Stop = d.Stop
	}
	return p
}

// ProgramSessionHeaders are the headers that name an agent client's
// session, in the order ProgramID takes them after the body's
// prompt_cache_key: Codex's and Claude Code's. Every request of one
// session carries the same value, which is what a program is.
var ProgramSessionHeaders = []string{"Session-Id", "X-Claude-Code-Session-Id"}

// ProgramID resolves the program a request belongs to, the first of:
// header X-Program-Id; the body's program id (program_id, else
// extra_body.program_id); header X-Session-ID (ThunderAgent-style
// clients); the body's prompt_cache_key (OpenAI's prefix-cache affinity
// key: Codex sends its session id there); header session-id (Codex);
// header x-claude-code-session-id (Claude Code); else "" (the request is
// its own program). param is the field to name when the id is refused:
// prompt_cache_key when the id came from it, else program_id.
func ProgramID(header func(string) string, body BodyProgram) (id, param string) {
	if v := strings.TrimSpace(header("X-Program-Id")); v != "" {
		return v, "program_id"
	}
	if body.ID != "" {
		return body.ID, "program_id"
	}
	if v := strings.TrimSpace(header("X-Session-ID")); v != "" {
		return v, "program_id"
	}
	if body.CacheKey != "" {
		return body.CacheKey, "prompt_cache_key"
	}
	for _, h := range ProgramSessionHeaders {
		if v := strings.TrimSpace(header(h)); v != "" {
			return v, "program_id"
		}
	}
	return "", ""
}

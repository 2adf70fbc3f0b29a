package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error types, as OpenAI spells them where it has a word for the case.
const (
	TypeInvalidRequest     = "invalid_request_error"
	TypeNotFound           = "not_found_error"
	TypeRateLimit          = "rate_limit_error"
	TypeServiceUnavailable = "service_unavailable_error"
	TypeServer             = "server_error"
)

// Error codes that clients match on.
const (
	CodeInvalidAPIKey    = "invalid_api_key"
	CodeModelNotFound    = "model_not_found"
	CodeRequestTooLarge  = "request_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeQueueFull        = "queue_full"
	CodeContextLength    = "context_length_exceeded"
	CodeDraining         = "draining"
	// CodeUpstreamUnavailable: the pod the request's program runs on could
	// not be reached; retrying (after Retry-After) is safe.
	CodeUpstreamUnavailable = "upstream_unavailable"
	// CodeMemoryBusy: the pod's budget of request-preprocessing memory is
	// spent by requests in flight; retrying (after Retry-After) is safe.
	CodeMemoryBusy = "preprocessing_memory_busy"
)

// Error is an API error: the HTTP status and the body
// {"error":{"message","type","param","code"}}.
type Error struct {
	Status  int
	Message string
	Type    string
	Param   string // the offending request field, "" when none
	Code    string // a machine-readable code, "" when none
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%d %s: %s (param %s)", e.Status, e.Type, e.Message, e.Param)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message)
}

// ErrorResponse is the JSON body of an error.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the "error" object; param and code are null when unset, as
// OpenAI sends them.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// Body returns the error's wire form.
func (e *Error) Body() ErrorResponse {
	b := ErrorBody{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		b.Param = &e.Param
	}
	if e.Code != "" {
		b.Code = &e.Code
	}
	return ErrorResponse{Error: b}
}

// JSON is the marshalled body.
func (e *Error) JSON() []byte {
	b, err := json.Marshal(e.Body())
	if err != nil { // cannot happen: only strings
		return []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":null}}`)
	}
	return b
}

// BadRequest is a 400 about one request field.
func BadRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// Unauthorized is the 401 for a missing or wrong API key.
func Unauthorized() *Error {
	return &Error{Status: http.StatusUnauthorized, Type: TypeInvalidRequest, Code: CodeInvalidAPIKey,
		Message: "missing or invalid API key: send Authorization: Bearer <key> (or x-api-key: <key>)"}
}

// ModelNotFound is the 404 for a model this server does not serve.
func ModelNotFound(model string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeNotFound, Param: "model", Code: CodeModelNotFound,
		Message: fmt.Sprintf("the model %q does not exist", model)}
}

// NotFound is the 404 for an unknown path.
func NotFound(path string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeNotFound, Message: fmt.Sprintf("no such endpoint: %s", path)}
}

// MethodNotAllowed is the 405 for a known path with the wrong method.
func MethodNotAllowed(method, path string) *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Type: TypeInvalidRequest, Code: CodeMethodNotAllowed,
		Message: fmt.Sprintf("method %s is not allowed on %s", method, path)}
}

// TooLarge is the 413 for a body over the limit.
func TooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: TypeInvalidRequest, Code: CodeRequestTooLarge,
		Message: fmt.Sprintf("request body exceeds the limit of %d bytes", limit)}
}

// UnsupportedMediaType is the 415 for a body declared as something other
// than JSON (Content-Type contentType).
func UnsupportedMediaType(contentType string) *Error {
	return &Error{Status: http.StatusUnsupportedMediaType, Type: TypeInvalidRequest, Code: CodeUnsupportedMedia,
		Message: fmt.Sprintf("Content-Type %q is not accepted: send the JSON body with Content-Type: application/json", contentType)}
}

// QueueFull is the 429 when the engine's waiting queue is full.
func QueueFull() *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: TypeRateLimit, Code: CodeQueueFull,
		Message: "the server's request queue is full; retry later"}
}

// Unavailable is the 503 while draining or before the engine runs.
func Unavailable(msg string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, Code: CodeDraining, Message: msg}
}

// UpstreamUnavailable is the 503 when the pod a request was forwarded to
// cannot be reached: this pod is not draining, the other one is gone.
func UpstreamUnavailable(msg string) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, Code: CodeUpstreamUnavailable, Message: msg}
}

// MemoryBusy is the 503 when the pod's budget of request-preprocessing
// memory cannot give the request what its body or its constraint needs
// now: the request is not at fault, and other requests in flight give
// their part back as they end.
func MemoryBusy(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, Code: CodeMemoryBusy, Param: param,
		Message: fmt.Sprintf(format, args...) + "; retry later"}
}

// Internal is a 500.
func Internal(msg string) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Message: msg}
}

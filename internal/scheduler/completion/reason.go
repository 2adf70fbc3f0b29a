package completion

import "strconv"

// Reason is why a request stopped generating.
type Reason uint8

const (
	// None means the request is still generating.
	None Reason = iota
	// Stop means the model ended the output: an EOS token, a stop token id or
	// a stop string.
	Stop
	// Length means a limit cut the output: max tokens, max response
	// characters or the model's context.
	Length
	// Cancelled means the client went away or cancelled the request.
	Cancelled
	// Error means the engine failed the request.
	Error
)

var reasonNames = [...]string{
	None:      "",
	Stop:      "stop",
	Length:    "length",
	Cancelled: "cancelled",
	Error:     "error",
}

// String returns the finish_reason spelling: OpenAI's "stop" and "length",
// and "cancelled" and "error" for the reasons OpenAI has no word for. None
// is "", so an unfinished chunk carries no finish_reason.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

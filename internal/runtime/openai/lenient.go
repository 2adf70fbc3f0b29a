package openai

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Fields whose value clients send as a string now and then ("0.7",
// "true"): numbers and booleans. Everything else keeps strict types.
var (
	numberFields = []string{
		"max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "n", "best_of",
		"min_tokens", "presence_penalty", "frequency_penalty", "repetition_penalty", "min_p",
		"top_logprobs", "truncate_prompt_tokens", "priority",
	}
	boolFields = []string{
		"stream", "echo", "ignore_eos", "return_token_ids", "add_generation_prompt",
		"continue_final_message", "add_special_tokens", "include_stop_str_in_output", "skip_special_tokens",
		"spaces_between_special_tokens", "return_tokens_as_token_ids", "use_beam_search",
	}
)

// prepare reads a request body's top-level object once, for what the
// strict decode of it into dst cannot do: it refuses a key that names one
// of dst's fields only case-insensitively (checkKeyCase), and rewrites the
// lenient values (lenient). A body that is not a JSON object comes back
// unchanged, for the strict decoder to refuse.
func prepare(body []byte, dst any) ([]byte, *Error) {
	if !bytes.Contains(body, []byte(`"`)) {
		return body, nil // no keys
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return body, nil
	}
	if err := checkKeyCase(m, dst); err != nil {
		return nil, err
	}
	return lenient(body, m), nil
}

// lenient rewrites the values vLLM's and OpenAI's clients send loosely into
// their JSON types: a number or boolean field given as a string holding
// one ("max_tokens":"16", "stream":"true",
// "stream_options":{"include_usage":"true"}), and "logprobs" given as
// "true"/"false" or a numeric string. A string that holds no such value is
// left alone, so the strict decoder still answers 400 naming the field. m
// is body's top-level object; body comes back unchanged when nothing was
// rewritten.
func lenient(body []byte, m map[string]json.RawMessage) []byte {
	changed := false
	for _, k := range numberFields {
		changed = toNumber(m, k) || changed
	}
	for _, k := range boolFields {
		changed = toBool(m, k) || changed
	}
	changed = toBool(m, "logprobs") || toNumber(m, "logprobs") || changed
	if raw, ok := m["stream_options"]; ok {
		var so map[string]json.RawMessage
		if json.Unmarshal(raw, &so) == nil {
			if c := toBool(so, "include_usage"); toBool(so, "continuous_usage_stats") || c {
				if b, err := json.Marshal(so); err == nil {
					m["stream_options"], changed = b, true
				}
			}
		}
	}
	if !changed {
		return body
	}
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// quoted returns m[k]'s string value when it is a JSON string.
func quoted(m map[string]json.RawMessage, k string) (string, bool) {
	raw, ok := m[k]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return strings.TrimSpace(s), true
}

func toNumber(m map[string]json.RawMessage, k string) bool {
	s, ok := quoted(m, k)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != f || f > 1e308 || f < -1e308 {
		return false
	}
	// Keep the client's digits: an integer stays an integer.
	m[k] = json.RawMessage(s)
	if !json.Valid(m[k]) {
		m[k] = json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return true
}

func toBool(m map[string]json.RawMessage, k string) bool {
	s, ok := quoted(m, k)
	if !ok {
		return false
	}
	switch strings.ToLower(s) {
	case "true":
		m[k] = json.RawMessage("true")
	case "false":
		m[k] = json.RawMessage("false")
	default:
		return false
	}
	return true
}

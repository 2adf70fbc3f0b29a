package openai

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ResponseFormat is "response_format".
type ResponseFormat struct {
	// Type is "text", "json_object" or "json_schema".
	Type       string            `json:"type"`
	JSONSchema *JSONSchemaFormat `json:"json_schema"`
	// Param, when set, is the field of another API's request this format
	// was translated from (Anthropic's output_format): errors about the
	// format name it instead of response_format.
	Param string `json:"-"`
}

// JSONSchemaFormat is response_format.json_schema.
type JSONSchemaFormat struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	// Strict: true refuses a schema with an assertion keyword the
	// decoder cannot enforce (400 naming it); otherwise such keywords
	// are dropped, named in the X-Kvpilot-Schema-Dropped header.
	Strict *bool `json:"strict"`
}

// StructuredOutputs is vLLM's "structured_outputs" object (newer spelling
// of the guided_* fields).
type StructuredOutputs struct {
	JSON    json.RawMessage `json:"json"`
	Regex   *string         `json:"regex"`
	Choice  Strings         `json:"choice"`
	Grammar *string         `json:"grammar"`
	// JSONObject true is response_format json_object.
	JSONObject *bool `json:"json_object"`
	// Refused when they would change the output (Constraint).
	WhitespacePattern           *string         `json:"whitespace_pattern"`
	StructuralTag               json.RawMessage `json:"structural_tag"`
	DisableAnyWhitespace        bool            `json:"disable_any_whitespace"`
	DisableAdditionalProperties bool            `json:"disable_additional_properties"`
	// DisableFallback and Backend choose among vLLM's backends; there is
	// one here, so they change nothing.
	DisableFallback bool   `json:"disable_fallback"`
	Backend         string `json:"backend"`
}

// Guided are the structured-output fields both endpoints accept: OpenAI's
// response_format and vLLM's guided_* extensions.
type Guided struct {
	ResponseFormat          *ResponseFormat    `json:"response_format"`
	GuidedJSON              json.RawMessage    `json:"guided_json"`
	GuidedRegex             *string            `json:"guided_regex"`
	GuidedChoice            Strings            `json:"guided_choice"`
	GuidedGrammar           *string            `json:"guided_grammar"`
	GuidedWhitespacePattern *string            `json:"guided_whitespace_pattern"`
	GuidedDecodingBackend   string             `json:"guided_decoding_backend"`
	StructuredOutputs       *StructuredOutputs `json:"structured_outputs"`
	// StructuralTag is vLLM's older spelling of
	// structured_outputs.structural_tag: refused.
	StructuralTag json.RawMessage `json:"structural_tag"`
}

// Constraint kinds.
const (
	ConstraintJSONSchema = "json_schema"
	ConstraintJSONObject = "json_object"
	ConstraintRegex      = "regex"
	ConstraintChoice     = "choice"
	// ConstraintGrammar is a GBNF grammar (guided_grammar,
	// structured_outputs.grammar).
	ConstraintGrammar = "grammar"
)

// OutputConstraint is what a request asks its output to be.
type OutputConstraint struct {
	Kind string
	// Param is the request field that asked for it (errors name it).
	Param  string
	Schema json.RawMessage
	// Lenient: the schema's assertion keywords the decoder cannot
	// enforce are dropped rather than refused (response_format without
	// strict: true).
	Lenient bool
	Regex   string
	Choices []string
	Grammar string
}

// Key identifies the constraint for caching compiled grammars.
func (c *OutputConstraint) Key() string {
	switch c.Kind {
	case ConstraintJSONSchema:
		lenient := "strict"
		if c.Lenient {
			lenient = "lenient"
		}
		return c.Kind + "\x00" + lenient + "\x00" + string(c.Schema)
	case ConstraintGrammar:
		return c.Kind + "\x00" + c.Grammar
	case ConstraintRegex:
		return c.Kind + "\x00" + c.Regex
	case ConstraintChoice:
		return c.Kind + "\x00" + strings.Join(c.Choices, "\x00")
	}
	return c.Kind
}

// Constraint resolves the structured-output fields: nil when the output is
// free text, a 400 naming the field for a value the server cannot honour
// or for two fields that both constrain the output.
func (g *Guided) Constraint() (*OutputConstraint, *Error) {
	var found []*OutputConstraint
	if rf := g.ResponseFormat; rf != nil {
		named := func(param string) string {
			if rf.Param != "" {
				return rf.Param
			}
			return param
		}
		switch rf.Type {
		case "", "text":
		case "json_object":
			found = append(found, &OutputConstraint{Kind: ConstraintJSONObject, Param: named("response_format")})
		case "json_schema":
			if rf.JSONSchema == nil || isAbsent(rf.JSONSchema.Schema) {
				return nil, BadRequest("response_format.json_schema", "response_format of type json_schema needs json_schema.schema")
			}
			strict := rf.JSONSchema.Strict != nil && *rf.JSONSchema.Strict
			found = append(found, &OutputConstraint{Kind: ConstraintJSONSchema, Param: named("response_format.json_schema.schema"),
				Schema: rf.JSONSchema.Schema, Lenient: !strict})
		default:
			return nil, BadRequest("response_format.type", "unknown response_format type %q; want text, json_object or json_schema", rf.Type)
		}
	}
	found, err := appendConstraints(found, g.GuidedJSON, g.GuidedRegex, g.GuidedChoice, "guided_json", "guided_regex", "guided_choice")
	if err != nil {
		return nil, err
	}
	if g.GuidedGrammar != nil {
		found = append(found, &OutputConstraint{Kind: ConstraintGrammar, Param: "guided_grammar", Grammar: *g.GuidedGrammar})
	}
	if g.GuidedWhitespacePattern != nil {
		return nil, BadRequest("guided_whitespace_pattern", "guided_whitespace_pattern is not supported")
	}
	if !isAbsent(g.StructuralTag) {
		return nil, BadRequest("structural_tag", "structural_tag is not supported")
	}
	if so := g.StructuredOutputs; so != nil {
		switch {
		case so.WhitespacePattern != nil:
			return nil, BadRequest("structured_outputs.whitespace_pattern", "structured_outputs.whitespace_pattern is not supported")
		case !isAbsent(so.StructuralTag):
			return nil, BadRequest("structured_outputs.structural_tag", "structured_outputs.structural_tag is not supported")
		case so.DisableAnyWhitespace:
			return nil, BadRequest("structured_outputs.disable_any_whitespace", "structured_outputs.disable_any_whitespace is not supported")
		case so.DisableAdditionalProperties:
			return nil, BadRequest("structured_outputs.disable_additional_properties", "structured_outputs.disable_additional_properties is not supported")
		}
		if so.JSONObject != nil && *so.JSONObject {
			found = append(found, &OutputConstraint{Kind: ConstraintJSONObject, Param: "structured_outputs.json_object"})
		}
		if found, err = appendConstraints(found, so.JSON, so.Regex, so.Choice,
			"structured_outputs.json", "structured_outputs.regex", "structured_outputs.choice"); err != nil {
			return nil, err
		}
		if so.Grammar != nil {
			found = append(found, &OutputConstraint{Kind: ConstraintGrammar, Param: "structured_outputs.grammar", Grammar: *so.Grammar})
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	return nil, BadRequest(found[1].Param, "%s and %s both constrain the output; give one", found[0].Param, found[1].Param)
}

// appendConstraints appends the JSON, regex and choice constraints of one
// spelling of the fields (vLLM's guided_* or structured_outputs), each
// named by its parameter.
func appendConstraints(found []*OutputConstraint, js json.RawMessage, regex *string, choice []string, jsonP, regexP, choiceP string) ([]*OutputConstraint, *Error) {
	if !isAbsent(js) {
		c, err := jsonConstraint(js, jsonP)
		if err != nil {
			return nil, err
		}
		found = append(found, c)
	}
	if regex != nil {
		found = append(found, &OutputConstraint{Kind: ConstraintRegex, Param: regexP, Regex: *regex})
	}
	if choice != nil {
		if len(choice) == 0 {
			return nil, BadRequest(choiceP, "%s must list at least one choice", choiceP)
		}
		found = append(found, &OutputConstraint{Kind: ConstraintChoice, Param: choiceP, Choices: choice})
	}
	return found, nil
}

// jsonConstraint reads guided_json: a schema object, or a string holding
// one (vLLM accepts both).
func jsonConstraint(raw json.RawMessage, param string) (*OutputConstraint, *Error) {
	raw = bytes.TrimSpace(raw)
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, BadRequest(param, "%s: %v", param, err)
		}
		raw = json.RawMessage(strings.TrimSpace(s))
		if !json.Valid(raw) {
			return nil, BadRequest(param, "%s is a string but not a JSON schema", param)
		}
	}
	return &OutputConstraint{Kind: ConstraintJSONSchema, Param: param, Schema: raw}, nil
}

func isAbsent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

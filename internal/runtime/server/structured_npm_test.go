package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/nodeclients"
)

// TestZodSchemasWithNpmClients: schemas (testdata/node/zod_structured.cjs
// converts zod schemas to JSON schemas the way clients do: zod 4's
// z.toJSONSchema, from zod 3.25's zod/v4, the version openai 5 accepts as
// its peer; strict, as the client's zodResponseFormat sends them) written with zod (.int(),
// .min(), .email(), .url(), unions, a recursive z.lazy tree) and converted
// as clients convert them are enforced on the random-weight model, as
// response_format and as a forced tool, through the npm openai client
// over loopback; ajv and zod accept every answer.
func TestZodSchemasWithNpmClients(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages and decodes 18 answers: not in -short")
	}
	dir := nodeclients.Dir(t)
	env, _ := newCPUEnv(t)
	out := nodeclients.Output(t, dir, "testdata/node/zod_structured.cjs", "BASE_URL="+env.ts.URL+"/v1", "MODEL="+testModel)
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var r struct {
			Name, Via, Finish, Text string
			Seed                    int
			ParseError              *string
			AjvOK, ZodOK            bool
			AjvErrors               json.RawMessage
			Schema                  json.RawMessage
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("node printed %q: %v", line, err)
		}
		n++
		if r.ParseError != nil || !r.AjvOK || !r.ZodOK {
			t.Errorf("%s via %s seed %d (finish %s): %q: parse %v, ajv %v %s, zod %v\nschema %s",
				r.Name, r.Via, r.Seed, r.Finish, r.Text, r.ParseError, r.AjvOK, r.AjvErrors, r.ZodOK, r.Schema)
		}
	}
	if n != 18 {
		t.Errorf("%d answers checked, want 18", n)
	}
}

package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/npm"
)

// zodClientScript converts zod schemas to JSON schemas the way clients do
// (zod 4's z.toJSONSchema, from zod 3.25's zod/v4, the version openai 5 accepts as its peer), sends each with the npm openai client as
// response_format json_schema (strict, as the client's zodResponseFormat
// does) and as a forced tool, and validates every answer with ajv (draft
// 2020-12, ajv-formats) and with zod itself. It prints one JSON line per
// answer.
const zodClientScript = `
const { z } = require('zod/v4');
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;
const OpenAI = require('openai').default;

const Tree = z.lazy(() => z.object({ name: z.string().max(6), children: z.array(Tree).max(2) }));
const schemas = {
  account: z.object({
    id: z.number().int().min(1),
    age: z.number().int().min(0).max(150),
    score: z.number().min(0).max(1),
    email: z.string().email(),
    site: z.string().url(),
    tag: z.union([z.string().max(5), z.number().int()]),
    kind: z.enum(['admin', 'user']),
  }),
  tree: Tree,
  list: z.object({ items: z.array(z.object({ n: z.number().int().min(-3).max(3) })).min(1).max(3) }),
};

(async () => {
  const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'unused', maxRetries: 0 });
  const ajv = new Ajv2020({ strict: false });
  addFormats(ajv);
  const messages = [{ role: 'user', content: 'Answer in JSON.' }];
  for (const [name, schema] of Object.entries(schemas)) {
    const json = z.toJSONSchema(schema);
    const validate = ajv.compile(json);
    for (let seed = 0; seed < 3; seed++) {
      const rf = await client.chat.completions.create({
        model: process.env.MODEL, messages, max_tokens: 300, seed,
        response_format: { type: 'json_schema', json_schema: { name, schema: json, strict: true } },
      });
      const tool = await client.chat.completions.create({
        model: process.env.MODEL, messages, max_tokens: 300, seed,
        tools: [{ type: 'function', function: { name: 'emit_' + name, parameters: json } }],
        tool_choice: { type: 'function', function: { name: 'emit_' + name } },
      });
      const calls = tool.choices[0].message.tool_calls || [];
      for (const [via, text, finish] of [
        ['response_format', rf.choices[0].message.content, rf.choices[0].finish_reason],
        ['tool', calls.length === 1 ? calls[0].function.arguments : null, tool.choices[0].finish_reason],
      ]) {
        let doc = null, parseError = null;
        try { doc = JSON.parse(text); } catch (e) { parseError = String(e); }
        const ajvOK = parseError === null && validate(doc);
        const zodOK = parseError === null && schema.safeParse(doc).success;
        console.log(JSON.stringify({ name, via, seed, finish, text, parseError, ajvOK,
          ajvErrors: ajvOK ? null : validate.errors, zodOK, schema: json }));
      }
    }
  }
})().catch(e => { console.error(e); process.exit(1); });
`

// TestZodSchemasWithNpmClients: schemas written with zod (.int(),
// .min(), .email(), .url(), unions, a recursive z.lazy tree) and converted
// as clients convert them are enforced on the random-weight model, as
// response_format and as a forced tool, through the npm openai client
// over loopback; ajv and zod accept every answer.
func TestZodSchemasWithNpmClients(t *testing.T) {
	if testing.Short() {
		t.Skip("installs npm packages and decodes 18 answers: not in -short")
	}
	modules := npm.Install(t, "structured", "openai@5", "zod@^3.25", "ajv@8", "ajv-formats@3")
	env, _ := newCPUEnv(t)
	out := npm.Run(t, modules, zodClientScript, "BASE_URL="+env.ts.URL+"/v1", "MODEL="+testModel)
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

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

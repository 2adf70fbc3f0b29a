// Anthropic's SDK on /v1/messages: text, a forced tool_use and its
// tool_result sent back, messages.stream with a forced tool, and an error.
// The follow-up's cache_read_input_tokens is a prefix-cache hit only on a
// pod started with --enable-prompt-tokens-details (node_clients_test.go
// enables it); 0 on others.
import Anthropic from '@anthropic-ai/sdk';

const model = process.env.MODEL;
const client = new Anthropic({ baseURL: process.env.ANTHROPIC_BASE_URL, apiKey: 'unused', maxRetries: 0,
  defaultHeaders: { 'X-Program-Id': 'node-anthropic' } });
const tools = [{ name: 'get_weather', description: 'Weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Berlin'] } }, required: ['city'] } }];

const text = await client.messages.create({ model, max_tokens: 8, temperature: 0, system: 'Be brief.',
  messages: [{ role: 'user', content: 'Hello' }], metadata: { user_id: 'u1' } });

const ask = { role: 'user', content: 'Weather in Paris?' };
const call = await client.messages.create({ model, max_tokens: 200, temperature: 0, tools, messages: [ask],
  tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } });
const use = call.content.find((b) => b.type === 'tool_use');
const follow = await client.messages.create({ model, max_tokens: 8, temperature: 0, tools, messages: [ask,
  { role: 'assistant', content: call.content },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: JSON.stringify({ temp: 21 }) }] }] });

const stream = client.messages.stream({ model, max_tokens: 200, tools, messages: [ask],
  tool_choice: { type: 'any', disable_parallel_tool_use: true } });
const events = [];
let json = '';
stream.on('streamEvent', (ev) => { if (events[events.length - 1] !== ev.type) events.push(ev.type); });
stream.on('inputJson', (delta) => { json += delta; });
const final = await stream.finalMessage();

let error;
try {
  await client.messages.create({ model, messages: [ask] });
} catch (e) {
  error = { status: e.status, type: e.error?.error?.type };
}

console.log(JSON.stringify({
  text: { type: text.type, role: text.role, stop: text.stop_reason, output: text.usage.output_tokens, blocks: text.content.map((b) => b.type) },
  call: { stop: call.stop_reason, name: use.name, city: use.input.city },
  follow: { stop: follow.stop_reason, input: follow.usage.input_tokens + follow.usage.cache_read_input_tokens, cached: follow.usage.cache_read_input_tokens },
  stream: { events, stop: final.stop_reason, block: final.content[0].type, city: final.content[0].input.city, json: JSON.parse(json).city },
  error,
}));

// OpenAI's `openai` client on /v1/responses: text, a forced function call
// and its output sent back with previous_response_id, and a streamed
// forced call. Prints what it saw as JSON on its last line. The follow-up's
// cached_tokens is a prefix-cache hit only on a pod started with
// --enable-prompt-tokens-details (node_clients_test.go enables it); 0 on
// others.
import OpenAI from 'openai';

const model = process.env.MODEL;
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'unused', maxRetries: 0,
  defaultHeaders: { 'X-Program-Id': 'node-openai' } });
const tools = [{
  type: 'function', name: 'get_weather', description: 'Weather of a city', strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Berlin'] } }, required: ['city'], additionalProperties: false },
}];

const text = await client.responses.create({ model, temperature: 0, instructions: 'Be brief.', input: 'Hello', max_output_tokens: 8 });

const call = await client.responses.create({ model, input: 'Weather in Paris?', tools, tool_choice: 'required',
  parallel_tool_calls: false, max_output_tokens: 200 });
const fc = call.output.find((o) => o.type === 'function_call');
const follow = await client.responses.create({ model, temperature: 0, previous_response_id: call.id, tools, max_output_tokens: 8,
  input: [{ type: 'function_call_output', call_id: fc.call_id, output: JSON.stringify({ temp: 21 }) }] });

const stream = await client.responses.create({ model, input: 'Weather?', tools, stream: true, parallel_tool_calls: false,
  tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 200 });
const types = [];
let args = '';
let seq = 0;
let seqOK = true;
let done;
for await (const ev of stream) {
  if (ev.sequence_number !== seq++) seqOK = false;
  if (types[types.length - 1] !== ev.type || !ev.type.endsWith('.delta')) types.push(ev.type);
  if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
  if (ev.type === 'response.completed') done = ev.response;
}
console.log(JSON.stringify({
  text: { object: text.object, status: text.status, outputText: typeof text.output_text, inputTokens: text.usage.input_tokens, outputTokens: text.usage.output_tokens },
  call: { status: call.status, name: fc.name, args: JSON.parse(fc.arguments) },
  follow: { status: follow.status, previous: follow.previous_response_id === call.id, inputTokens: follow.usage.input_tokens,
    firstInputTokens: call.usage.input_tokens, cached: follow.usage.input_tokens_details.cached_tokens },
  stream: { types, seqOK, args: JSON.parse(args), final: done.output[0].arguments === args },
}));

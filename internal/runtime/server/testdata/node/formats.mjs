// The official `openai` and `@anthropic-ai/sdk` clients read forced tool
// calls, and a thinking model's reasoning, from pods whose models carry
// real chat templates of different output formats (node_clients_test.go's
// TestNodeClientsPerFormat starts one pod a format). PODS is a JSON list
// of {label, url, reasoning}. For each pod: a forced call through chat
// completions, Responses and Messages, each whole and streamed (the SDKs'
// stream helpers assemble the deltas); for a reasoning pod also a plain
// answer, whose text must come back as reasoning. Prints what it saw as
// JSON on its last line.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const model = process.env.MODEL;
const params = { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Berlin'] } }, required: ['city'] };
const ask = [{ role: 'user', content: 'Weather in Paris?' }];
const out = {};

for (const pod of JSON.parse(process.env.PODS)) {
  const oai = new OpenAI({ baseURL: pod.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  const ant = new Anthropic({ baseURL: pod.url, apiKey: 'unused', maxRetries: 0 });
  const r = {};
  const chatReq = { model, messages: ask, max_tokens: 200, parallel_tool_calls: false,
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: params } }],
    tool_choice: { type: 'function', function: { name: 'get_weather' } } };
  const chatCall = (m) => {
    const c = m.tool_calls?.[0];
    return { n: m.tool_calls?.length ?? 0, name: c?.function.name, args: c?.function.arguments, id: c?.id, content: m.content ?? '' };
  };
  r.chat = chatCall((await oai.chat.completions.create(chatReq)).choices[0].message);
  r.chatStream = chatCall((await oai.chat.completions.stream(chatReq).finalChatCompletion()).choices[0].message);

  const respReq = { model, input: 'Weather in Paris?', max_output_tokens: 200, parallel_tool_calls: false,
    tools: [{ type: 'function', name: 'get_weather', description: 'Weather of a city', parameters: params, strict: false }],
    tool_choice: { type: 'function', name: 'get_weather' } };
  const respCall = (resp) => {
    const fc = resp.output.filter((o) => o.type === 'function_call');
    return { n: fc.length, name: fc[0]?.name, args: fc[0]?.arguments, id: fc[0]?.call_id, status: resp.status };
  };
  r.responses = respCall(await oai.responses.create(respReq));
  r.responsesStream = respCall(await oai.responses.stream(respReq).finalResponse());

  const msgReq = { model, max_tokens: 200, messages: ask,
    tools: [{ name: 'get_weather', description: 'Weather of a city', input_schema: params }],
    tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } };
  const msgCall = (m) => {
    const uses = m.content.filter((b) => b.type === 'tool_use');
    return { n: uses.length, name: uses[0]?.name, args: JSON.stringify(uses[0]?.input), id: uses[0]?.id, stop: m.stop_reason };
  };
  r.messages = msgCall(await ant.messages.create(msgReq));
  r.messagesStream = msgCall(await ant.messages.stream(msgReq).finalMessage());

  if (pod.reasoning) {
    const plain = { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 12 };
    const m = (await oai.chat.completions.create(plain)).choices[0].message;
    let streamed = '';
    let streamedContent = '';
    for await (const chunk of await oai.chat.completions.create({ ...plain, stream: true })) {
      streamed += chunk.choices[0]?.delta?.reasoning_content ?? '';
      streamedContent += chunk.choices[0]?.delta?.content ?? '';
    }
    const resp = await oai.responses.create({ model, input: 'hi', max_output_tokens: 12 });
    const respStream = await oai.responses.stream({ model, input: 'hi', max_output_tokens: 12 }).finalResponse();
    const msg = await ant.messages.create({ model, max_tokens: 12, messages: [{ role: 'user', content: 'hi' }] });
    const msgStream = await ant.messages.stream({ model, max_tokens: 12, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
    const item = (resp) => ({ type: resp.output[0]?.type, text: resp.output[0]?.content?.[0]?.text ?? resp.output[0]?.summary?.[0]?.text ?? '' });
    r.reasoning = {
      chat: { reasoning: m.reasoning_content ?? '', content: m.content ?? '' },
      chatStream: { reasoning: streamed, content: streamedContent },
      responses: item(resp), responsesStream: item(respStream),
      messages: { type: msg.content[0]?.type, text: msg.content[0]?.thinking ?? '' },
      messagesStream: { type: msgStream.content[0]?.type, text: msgStream.content[0]?.thinking ?? '' },
    };
  }
  out[pod.label] = r;
}
console.log(JSON.stringify(out));

// The Vercel AI SDK's default OpenAI provider (`openai(model)` from
// @ai-sdk/openai, which speaks the Responses API) with generateText and
// streamText: a forced tool call, the SDK running the tool, and a second
// step that sends the call back (as an item_reference: the SDK stores
// responses by default) with the tool's result.
import { openai } from '@ai-sdk/openai';
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { z } from 'zod';

const model = openai(process.env.MODEL);
let executed = 0;
const tools = {
  get_weather: tool({
    description: 'Weather of a city',
    inputSchema: z.object({ city: z.enum(['Paris', 'Berlin']) }),
    execute: async ({ city }) => { executed++; return { city, temp: 21 }; },
  }),
};
// The first step must call the tool; the second may (the random model
// writes noise, not a call).
const prepareStep = ({ stepNumber }) => (stepNumber === 0 ? {} : { toolChoice: 'auto' });
const common = { model, tools, stopWhen: stepCountIs(2), prepareStep, maxOutputTokens: 200,
  providerOptions: { openai: { parallelToolCalls: false } }, headers: { 'X-Program-Id': 'node-ai-sdk' } };

const gen = await generateText({ ...common, prompt: 'Weather in Paris?', toolChoice: 'required' });
const step = (s) => ({ finish: s.finishReason, calls: s.toolCalls.map((c) => [c.toolName, c.input.city]),
  results: s.toolResults.map((r) => r.output.temp), text: typeof s.text, inputTokens: s.usage.inputTokens });

const st = streamText({ ...common, prompt: 'Weather in Berlin?', toolChoice: { type: 'tool', toolName: 'get_weather' } });
const parts = [];
for await (const p of st.fullStream) {
  if (parts[parts.length - 1] !== p.type) parts.push(p.type);
}
const steps = await st.steps;

console.log(JSON.stringify({
  generate: gen.steps.map(step), stream: { parts, steps: steps.map(step) }, executed,
}));

// One agent turn with the OpenAI Agents SDK's defaults. The endpoint comes
// from OPENAI_BASE_URL / OPENAI_API_KEY; API=chat_completions switches the
// SDK's default model from the Responses model to the Chat Completions model.
import { Agent, run, tool, setOpenAIAPI } from '@openai/agents';
import { z } from 'zod';

if (process.env.API === 'chat_completions') setOpenAIAPI('chat_completions');

const getWeather = tool({
  name: 'get_weather',
  description: 'Get the weather for a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `It is sunny in ${city}.`,
});

const agent = new Agent({
  name: 'Assistant',
  instructions: 'You are a helpful assistant.',
  model: process.env.MODEL,
  tools: [getWeather],
});

const stream = process.env.STREAM === '1';
const result = await run(agent, 'say hi', { stream }).catch((e) => ({ error: e }));
if (result.error) {
  console.log('error:', String(result.error));
} else if (stream) {
  for await (const _ of result) { /* drain */ }
  await result.completed;
  console.log('final:', JSON.stringify(result.finalOutput));
} else {
  console.log('final:', JSON.stringify(result.finalOutput));
}

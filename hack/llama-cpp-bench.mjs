// llama.cpp's side of `make bench-executors`: node-llama-cpp (the release
// bundle hack/setup-ggml.sh takes the ggml libraries from, installed by
// hack/setup-llama-cpp.sh) loads a GGUF once and answers timing requests,
// one JSON object a line on stdin, one a line on stdout, so that the Go
// benchmark can interleave them with the ggml executor's runs.
//
//   node hack/llama-cpp-bench.mjs <node-llama-cpp dir> <model.gguf> <threads> <kv type: F16|Q8_0|F32>
//
// Requests:
//   {"op": "single", "prompt": [ids…], "decode": 16}
//     → {"prefill_ms", "prefill_tokens", "decode_ms", "decode_steps",
//        "tokens": [greedy ids…]}: the prompt in one batch on a fresh
//     sequence, then greedy decode steps
//   {"op": "streams", "prompts": [[ids…]…], "gen": 32}
//     → {"ms": …, "tokens": n}: the prompts as concurrent sequences, each
//     generating gen greedy tokens; node-llama-cpp batches their steps
import {loadModel, serve} from "./llama-cpp-driver.mjs";

const [dir, modelPath, threadsArg, kvType] = process.argv.slice(2);
const threads = Number(threadsArg);

const maxSeqs = 32;
const model = await loadModel(dir, modelPath);
const ctx = await model.createContext({
    // Per sequence (node-llama-cpp multiplies it by the sequences): room
    // for a 512-token prompt and its decode steps.
    contextSize: 640,
    sequences: maxSeqs,
    batchSize: 512,
    threads: {ideal: threads, min: threads},
    flashAttention: true,
    experimentalKvCacheKeyType: kvType,
    experimentalKvCacheValueType: kvType,
});
const seqs = Array.from({length: maxSeqs}, () => ctx.getSequence());
const greedy = {temperature: 0};

async function single(prompt, decode) {
    const s = seqs[0];
    await s.clearHistory();
    // node-llama-cpp samples only from a token it evaluates in a generating
    // call: the prompt but its last token is the prefill batch; the last
    // token and each greedy token fed back are the decode steps (one
    // evaluation each), decode + 1 of them.
    let t = performance.now();
    await s.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
    const prefill = performance.now() - t;
    const tokens = [];
    t = performance.now();
    for await (const tok of s.evaluate(prompt.slice(-1), greedy)) {
        tokens.push(tok);
        if (tokens.length > decode) break;
    }
    return {prefill_ms: prefill, prefill_tokens: prompt.length - 1, decode_ms: performance.now() - t, decode_steps: tokens.length, tokens};
}

async function streams(prompts, gen) {
    const used = seqs.slice(0, prompts.length);
    await Promise.all(used.map(s => s.clearHistory()));
    const t = performance.now();
    const counts = await Promise.all(used.map(async (s, i) => {
        let n = 0;
        for await (const _ of s.evaluate(prompts[i], greedy)) {
            if (++n >= gen) break;
        }
        return n;
    }));
    return {ms: performance.now() - t, tokens: counts.reduce((a, b) => a + b, 0)};
}

await serve({threads, kv: kvType}, req =>
    req.op === "single" ? single(req.prompt, req.decode) : streams(req.prompts, req.gen));
await ctx.dispose();
await model.dispose();

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
import {createRequire} from "node:module";
import {pathToFileURL} from "node:url";
import readline from "node:readline";

const [dir, modelPath, threadsArg, kvType] = process.argv.slice(2);
const threads = Number(threadsArg);
const require = createRequire(dir + "/package.json");
const {getLlama} = await import(pathToFileURL(require.resolve("node-llama-cpp")).href);

const maxSeqs = 32;
// The process's thread count is exactly `threads` (maxThreads 0: no pool
// above the context's own).
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: 0});
const model = await llama.loadModel({modelPath});
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

console.log(JSON.stringify({ready: true, threads, kv: kvType}));
const rl = readline.createInterface({input: process.stdin});
for await (const line of rl) {
    const req = JSON.parse(line);
    let res;
    try {
        res = req.op === "single" ? await single(req.prompt, req.decode) : await streams(req.prompts, req.gen);
    } catch (err) {
        res = {error: String(err)};
    }
    console.log(JSON.stringify(res));
}
await ctx.dispose();
await model.dispose();

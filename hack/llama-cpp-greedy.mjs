// llama.cpp's side of TestGreedyParityWithLlamaCpp
// (internal/runtime/executor/ggml/llamacpp_parity_test.go): node-llama-cpp
// (installed by hack/setup-llama-cpp.sh) loads a GGUF once and answers
// greedy-decoding requests, one JSON object a line on stdin, one a line on
// stdout.
//
//   node hack/llama-cpp-greedy.mjs <node-llama-cpp dir> <model.gguf> <threads> <kv type: F16|Q8_0|F32>
//
// Request:
//   {"op": "greedy", "prompt": [ids…], "steps": 64}
//     → {"tokens": [ids…], "logits": [[one per vocabulary token]…]}: the
//     prompt's token ids (no BOS added) in one batch on a fresh sequence,
//     then steps greedy tokens, each the argmax (the lowest id among equal
//     maxima) of the model's raw logits, fed back one at a time; logits[i]
//     are the logits tokens[i] was chosen from.
//
// The logits are llama.cpp's own: controlledEvaluate returns them through
// its sampler chain, which without options is the greedy sampler alone and
// leaves them unchanged (no temperature, penalties or bias).
import {loadModel, serve} from "./llama-cpp-driver.mjs";

const [dir, modelPath, threadsArg, kvType] = process.argv.slice(2);
const threads = Number(threadsArg);

const model = await loadModel(dir, modelPath);
// One sequence: its KV cells are the whole cache, as the executor's blocks
// are the sequence's alone. Flash attention, as the ggml executor on CPU.
const ctx = await model.createContext({
    contextSize: 1024,
    sequences: 1,
    batchSize: 1024,
    threads: {ideal: threads, min: threads},
    flashAttention: true,
    experimentalKvCacheKeyType: kvType,
    experimentalKvCacheValueType: kvType,
});
const seq = ctx.getSequence();
// The logits come as a map over the whole vocabulary, sorted by value.
function dense(logits) {
    const v = new Array(logits.size);
    for (const [tok, l] of logits) v[tok] = l;
    if (v.includes(undefined)) throw new Error("the logits do not cover the vocabulary");
    return v;
}

function argmax(v) {
    let best = 0;
    for (let i = 1; i < v.length; i++) {
        if (v[i] > v[best]) best = i;
    }
    return best;
}

async function greedy(prompt, steps) {
    await seq.clearHistory();
    const last = t => [t, {generateNext: {logits: true}}];
    let input = [...prompt.slice(0, -1), last(prompt[prompt.length - 1])];
    const tokens = [], logits = [];
    while (tokens.length < steps) {
        const out = await seq.controlledEvaluate(input);
        const l = out[input.length - 1]?.next?.logits;
        if (l == null) throw new Error(`no logits after ${tokens.length} tokens`);
        const v = dense(l);
        const tok = argmax(v);
        tokens.push(tok);
        logits.push(v);
        input = [last(tok)];
    }
    return {tokens, logits};
}

await serve({threads, kv: kvType}, req => {
    if (req.op !== "greedy") throw new Error(`unknown op ${JSON.stringify(req.op)}`);
    return greedy(req.prompt, req.steps);
});
await ctx.dispose();
await model.dispose();

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
//     → {"prefill_ms", "prefill_cpu_ms", "prefill_tokens", "decode_ms",
//        "decode_cpu_ms", "decode_steps", "tokens": [greedy ids…]}: the
//     prompt in one batch on a fresh sequence, then greedy decode steps
//     (wall and process CPU time of each phase)
//   {"op": "streams", "prompts": [[ids…]…], "gen": 32}
//     → {"ms", "cpu_ms", "tokens": n, "batches": [tokens of each decode…],
//        "decode_ms": the time in llama_decode}: the
//     prompts as concurrent sequences, each generating gen greedy tokens,
//     in lockstep as llama-server drives its slots: one decode holds every
//     prompt, then each decode holds the next token of every sequence
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
    let m = meter();
    await s.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
    const prefill = m();
    const tokens = [];
    m = meter();
    for await (const tok of s.evaluate(prompt.slice(-1), greedy)) {
        tokens.push(tok);
        if (tokens.length > decode) break;
    }
    const dec = m();
    return {prefill_ms: prefill.ms, prefill_cpu_ms: prefill.cpu_ms, prefill_tokens: prompt.length - 1,
        decode_ms: dec.ms, decode_cpu_ms: dec.cpu_ms, decode_steps: tokens.length, tokens};
}

// meter starts timing a span; calling what it returns ends it: {ms, cpu_ms},
// its wall time and the CPU time of the whole process (every thread's,
// llama.cpp's compute threads included, user and system).
function meter() {
    const t = performance.now(), c = process.cpuUsage();
    return () => {
        const d = process.cpuUsage(c);
        return {ms: performance.now() - t, cpu_ms: (d.user + d.system) / 1e3};
    };
}

// batches records the tokens of each decode the context dispatches while
// it is not null: what shows that a lockstep step went in as one batch.
// (The native context's methods are read-only: a proxy in its place
// sees each batch begin.)
let batches = null;
let decodeMs = 0;
const native = ctx._ctx;
ctx._ctx = new Proxy(native, {
    get(target, prop) {
        const v = Reflect.get(target, prop);
        if (typeof v !== "function")
            return v;
        if (prop === "initBatch")
            return size => {
                batches?.push(size);
                return v.call(target, size);
            };
        if (prop === "decodeBatch")
            return async () => {
                const t = performance.now();
                try {
                    return await v.call(target);
                } finally {
                    decodeMs += performance.now() - t;
                }
            };
        return v.bind(target);
    },
});

// streams runs each prompt on a sequence of its own, in lockstep: every
// sequence's evaluation is queued in the same tick and all are awaited
// before the next step, so the context's dispatch (at once when every
// sequence has queued, else on the next cycle) puts them in one decode:
// the prompts first, then a token of every sequence a step, as
// llama-server's loop batches its slots. Iterating each sequence's
// evaluate() on its own instead queues a sequence's next token when its
// own sampling returns, and the sequences drift apart into smaller
// decodes. Each sequence keeps one greedy sampler, as a slot does, and
// goes on past an end-of-generation token, as with ignore_eos.
async function streams(prompts, gen) {
    const used = seqs.slice(0, prompts.length);
    await Promise.all(used.map(s => s.clearHistory()));
    batches = [];
    decodeMs = 0;
    const m = meter();
    const its = used.map((s, i) => s.evaluate(prompts[i], {...greedy, yieldEogToken: true}));
    let n = 0;
    for (let k = 0; k < gen; k++) {
        const res = await Promise.all(its.map(it => it.next()));
        n += res.filter(r => !r.done).length;
    }
    const span = m();
    await Promise.all(its.map(it => it.return()));
    const res = {...span, tokens: n, batches, decode_ms: decodeMs};
    batches = null;
    return res;
}

await serve({threads, kv: kvType}, req =>
    req.op === "single" ? single(req.prompt, req.decode) : streams(req.prompts, req.gen));
await ctx.dispose();
await model.dispose();

// What the llama.cpp drivers (llama-cpp-bench.mjs, llama-cpp-greedy.mjs)
// share: node-llama-cpp loaded from the directory hack/setup-llama-cpp.sh
// prints, on the CPU with no thread pool above the context's own, and the
// JSON-lines loop they answer requests on (one object a line on stdin, one
// a line on stdout, after a first {"ready": true, …} line).
import {createRequire} from "node:module";
import {pathToFileURL} from "node:url";
import readline from "node:readline";

// loadModel loads the GGUF at modelPath with the node-llama-cpp in dir.
export async function loadModel(dir, modelPath) {
    const require = createRequire(dir + "/package.json");
    const {getLlama} = await import(pathToFileURL(require.resolve("node-llama-cpp")).href);
    // maxThreads 0: the process's thread count is exactly the context's.
    const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: 0});
    return llama.loadModel({modelPath});
}

// serve answers each request line with handle(request)'s result, or
// {"error"} when it throws, until stdin ends; ready is the first line.
export async function serve(ready, handle) {
    console.log(JSON.stringify({ready: true, ...ready}));
    const rl = readline.createInterface({input: process.stdin});
    for await (const line of rl) {
        let res;
        try {
            res = await handle(JSON.parse(line));
        } catch (err) {
            res = {error: String(err)};
        }
        console.log(JSON.stringify(res));
    }
}

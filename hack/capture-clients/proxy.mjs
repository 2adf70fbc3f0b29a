// Capturing proxy for testdata/clients: writes each request as
// OUTDIR/NNN.json ({method, url, headers, body}) and the upstream's status
// and first 4 KB of answer as OUTDIR/NNN.resp, and forwards the request.
//
// The forwarded copy has max_tokens, max_completion_tokens and
// max_output_tokens lowered to 16 (the capture keeps the client's values):
// a random-weight model rarely stops on its own, and a client waits for its
// turn to end before it sends its side requests (memory, titles). An
// answer the client gives up on is cancelled upstream.
//
// Usage: node proxy.mjs LISTEN_PORT UPSTREAM_URL OUTDIR
import http from 'node:http';
import fs from 'node:fs';

const [, , listen, upstream, dir] = process.argv;
const up = new URL(upstream);
const outputCaps = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'];
let n = 0;
fs.mkdirSync(dir, { recursive: true });

http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const i = String(n++).padStart(3, '0');
    let parsed;
    try { parsed = JSON.parse(body.toString()); } catch { parsed = body.length ? body.toString() : null; }
    fs.writeFileSync(`${dir}/${i}.json`, JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: parsed }, null, 1));

    const headers = { ...req.headers };
    delete headers.host;
    let forward = body;
    if (parsed && typeof parsed === 'object') {
      const lowered = structuredClone(parsed);
      for (const k of outputCaps) if (typeof lowered[k] === 'number') lowered[k] = Math.min(lowered[k], 16);
      forward = Buffer.from(JSON.stringify(lowered));
      headers['content-length'] = String(forward.length);
    }
    const p = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      const out = [];
      r.on('data', (c) => { out.push(c); res.write(c); });
      r.on('end', () => {
        fs.writeFileSync(`${dir}/${i}.resp`, `${r.statusCode}\n` + Buffer.concat(out).toString().slice(0, 4000));
        res.end();
      });
    });
    p.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
    res.on('close', () => { if (!res.writableFinished) p.destroy(); });
    p.end(forward);
  });
}).listen(Number(listen), '127.0.0.1');

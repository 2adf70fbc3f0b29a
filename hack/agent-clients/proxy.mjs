// A test proxy between a real agent client and a kvpilot pod serving a
// random-weight model (hack/agent-clients/run.sh, capture.sh). The model's text is noise
// and it rarely ends a turn by itself, so the proxy caps each request's
// output tokens (MAX_TOKENS); with FORCE_TOOL it sets tool_choice to that
// tool on the first request that offers it, so the client receives a call
// and has to dispatch it. Every request and the status of its answer are
// logged as JSON lines to LOG; with CAPTURE_DIR each request is also kept
// whole (NNN.json: method, url, headers, body), as the client sent it.
// END_EARLY=0 forwards the client's own stop strings.
//
// Usage: LISTEN=port UPSTREAM=http://127.0.0.1:8000 [LOG=file] [MAX_TOKENS=16]
//        [FORCE_TOOL=name] [CAPTURE_DIR=dir] [END_EARLY=0] node proxy.mjs
import http from 'node:http';
import fs from 'node:fs';

const env = process.env;
const upstream = new URL(env.UPSTREAM);
const maxTokens = Number(env.MAX_TOKENS || 16);
const forceTool = env.FORCE_TOOL || '';
let forced = false;
let n = 0;
if (env.CAPTURE_DIR) fs.mkdirSync(env.CAPTURE_DIR, {recursive: true});

function log(entry) {
  if (env.LOG) fs.appendFileSync(env.LOG, JSON.stringify(entry) + '\n');
}

// toolNames are the names a request offers, per API (Responses namespace
// tools by their inner names).
function toolNames(body) {
  const names = [];
  for (const t of body.tools || []) {
    if (t.function?.name) names.push(t.function.name);
    else if (t.type === 'namespace') for (const u of t.tools || []) names.push(u.name);
    else if (t.name) names.push(t.name);
  }
  return names;
}

// endings are stop strings that end a random model's noise within a few
// tokens (any printable ASCII character: about one byte-token in three),
// so its answer ends as a turn, not at the output cap, which clients read
// as a truncated answer (Claude Code retries it with a larger cap).
const endings = Array.from({length: 94}, (_, k) => String.fromCharCode(33 + k));

// rewrite caps the output, ends unforced answers early and forces the
// tool; it returns what it did.
function rewrite(path, body) {
  const did = {};
  for (const key of ['max_tokens', 'max_output_tokens', 'max_completion_tokens']) {
    if (key in body || (key === 'max_output_tokens' && path.startsWith('/v1/responses'))) {
      if (!(key in body) || body[key] > maxTokens) { body[key] = maxTokens; did.capped = key; }
    }
  }
  if (path.startsWith('/v1/chat/completions') && !('max_tokens' in body) && !('max_completion_tokens' in body)) {
    body.max_tokens = maxTokens; did.capped = 'max_tokens';
  }
  if (forceTool && !forced && toolNames(body).includes(forceTool)) {
    forced = true;
    did.forced = forceTool;
    if (path.startsWith('/v1/messages')) {
      body.tool_choice = {type: 'tool', name: forceTool};
      delete body.thinking; // Anthropic refuses forced tool use with thinking on
    } else if (path.startsWith('/v1/responses')) {
      const ns = (body.tools || []).find(t => t.type === 'namespace' && (t.tools || []).some(u => u.name === forceTool));
      body.tool_choice = ns ? {type: 'function', namespace: ns.name, name: forceTool} : {type: 'function', name: forceTool};
    } else {
      body.tool_choice = {type: 'function', function: {name: forceTool}};
    }
  }
  if (!did.forced && env.END_EARLY !== '0') {
    if (path.startsWith('/v1/messages') && !path.includes('count_tokens')) { body.stop_sequences = endings; did.ended = true; }
    else if (path.startsWith('/v1/chat/completions') || path.startsWith('/v1/responses')) { body.stop = endings; did.ended = true; }
  }
  return did;
}

// answered lists the tool results a request carries (call ids), so the
// script can check a forced call was dispatched and its result came back.
function answered(body) {
  const ids = [];
  for (const m of body.messages || []) {
    if (Array.isArray(m.content)) for (const b of m.content) if (b.type === 'tool_result') ids.push(b.tool_use_id);
    if (m.role === 'tool') ids.push(m.tool_call_id);
  }
  for (const it of Array.isArray(body.input) ? body.input : []) {
    if (it.type === 'function_call_output') ids.push(it.call_id);
  }
  return ids;
}

http.createServer((req, res) => {
  const chunks = [];
  req.on('data', c => chunks.push(c));
  req.on('end', () => {
    const i = String(n++).padStart(3, '0');
    let raw = Buffer.concat(chunks);
    const entry = {i, method: req.method, url: req.url};
    let body = null;
    try { body = raw.length ? JSON.parse(raw.toString()) : null; } catch { /* not JSON: passed on as is */ }
    if (env.CAPTURE_DIR) {
      fs.writeFileSync(`${env.CAPTURE_DIR}/${i}.json`, JSON.stringify({method: req.method, url: req.url, headers: req.headers, body: body ?? raw.toString()}, null, 1));
    }
    if (body && typeof body === 'object' && req.method === 'POST') {
      Object.assign(entry, rewrite(req.url, body), {results: answered(body)});
      raw = Buffer.from(JSON.stringify(body));
    }
    const headers = {...req.headers, 'content-length': String(raw.length)};
    delete headers.host;
    const up = http.request({host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers}, r => {
      res.writeHead(r.statusCode, r.headers);
      const out = [];
      r.on('data', c => { out.push(c); res.write(c); });
      r.on('end', () => {
        const text = Buffer.concat(out).toString();
        entry.status = r.statusCode;
        if (r.statusCode >= 400) entry.error = text.slice(0, 500);
        // The calls the pod returned (streamed or whole), by id.
        entry.calls = [...text.matchAll(/"(?:call_id|id)":"((?:toolu|call|fc)_[^"]+)"/g)].map(m => m[1]);
        log(entry);
        res.end();
      });
    });
    up.on('error', e => { entry.status = 502; entry.error = String(e); log(entry); res.writeHead(502); res.end(String(e)); });
    // A client that gives up on an answer cancels it at the pod too.
    res.on('close', () => { if (!res.writableFinished) up.destroy(); });
    up.end(raw);
  });
}).listen(Number(env.LISTEN), '127.0.0.1');

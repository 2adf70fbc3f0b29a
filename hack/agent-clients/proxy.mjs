// A test proxy between a real agent client and a kvpilot pod serving a
// random-weight model (hack/agent-clients/run.sh, capture.sh). The model's text is noise
// and it rarely ends a turn by itself, so the proxy caps each request's
// output tokens (MAX_TOKENS); with FORCE_TOOL it sets tool_choice to that
// tool on the first request that offers it, so the client receives a call
// and has to dispatch it. Every request and the status of its answer are
// logged as JSON lines to LOG; with CAPTURE_DIR each request is also kept
// whole (NNN.json: method, url, headers, body), as the client sent it.
// END_EARLY=0 leaves the client's output format as it is.
//
// Usage: LISTEN=port|0 [PORT_FILE=file] UPSTREAM=http://127.0.0.1:8000 [LOG=file] [MAX_TOKENS=64]
//        [FORCE_TOOL=name] [FORCED_MAX_TOKENS=512] [CAPTURE_DIR=dir] [END_EARLY=0] node proxy.mjs
import http from 'node:http';
import fs from 'node:fs';

const env = process.env;
const upstream = new URL(env.UPSTREAM);
// The short format's 8 characters are at most 50 byte-tokens (a \uXXXX
// escape each, and the quotes).
const maxTokens = Number(env.MAX_TOKENS || 64);
const forceTool = env.FORCE_TOOL || '';
// A forced call's markup alone is about a hundred byte-tokens.
const forcedMaxTokens = Number(env.FORCED_MAX_TOKENS || 512);
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

// short is the output format that ends a random model's noise as a turn:
// a JSON string of 1 to 8 characters, then the end of the answer, which
// the pod's constrained decoding enforces. Capped at MAX_TOKENS instead,
// the answer would end as truncated, which clients retry (Claude Code
// asks again with a larger cap) or refuse (the Agents SDK); ended by stop
// strings, it could be empty, which Claude Code retries too.
const short = {type: 'string', minLength: 1, maxLength: 8};

// rewrite caps the output, ends unforced answers early (short) and forces
// the tool; it returns what it did.
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
    for (const key of ['max_tokens', 'max_output_tokens', 'max_completion_tokens']) if (key in body) body[key] = forcedMaxTokens;
    shorten(forcedSchema(body, forceTool));
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
  if (!did.forced && env.END_EARLY !== '0' && !path.includes('count_tokens')) {
    if (path.startsWith('/v1/messages')) body.output_config = {...body.output_config, format: {type: 'json_schema', schema: short}};
    else if (path.startsWith('/v1/chat/completions')) body.response_format = {type: 'json_schema', json_schema: {name: 'short', schema: short}};
    else if (path.startsWith('/v1/responses')) body.text = {...body.text, format: {type: 'json_schema', name: 'short', schema: short}};
    did.ended = true;
  }
  return did;
}

// shorten bounds every free string of a forced tool's schema, so the
// random model's noise in its arguments ends within FORCED_MAX_TOKENS (a byte
// model closes a free string once in about 258 tokens): a call cut at
// the cap has arguments no client can parse. The client never sees the
// change; the pod's constrained decoding enforces it.
function shorten(schema) {
  if (!schema || typeof schema !== 'object') return;
  if (schema.type === 'string' && !('maxLength' in schema) && !('enum' in schema) && !('const' in schema) && !('pattern' in schema)) schema.maxLength = 12;
  for (const v of Object.values(schema)) {
    if (Array.isArray(v)) v.forEach(shorten);
    else if (v && typeof v === 'object') shorten(v);
  }
}

// forcedSchema is the parameters schema of the tool named name.
function forcedSchema(body, name) {
  for (const t of body.tools || []) {
    if (t.function?.name === name) return t.function.parameters;
    if (t.type === 'namespace') for (const u of t.tools || []) if (u.name === name) return u.parameters;
    if (t.name === name) return t.input_schema ?? t.parameters;
  }
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
    let logged = false;
    const up = http.request({host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers}, r => {
      res.writeHead(r.statusCode, r.headers);
      const out = [];
      r.on('data', c => { out.push(c); res.write(c); });
      // Logged once, when the answer ends or when either side closes
      // first: a client may hang up as soon as it has read the last event
      // (Codex after response.completed), before the pod ends the stream.
      const finish = () => {
        if (logged) return;
        logged = true;
        const text = Buffer.concat(out).toString();
        entry.status = r.statusCode;
        if (r.statusCode >= 400) entry.error = text.slice(0, 500);
        // The calls the pod returned (streamed or whole), by id.
        entry.calls = [...text.matchAll(/"(?:call_id|id)":"((?:toolu|call|fc)_[^"]+)"/g)].map(m => m[1]);
        // The prompt's tokens and how many the pod read from its prefix
        // cache (with --enable-prompt-tokens-details), from the answer's
        // last usage: a Messages stream's message_start is written before
        // the engine looked the prompt up. Messages count input_tokens
        // without the cached ones.
        const num = re => { const all = [...text.matchAll(re)]; return all.length ? Number(all.at(-1)[1]) : undefined; };
        entry.promptTokens = num(/"(?:prompt_tokens|input_tokens)":(\d+)/g);
        entry.cachedTokens = num(/"(?:cache_read_input_tokens|cached_tokens)":(\d+)/g);
        if (req.url.startsWith('/v1/messages') && entry.promptTokens !== undefined) entry.promptTokens += entry.cachedTokens ?? 0;
        log(entry);
      };
      r.on('end', () => { finish(); res.end(); });
      r.on('close', finish);
      r.on('error', finish);
      res.on('close', finish);
    });
    up.on('error', e => {
      if (logged) return;
      logged = true;
      entry.status = 502; entry.error = String(e); log(entry); res.writeHead(502); res.end(String(e));
    });
    // A client that gives up on an answer cancels it at the pod too.
    res.on('close', () => { if (!res.writableFinished) up.destroy(); });
    up.end(raw);
  });
}).listen(Number(env.LISTEN || 0), '127.0.0.1', function () {
  // LISTEN=0 takes any free port: the script reads it from PORT_FILE.
  if (env.PORT_FILE) fs.writeFileSync(env.PORT_FILE, String(this.address().port));
});

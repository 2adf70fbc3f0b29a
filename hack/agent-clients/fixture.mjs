// Turns one capture of proxy.mjs into a testdata/clients fixture, redacted
// as testdata/clients/README.md says: only the API's headers (no
// credentials), the scratch home and work directories and the npm prefix
// replaced by /home/user paths, ids by fixed fake ones, the API key by
// REDACTED. The body is otherwise kept as the client sent it.
//
// Usage: node fixture.mjs CAPTURE.json CLIENT VERSION OUT.json
// Env:   SCRATCH_HOME (default /tmp/clients-home-CLIENT), WORKDIR (the
//        client's working directory; default SCRATCH_HOME/project), NPM_PREFIX
//        (default /tmp/clients-npm), API_KEY (default sk-kvpilot-test)
import fs from 'node:fs';
import os from 'node:os';

const [, , capture, client, version, out] = process.argv;
const home = process.env.SCRATCH_HOME ?? `/tmp/clients-home-${client}`;
const workdir = process.env.WORKDIR ?? `${home}/project`;
const npmPrefix = process.env.NPM_PREFIX ?? '/tmp/clients-npm';
const apiKey = process.env.API_KEY ?? 'sk-kvpilot-test';
const keep = /^(content-type|anthropic-.*|openai-.*|x-session-id|x-session-affinity|session_id|session-id|x-client-request-id)$/;

const rec = JSON.parse(fs.readFileSync(capture, 'utf8'));
const headers = Object.fromEntries(Object.entries(rec.headers).filter(([k]) => keep.test(k)).sort());
const fixture = { client, version, captured: new Date().toISOString().slice(0, 10), method: rec.method, path: rec.url, headers, body: rec.body };

const ids = new Map();
const fake = (id, make) => { if (!ids.has(id)) ids.set(id, make(ids.size + 1)); return ids.get(id); };
const dashed = (p) => p.replaceAll('/', '-');
let text = JSON.stringify(fixture, null, 1)
  .replaceAll(workdir, '/home/user/project')
  .replaceAll(dashed(workdir), '-home-user-project')
  .replaceAll(home, '/home/user')
  .replaceAll(`${npmPrefix}/node_modules`, '/home/user/.npm-global/lib/node_modules')
  .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g,
    (id) => fake(id, (n) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`))
  .replace(/\b[0-9a-f]{64}\b/g, (id) => fake(id, (n) => String(n).padStart(64, '0')))
  .replace(/\bses_[A-Za-z0-9]{20,}/g, (id) => fake(id, (n) => `ses_${String(n).padStart(id.length - 4, '0')}`))
  .replaceAll(apiKey, 'REDACTED');
for (const leak of [home, workdir, npmPrefix, apiKey, `"authorization"`, `"x-api-key"`, os.userInfo().username === 'root' ? null : os.userInfo().username]) {
  if (leak && text.includes(leak)) throw new Error(`${capture}: ${leak} left in the fixture`);
}
fs.writeFileSync(out, text + '\n');

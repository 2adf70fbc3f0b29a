#!/usr/bin/env bash
# Runs the real Claude Code and Codex, installed from npm at pinned
# versions, headless against a local runtime pod with their defaults: only
# what points a client at a server is set (Claude Code: ANTHROPIC_BASE_URL,
# ANTHROPIC_API_KEY and the model name; Codex: one model provider entry).
# The pod serves a random-weight Qwen2-shaped model carrying the real
# Qwen2.5 chat template, on the ggml executor (CPU), with a 262,144-token
# context and prefix-cache hits reported.
#
# Between each client and the pod runs proxy.mjs: the model's text is noise
# and never ends a turn by itself, so the proxy bounds each answer (a short
# JSON string as the output format, a cap on output tokens) and, in the
# forced runs, sets tool_choice to one of the client's tools on its first
# request. Nothing else of the request is changed.
#
# Checks, each a PASS or FAIL line, then "N passed, M failed":
#   claude-code default   `claude -p` exits 0; every /v1 request got 200
#   claude-code cache     a second session with another prompt reads >= 95%
#                         of its first request from the prefix cache
#   claude-code tool      with Read forced, Claude Code runs the call and
#                         sends its result back; exits 0
#   codex default         `codex exec` exits 0; every request got 200
#   codex tool            with multi_agent_v1's close_agent (a namespaced
#                         tool) forced, Codex runs the call and sends its
#                         output back; exits 0
#
# Without node, npm or the registry it prints why and exits 0 (skipped),
# unless KVPILOT_REQUIRE_AGENT_CLIENTS=1. About a minute on 2 cores, the
# first install included (the clients are ~800 MB from npm, cached in
# ~/.cache/kvpilot/agent-clients).
#
# Usage: hack/agent-clients/run.sh
# Env:   KVPILOT_GGML_LIB (default: hack/setup-ggml.sh cpu), KEEP=1 keeps the
#        work directory (logs, captured requests)
set -euo pipefail

CLAUDE_CODE=@anthropic-ai/claude-code@2.1.332
CODEX=@openai/codex@0.171.0
MODEL=qwen-test

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=${ROOT}/hack/agent-clients
log() { echo "agent-clients: $*" >&2; }

skip() {
	if [ "${KVPILOT_REQUIRE_AGENT_CLIENTS:-0}" = 1 ]; then
		log "required but unavailable: $*"
		exit 1
	fi
	log "skipped: $*"
	exit 0
}

for tool in node npm go; do
	command -v "${tool}" >/dev/null || skip "${tool} is not installed"
done

# The clients, once per version pair.
key=$(printf '%s\n' "${CLAUDE_CODE}" "${CODEX}" | sha256sum | cut -c1-12)
NPM_DIR=${KVPILOT_AGENT_CLIENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/agent-clients}/${key}
if [ ! -f "${NPM_DIR}/.installed" ]; then
	mkdir -p "${NPM_DIR}"
	log "installing ${CLAUDE_CODE} ${CODEX} from the npm registry into ${NPM_DIR}"
	if ! out=$(timeout "${KVPILOT_NPM_TIMEOUT:-600}" npm install --prefix "${NPM_DIR}" --no-audit --no-fund --loglevel=error \
		"${CLAUDE_CODE}" "${CODEX}" 2>&1); then
		echo "${out}" >&2
		skip "npm install failed (is the registry reachable?)"
	fi
	touch "${NPM_DIR}/.installed"
fi
CLAUDE=${NPM_DIR}/node_modules/.bin/claude
CODEX_BIN=${NPM_DIR}/node_modules/.bin/codex

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvpilot-agent-clients.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "${p}" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ "${KEEP:-0}" = 1 ]; then log "kept ${WORK}"; else rm -rf "${WORK}"; fi
}
trap cleanup EXIT

# The pod.
GGML_LIB=${KVPILOT_GGML_LIB:-$("${ROOT}/hack/setup-ggml.sh" cpu)}
(cd "${ROOT}" && go build -o "${WORK}/bin/" ./cmd/runtime ./cmd/kvpilot-model)
"${WORK}/bin/kvpilot-model" write --out "${WORK}/model.gguf" --arch qwen2 --qkv-bias --layers 1 --dim 32 --heads 2 --kv-heads 1 \
	--ffn 64 --context 262144 --chat-template "${ROOT}/internal/runtime/model/testdata/chat_templates/qwen2.5.jinja" >&2
"${WORK}/bin/runtime" --model "${WORK}/model.gguf" --executor ggml --ggml-lib "${GGML_LIB}" --host 127.0.0.1 --port 0 \
	--control-port 0 --served-model-name "${MODEL}" --enable-prompt-tokens-details >"${WORK}/pod.log" 2>&1 &
pids+=($!)
POD=
for _ in $(seq 600); do
	POD=$(sed -n 's/.*msg=ready addr=\([0-9.:]*\).*/\1/p' "${WORK}/pod.log")
	[ -n "${POD}" ] && break
	kill -0 "${pids[0]}" 2>/dev/null || break
	sleep 0.1
done
if [ -z "${POD}" ]; then
	cat "${WORK}/pod.log" >&2
	log "the pod did not start"
	exit 1
fi
log "pod at ${POD}"

# proxy NAME [VAR=value...]: starts a proxy for run NAME; PROXY is its URL.
proxy() {
	local name=$1
	shift
	rm -f "${WORK}/${name}.port"
	env "$@" LISTEN=0 PORT_FILE="${WORK}/${name}.port" UPSTREAM="http://${POD}" LOG="${WORK}/${name}.log" \
		CAPTURE_DIR="${WORK}/${name}" node "${HERE}/proxy.mjs" &
	pids+=($!)
	for _ in $(seq 100); do
		[ -s "${WORK}/${name}.port" ] && break
		sleep 0.1
	done
	PROXY=http://127.0.0.1:$(cat "${WORK}/${name}.port")
	: >"${WORK}/${name}.log"
}

passed=0
failed=0
check() { # name, then a command that succeeds when the check passes
	local name=$1
	shift
	if out=$("$@" 2>&1); then
		echo "PASS ${name}${out:+: ${out}}"
		passed=$((passed + 1))
	else
		echo "FAIL ${name}${out:+: ${out}}"
		failed=$((failed + 1))
	fi
}

# Reads a proxy log (JSON lines) with node: every /v1 request answered 200.
all_ok() {
	node -e '
		const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").filter(Boolean).map(JSON.parse);
		const api = lines.filter(e => e.url.startsWith("/v1/"));
		const bad = api.filter(e => e.status !== 200);
		if (api.length === 0) { console.log("no request reached the pod"); process.exit(1); }
		if (bad.length) { console.log(bad.map(e => `${e.url} ${e.status} ${e.error}`).join("; ")); process.exit(1); }
		console.log(`${api.length} requests, all 200`);' "$1"
}

# The forced call was returned and a later request carried its result.
dispatched() {
	node -e '
		const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").filter(Boolean).map(JSON.parse);
		const forced = lines.find(e => e.forced);
		if (!forced) { console.log("no request offered the tool"); process.exit(1); }
		const id = (forced.calls || []).find(c => c.startsWith("call_"));
		if (!id) { console.log(`no call came back: ${forced.status} ${forced.error || ""}`); process.exit(1); }
		const back = lines.find(e => (e.results || []).includes(id));
		if (!back) { console.log(`${forced.forced} call ${id} was not answered in a later request`); process.exit(1); }
		console.log(`${forced.forced} call ${id} answered in request ${back.i} (${back.status})`);
		if (back.status !== 200) process.exit(1);' "$1"
}

# The first /v1/messages request read >= 95% of its prompt from the cache.
cached() {
	node -e '
		const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").filter(Boolean).map(JSON.parse);
		const first = lines.find(e => e.url.startsWith("/v1/messages") && !e.url.includes("count_tokens") && e.promptTokens);
		if (!first) { console.log("no answered request"); process.exit(1); }
		const share = first.cachedTokens / first.promptTokens;
		console.log(`${first.cachedTokens} of ${first.promptTokens} prompt tokens cached (${(100 * share).toFixed(1)}%)`);
		if (!(share >= 0.95)) process.exit(1);' "$1"
}

# runs NAME CMD...: runs a client command, its output in NAME.out; fails
# with the output's tail when it exits non-zero.
runs() {
	local name=$1
	shift
	local rc=0
	"$@" >"${WORK}/${name}.out" 2>&1 </dev/null || rc=$?
	if [ "${rc}" != 0 ]; then
		echo "exit ${rc}: $(tail -5 "${WORK}/${name}.out" | tr '\n' ' ')"
		return 1
	fi
}

# Claude Code.
mkdir -p "${WORK}/claude-home" "${WORK}/project"
git -C "${WORK}/project" init -q
claude() { # run name, prompt
	(cd "${WORK}/project" && HOME=${WORK}/claude-home ANTHROPIC_BASE_URL=${PROXY} ANTHROPIC_API_KEY=sk-kvpilot-test \
		ANTHROPIC_MODEL=${MODEL} timeout 600 "${CLAUDE}" -p "$2")
}
proxy claude-default
check "claude-code default turn" runs claude-default claude claude-default "say hi"
check "claude-code default requests" all_ok "${WORK}/claude-default.log"
proxy claude-second
check "claude-code second session" runs claude-second claude claude-second "list the files in this directory"
check "claude-code second session cache" cached "${WORK}/claude-second.log"
proxy claude-tool FORCE_TOOL=Read
check "claude-code forced tool call" runs claude-tool claude claude-tool "read the README"
check "claude-code forced call dispatched" dispatched "${WORK}/claude-tool.log"

# Codex: one provider entry, the Responses API (its only wire API).
mkdir -p "${WORK}/codex-home/.codex"
codex() { # run name, prompt
	cat >"${WORK}/codex-home/.codex/config.toml" <<TOML
model = "${MODEL}"
model_provider = "kvpilot"

[model_providers.kvpilot]
name = "kvpilot"
base_url = "${PROXY}/v1"
wire_api = "responses"
TOML
	(cd "${WORK}/project" && HOME=${WORK}/codex-home CODEX_HOME=${WORK}/codex-home/.codex timeout 600 "${CODEX_BIN}" exec "$2")
}
proxy codex-default
check "codex default turn" runs codex-default codex codex-default "say hi"
check "codex default requests" all_ok "${WORK}/codex-default.log"
proxy codex-tool FORCE_TOOL=close_agent
check "codex forced namespaced tool call" runs codex-tool codex codex-tool "close the agent"
check "codex forced call dispatched" dispatched "${WORK}/codex-tool.log"

echo "${passed} passed, ${failed} failed"
[ "${failed}" = 0 ]

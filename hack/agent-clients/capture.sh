#!/usr/bin/env bash
# Captures the default requests of agent clients against a runtime pod, for
# internal/runtime/server/testdata/clients (its README says how a capture
# becomes a fixture). Each client runs one headless turn ("say hi") with
# only the settings needed to reach the pod (base URL, API key, model
# name), HOME set to a scratch directory, through proxy.mjs, which writes
# every request it sends to OUT/<capture>/NNN.json and the pod's status
# for each to OUT/<capture>.log.
#
# Usage: hack/agent-clients/capture.sh POD_URL OUT
#   POD_URL: a pod serving MODEL, e.g. one started with
#     runtime --executor sim --port 18110 --served-model-name qwen-test --default-max-tokens 16
# Env: MODEL (default qwen-test), NPM_PREFIX (default /tmp/clients-npm),
#      PORT (first proxy port, default 18101), API_KEY (default sk-kvpilot-test)
set -euo pipefail

POD=${1:?POD_URL}
OUT=${2:?OUT}
MODEL=${MODEL:-qwen-test}
NPM_PREFIX=${NPM_PREFIX:-/tmp/clients-npm}
PORT=${PORT:-18101}
KEY=${API_KEY:-sk-kvpilot-test}
HERE=$(cd "$(dirname "$0")" && pwd)

PACKAGES=(
	opencode-ai@1.18.33
	@qwen-code/qwen-code@0.24.4
	@mariozechner/pi-coding-agent@0.73.1
	@openai/agents@0.20.0
)
npm install --prefix "${NPM_PREFIX}" --no-audit --no-fund "${PACKAGES[@]}" >&2
BIN=${NPM_PREFIX}/node_modules/.bin

proxy_pid=
start_proxy() { # capture name
	mkdir -p "${OUT}"
	LISTEN=${PORT} UPSTREAM=${POD} CAPTURE_DIR=${OUT}/$1 LOG=${OUT}/$1.log MAX_TOKENS=16 END_EARLY=0 node "${HERE}/proxy.mjs" &
	proxy_pid=$!
	sleep 1
}
stop_proxy() {
	kill "${proxy_pid}"
	wait "${proxy_pid}" 2>/dev/null || true
	PORT=$((PORT + 1))
}
trap '[ -n "${proxy_pid}" ] && kill "${proxy_pid}" 2>/dev/null || true' EXIT

scratch() { # client: a fresh HOME with an empty git project in it
	local home=/tmp/clients-home-$1
	rm -rf "${home}"
	mkdir -p "${home}/project"
	git -C "${home}/project" init -q
	echo "${home}"
}

# opencode: a custom provider through the AI SDK's openai-compatible package.
home=$(scratch opencode)
cat >"${home}/project/opencode.json" <<JSON
{
  "\$schema": "https://opencode.ai/config.json",
  "provider": {
    "kvpilot": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "kvpilot",
      "options": { "baseURL": "http://127.0.0.1:${PORT}/v1", "apiKey": "${KEY}" },
      "models": { "${MODEL}": { "name": "${MODEL}" } }
    }
  },
  "model": "kvpilot/${MODEL}"
}
JSON
start_proxy opencode
(cd "${home}/project" && HOME=${home} timeout 180 "${BIN}/opencode" run "say hi") || echo "opencode: exit $?" >&2
stop_proxy

# qwen-code: its OpenAI auth from the environment.
home=$(scratch qwen-code)
start_proxy qwen-code
(cd "${home}/project" && HOME=${home} OPENAI_API_KEY=${KEY} OPENAI_BASE_URL=http://127.0.0.1:${PORT}/v1 OPENAI_MODEL=${MODEL} \
	timeout 180 "${BIN}/qwen" -p "say hi") || echo "qwen-code: exit $?" >&2
stop_proxy

# pi: a models.json provider, once per API it speaks.
home=$(scratch pi)
mkdir -p "${home}/.pi/agent"
for api in openai-completions openai-responses anthropic-messages; do
	base=http://127.0.0.1:${PORT}/v1
	[ "${api}" = anthropic-messages ] && base=http://127.0.0.1:${PORT}
	cat >"${home}/.pi/agent/models.json" <<JSON
{
  "providers": {
    "kvpilot": {
      "baseUrl": "${base}",
      "api": "${api}",
      "apiKey": "${KEY}",
      "models": [{ "id": "${MODEL}" }]
    }
  }
}
JSON
	start_proxy "pi-${api}"
	(cd "${home}/project" && HOME=${home} timeout 180 "${BIN}/pi" --model "kvpilot/${MODEL}" -p "say hi") || echo "pi ${api}: exit $?" >&2
	stop_proxy
done

# OpenAI Agents SDK: the default client from OPENAI_BASE_URL and
# OPENAI_API_KEY; the Responses model, then the Chat Completions model,
# each run without and with streaming. Tracing would export to
# api.openai.com, not to the pod: it is off.
home=$(scratch openai-agents)
cp "${HERE}/agents-turn.mjs" "${NPM_PREFIX}/agents-turn.mjs"
for api in responses chat_completions; do
	start_proxy "openai-agents-${api}"
	for stream in 0 1; do
		(cd "${home}/project" && HOME=${home} OPENAI_AGENTS_DISABLE_TRACING=1 OPENAI_BASE_URL=http://127.0.0.1:${PORT}/v1 \
			OPENAI_API_KEY=${KEY} MODEL=${MODEL} API=${api} STREAM=${stream} timeout 180 node "${NPM_PREFIX}/agents-turn.mjs") ||
			echo "openai-agents ${api} stream=${stream}: exit $?" >&2
	done
	stop_proxy
done

# What the pod answered each request (status; the error when refused).
for f in "${OUT}"/*.log; do
	echo "== ${f#"${OUT}"/}"
	cat "${f}"
done

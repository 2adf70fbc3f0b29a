#!/usr/bin/env bash
# Installs the Node.js API clients the loopback tests drive against the
# runtime (OpenAI's `openai`, the Vercel AI SDK with its OpenAI provider,
# Anthropic's SDK, zod, ajv and ajv-formats) into a cache outside the work
# tree, once, and prints the directory whose node_modules holds them
# (NODE_PATH is that directory's node_modules).
#
# The versions are pinned: the cache directory is named after the package
# list, so changing a version installs afresh instead of reusing a stale
# cache. An install that did not finish leaves no marker and is redone.
#
# Exit status 3 with a message on stderr when node or npm is missing or the
# registry cannot be reached (tests skip, saying so); other failures exit 1.
#
# Usage: hack/setup-node-clients.sh        (prints the directory)
# Env:   KVPILOT_NODE_CLIENTS_CACHE, KVPILOT_NPM_TIMEOUT (seconds, default 180)
set -euo pipefail

# openai 5 is the newest major that runs on Node.js 20.
PACKAGES=(
	openai@5.23.2
	ai@5.0.277
	@ai-sdk/openai@2.0.131
	@anthropic-ai/sdk@1.14.0
	zod@3.25.76
	ajv@8.20.0
	ajv-formats@3.0.1
)

log() { echo "setup-node-clients: $*" >&2; }

for tool in node npm; do
	if ! command -v "${tool}" >/dev/null; then
		log "${tool} is not installed"
		exit 3
	fi
done

key=$(printf '%s\n' "${PACKAGES[@]}" | sha256sum | cut -c1-12)
DIR="${KVPILOT_NODE_CLIENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/node-clients}/${key}"
if [ -f "${DIR}/.installed" ]; then
	echo "${DIR}"
	exit 0
fi

mkdir -p "${DIR}"
# One install at a time per cache directory (tests in parallel packages).
exec 9>"${DIR}/.lock"
flock 9
if [ ! -f "${DIR}/.installed" ]; then
	log "installing ${PACKAGES[*]} from the npm registry into ${DIR}"
	if ! out=$(cd "${DIR}" && timeout "${KVPILOT_NPM_TIMEOUT:-180}" npm install --prefix "${DIR}" --no-audit --no-fund \
		--loglevel=error --ignore-scripts "${PACKAGES[@]}" 2>&1); then
		log "npm install failed (is the registry reachable?):"
		echo "${out}" >&2
		exit 3
	fi
	touch "${DIR}/.installed"
fi
echo "${DIR}"

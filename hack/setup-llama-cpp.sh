#!/usr/bin/env bash
# Installs llama.cpp as node-llama-cpp ships it (the npm package and its
# prebuilt linux-x64 CPU binaries: the same release bundle, and so the same
# ggml, as hack/setup-ggml.sh's libraries) into a cache outside the work tree
# and prints the directory holding its node_modules. `make test` holds the
# ggml executor's greedy tokens to it (hack/llama-cpp-greedy.mjs) and `make
# bench-executors` times it beside the executor on the same GGUF
# (hack/llama-cpp-bench.mjs). It also clones the llama.cpp source the
# package ships (llama/gitRelease.bundle) into DIR/llama.cpp: the vocab
# files and templates tests compare against.
#
# Install scripts are not run (--ignore-scripts): node-llama-cpp's would try
# to download or build llama.cpp, and the prebuilt binaries it needs come as
# the @node-llama-cpp/linux-x64 package; other platforms' optional packages
# (CUDA, Vulkan, Arm: 600 MB) are left out.
#
# Usage: hack/setup-llama-cpp.sh            (prints the directory)
# Env:   KVPILOT_GGML_NLC_VERSION, KVPILOT_LLAMA_CPP_CACHE
set -euo pipefail

VERSION="${KVPILOT_GGML_NLC_VERSION:-3.22.1}"
CACHE_ROOT="${KVPILOT_LLAMA_CPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/node-llama-cpp}"
DIR="${CACHE_ROOT}/${VERSION}"

log() { echo "setup-llama-cpp: $*" >&2; }

have() { [[ -f "${DIR}/.complete" && -d "${DIR}/node_modules/node-llama-cpp" ]]; }

# source clones the llama.cpp source tree the package ships as
# llama/gitRelease.bundle into ${DIR}/llama.cpp (needs git): the reference
# files tests read (models/ggml-vocab-*.gguf with .inp/.out,
# models/templates/*.jinja). Without git the tree is left out and the tests
# that read it say so.
source_tree() {
	[[ -f "${DIR}/llama.cpp/.complete" ]] && return 0
	if ! command -v git >/dev/null; then
		log "git is not installed: the llama.cpp source tree is left out"
		return 0
	fi
	rm -rf "${DIR}/llama.cpp"
	if git -c advice.detachedHead=false clone -q "${DIR}/node_modules/node-llama-cpp/llama/gitRelease.bundle" "${DIR}/llama.cpp" >&2; then
		touch "${DIR}/llama.cpp/.complete"
	else
		log "cloning the llama.cpp source bundle failed"
	fi
}

if have; then
	exec 9>"${DIR}.lock"
	flock 9
	source_tree
	echo "${DIR}"
	exit 0
fi
if [[ "$(uname -s)/$(uname -m)" != "Linux/x86_64" ]]; then
	log "the prebuilt llama.cpp is installed for linux/x86_64 only (this is $(uname -s)/$(uname -m))"
	exit 1
fi
for tool in node npm; do
	if ! command -v "${tool}" >/dev/null; then
		log "${tool} is needed to install node-llama-cpp@${VERSION} (install Node.js 20 or later)"
		exit 1
	fi
done
mkdir -p "${CACHE_ROOT}"
exec 9>"${DIR}.lock"
flock 9
if have; then
	echo "${DIR}"
	exit 0
fi
rm -rf "${DIR}"
mkdir -p "${DIR}"
echo '{"private": true}' >"${DIR}/package.json"
log "installing node-llama-cpp@${VERSION} and @node-llama-cpp/linux-x64@${VERSION} from the npm registry"
if ! (cd "${DIR}" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error --omit=optional \
	"node-llama-cpp@${VERSION}" "@node-llama-cpp/linux-x64@${VERSION}" >&2); then
	log "npm install failed"
	exit 1
fi
touch "${DIR}/.complete"
source_tree
log "node-llama-cpp ready in ${DIR}"
echo "${DIR}"

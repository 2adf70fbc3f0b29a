#!/usr/bin/env bash
# Installs ggml's prebuilt shared libraries (the ggml executor's kernels) into
# a cache outside the work tree and prints the library directory to pass as
# --ggml-lib / KVPILOT_GGML_LIB.
#
# The libraries come from the npm packages of node-llama-cpp, which ship
# llama.cpp's ggml built for linux-x64: @node-llama-cpp/linux-x64 (CPU
# backends for every x86-64 level, loaded by CPU features at run time) and
# @node-llama-cpp/linux-x64-cuda (the same release with the CUDA backend).
# npm is the one registry these machines and CI reach that ships them; only
# `npm pack` is used (no node_modules, no install scripts run).
#
# The prebuilt CUDA backend does not run on every GPU (on an H100 with the
# 580 driver its PTX is refused at the first kernel launch):
# hack/build-ggml-cuda.sh builds it from the same release for your GPUs.
#
# A cached directory is reused as-is: the package version is part of its path,
# so a stale cache cannot be picked up by mistake.
#
# Usage: hack/setup-ggml.sh [cpu|cuda]     (default cpu; prints the directory)
# Env:   KVPILOT_GGML_NLC_VERSION, KVPILOT_GGML_CACHE
set -euo pipefail

FLAVOR="${1:-cpu}"
# node-llama-cpp 3.22.1 ships ggml 0.25.1 (llama.cpp commit 0ad4a86); the
# executor's binding is written against that ABI.
VERSION="${KVPILOT_GGML_NLC_VERSION:-3.22.1}"
CACHE_ROOT="${KVPILOT_GGML_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/ggml}"
DIR="${CACHE_ROOT}/${VERSION}/${FLAVOR}"

log() { echo "setup-ggml: $*" >&2; }

case "${FLAVOR}" in
cpu) PKG="@node-llama-cpp/linux-x64" ;;
cuda) PKG="@node-llama-cpp/linux-x64-cuda" ;;
*)
	log "unknown flavor ${FLAVOR} (cpu or cuda)"
	exit 2
	;;
esac
if [[ "$(uname -s)/$(uname -m)" != "Linux/x86_64" ]]; then
	log "prebuilt ggml is installed for linux/x86_64 only (this is $(uname -s)/$(uname -m))"
	exit 1
fi

have() { [[ -f "${DIR}/libggml-base.so" && -f "${DIR}/.complete" ]]; }

if have; then
	echo "${DIR}"
	exit 0
fi

mkdir -p "${CACHE_ROOT}/${VERSION}"
# Concurrent `make test` runs must not unpack into the same directory at once.
exec 9>"${DIR}.lock"
flock 9
if have; then
	echo "${DIR}"
	exit 0
fi

if ! command -v npm >/dev/null; then
	log "npm is needed to fetch ${PKG}@${VERSION} (install Node.js, or put the libraries in ${DIR} yourself)"
	exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
log "fetching ${PKG}@${VERSION} from the npm registry"
(cd "${work}" && npm pack --silent "${PKG}@${VERSION}" >/dev/null 2>"${work}/npm.log") || {
	cat "${work}/npm.log" >&2
	log "npm pack ${PKG}@${VERSION} failed"
	exit 1
}
mkdir -p "${work}/x"
tar -xzf "${work}"/*.tgz -C "${work}/x"
src="$(dirname "$(find "${work}/x" -name libggml-base.so | head -n1)")"
if [[ ! -f "${src}/libggml-base.so" ]]; then
	log "${PKG}@${VERSION} holds no libggml-base.so"
	exit 1
fi
rm -rf "${DIR}"
mkdir -p "${DIR}"
# Only ggml: libllama and the node addon are not used.
cp "${src}"/libggml*.so "${src}"/_nlcBuildMetadata.json "${DIR}/"
touch "${DIR}/.complete"
log "ggml libraries ready in ${DIR}"
echo "${DIR}"

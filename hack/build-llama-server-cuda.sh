#!/usr/bin/env bash
# Builds llama.cpp's own llama-server with CUDA from the release
# node-llama-cpp pins (the source hack/build-ggml-cuda.sh builds ggml from),
# for `make bench-gpu`, which serves the same GGUF with it and with kvpilot's
# ggml executor on one GPU and prints the ratios. Prints the binary's path.
#
# The build is llama.cpp's defaults for a CUDA server (CUDA graphs and
# flash-attention kernels on), statically linked, without HTTPS (the
# benchmark talks to it over loopback): the baseline a user would build.
#
# Usage: hack/build-llama-server-cuda.sh [OUTDIR]
#   OUTDIR       where llama-server goes (default: a cache directory named by
#                release and architectures, reused once built)
# Env:
#   CUDA_ARCHS   CMAKE_CUDA_ARCHITECTURES (default "native")
#   LLAMA_SRC    a llama.cpp source tree to build instead of fetching it
#   JOBS         parallel build jobs (default: nproc)
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
VERSION="${KVPILOT_GGML_NLC_VERSION:-3.22.1}"
CACHE_ROOT="${KVPILOT_GGML_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/ggml}"
ARCHS="${CUDA_ARCHS:-native}"
OUT="${1:-${CACHE_ROOT}/${VERSION}/llama-server-cuda-$(echo "${ARCHS}" | tr -c 'A-Za-z0-9\n' '_')}"
JOBS="${JOBS:-$(nproc)}"

log() { echo "build-llama-server-cuda: $*" >&2; }
# shellcheck source=lib/llama-source.sh
source "${HERE}/lib/llama-source.sh"

if [[ -f "${OUT}/.complete" && -x "${OUT}/llama-server" ]]; then
	echo "${OUT}/llama-server"
	exit 0
fi
require_tools cmake nvcc || exit 1
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
src="${LLAMA_SRC:-}"
if [[ -z "${src}" ]]; then
	src="$(llama_source "${work}" "${VERSION}")"
fi
if [[ ! -f "${src}/CMakeLists.txt" || ! -d "${src}/tools/server" ]]; then
	log "${src} is not llama.cpp's source tree (no CMakeLists.txt or tools/server)"
	exit 1
fi
log "configuring llama-server for CUDA architectures ${ARCHS} ($(nvcc --version | tail -n1))"
cmake -S "${src}" -B "${work}/build" -DCMAKE_BUILD_TYPE=Release \
	-DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_CUDA=ON \
	-DCMAKE_CUDA_ARCHITECTURES="${ARCHS}" \
	-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF \
	$(command -v ninja >/dev/null && echo -G Ninja) >"${work}/configure.log" 2>&1 || {
	tail -n 30 "${work}/configure.log" >&2
	exit 1
}
log "building llama-server with ${JOBS} jobs (minutes)"
cmake --build "${work}/build" --target llama-server -j "${JOBS}" >"${work}/build.log" 2>&1 || {
	tail -n 40 "${work}/build.log" >&2
	exit 1
}
mkdir -p "${OUT}"
cp "$(find "${work}/build" -type f -name llama-server -perm -u+x | head -n1)" "${OUT}/llama-server"
echo "{\"builtFrom\":\"node-llama-cpp@${VERSION}\",\"cudaArchitectures\":\"${ARCHS}\"}" >"${OUT}/_kvpilotBuild.json"
touch "${OUT}/.complete"
log "llama-server for ${ARCHS} ready in ${OUT}"
echo "${OUT}/llama-server"

#!/usr/bin/env bash
# Builds llama.cpp's own llama-server with CUDA from the release
# node-llama-cpp pins (the source hack/build-ggml-cuda.sh builds ggml from),
# for `make bench-gpu`, which serves the same GGUF with it and with kvpilot's
# ggml executor on one GPU and prints the ratios. Prints the binary's path.
#
# One build gives both servers their ggml: llama.cpp is built with shared
# libraries and loadable backends (GGML_BACKEND_DL), and the directory that
# holds llama-server also holds libggml-base, libggml and libggml-cuda (the
# release's prebuilt CPU backends beside them, as hack/build-ggml-cuda.sh
# installs them), so `--ggml-lib` of that directory runs kvpilot on the very
# kernels llama-server runs. The build is llama.cpp's defaults for a CUDA
# server otherwise: CUDA graphs and flash-attention kernels on (for the
# K/V type pairs in GGML_CUDA_FA_QUANTS, default f16-f16: llama-server's
# default cache type; "all" builds every pair, far longer), no HTTPS (the
# benchmark talks to it over loopback). On an H100's machine (16 cores,
# CUDA 13.0, CUDA_ARCHS=90-real) it took 2 min 54 s.
#
# Usage: hack/build-llama-server-cuda.sh [OUTDIR]
#   OUTDIR       where llama-server and the libraries go (default: a cache
#                directory named by release and architectures, reused once
#                built)
# Env:
#   CUDA_ARCHS          CMAKE_CUDA_ARCHITECTURES (default "native")
#   GGML_CUDA_FA_QUANTS flash-attention K-V type pairs (default f16-f16)
#   LLAMA_SRC           a llama.cpp source tree to build instead of fetching
#                       it, or a .tar/.tar.xz of one
#   GGML_PREBUILT       directory of the prebuilt CPU backends (default:
#                       hack/setup-ggml.sh cpu)
#   JOBS                parallel build jobs (default: nproc)
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
VERSION="${KVPILOT_GGML_NLC_VERSION:-3.22.1}"
CACHE_ROOT="${KVPILOT_GGML_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/ggml}"
ARCHS="${CUDA_ARCHS:-native}"
OUT="${1:-${CACHE_ROOT}/${VERSION}/llama-server-cuda-shared-$(echo "${ARCHS}" | tr -c 'A-Za-z0-9\n' '_')}"
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
elif [[ -f "${src}" ]]; then
	mkdir -p "${work}/src"
	tar -xf "${src}" -C "${work}/src"
	src="$(dirname "$(find "${work}/src" -maxdepth 4 -path '*/tools/server/CMakeLists.txt' | head -n1)")/../.."
fi
if [[ ! -f "${src}/CMakeLists.txt" || ! -d "${src}/tools/server" ]]; then
	log "${src} is not llama.cpp's source tree (no CMakeLists.txt or tools/server)"
	exit 1
fi
prebuilt="${GGML_PREBUILT:-}"
if [[ -z "${prebuilt}" ]]; then
	prebuilt="$("${HERE}/setup-ggml.sh" cpu)"
fi
log "configuring llama-server for CUDA architectures ${ARCHS} ($(nvcc --version | tail -n1))"
# The CPU backend comes from the prebuilt package (one library per x86-64
# level, the same files kvpilot loads); the runtime search path is $ORIGIN,
# so the directory works wherever it is copied.
cmake -S "${src}" -B "${work}/build" -DCMAKE_BUILD_TYPE=Release \
	-DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON -DGGML_NATIVE=OFF -DGGML_CPU=OFF \
	-DGGML_CUDA=ON -DGGML_CUDA_FA=ON -DGGML_CUDA_FA_QUANTS="${GGML_CUDA_FA_QUANTS:-f16-f16}" \
	-DGGML_CUDA_GRAPHS=ON -DGGML_CUDA_NCCL=OFF -DCMAKE_CUDA_ARCHITECTURES="${ARCHS}" \
	-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON \
	-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF \
	$(command -v ninja >/dev/null && echo -G Ninja) >"${work}/configure.log" 2>&1 || {
	tail -n 30 "${work}/configure.log" >&2
	exit 1
}
log "building llama-server and ggml-cuda with ${JOBS} jobs (minutes)"
cmake --build "${work}/build" --target llama-server ggml-cuda -j "${JOBS}" >"${work}/build.log" 2>&1 || {
	tail -n 40 "${work}/build.log" >&2
	exit 1
}
mkdir -p "${OUT}"
bin="$(dirname "$(find "${work}/build" -type f -name llama-server -perm -u+x | head -n1)")"
# Symbolic links kept: libggml-base.so and libggml-base.so.0 must be one
# file, or a process that reaches it by both names loads ggml twice.
cp -a "${bin}"/llama-server "${bin}"/*.so* "${OUT}/"
cp "${prebuilt}"/libggml-cpu*.so "${OUT}/"
echo "{\"builtFrom\":\"node-llama-cpp@${VERSION}\",\"cudaArchitectures\":\"${ARCHS}\",\"faQuants\":\"${GGML_CUDA_FA_QUANTS:-f16-f16}\"}" >"${OUT}/_kvpilotBuild.json"
touch "${OUT}/.complete"
log "llama-server and ggml with CUDA for ${ARCHS} ready in ${OUT}"
echo "${OUT}/llama-server"

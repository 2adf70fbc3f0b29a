#!/usr/bin/env bash
# Builds ggml's CUDA backend from source for the GPUs you name, and installs
# it beside the prebuilt CPU backends, for machines where the prebuilt
# libggml-cuda.so (hack/setup-ggml.sh cuda) cannot run.
#
# Why: node-llama-cpp's CUDA build carries machine code for sm_86, sm_89,
# sm_120a and sm_121a only, and PTX for compute_75/80/90. On Hopper (H100,
# H200: sm_90) and on A100 (sm_80) the driver must JIT-compile that PTX, and
# it was produced by a newer CUDA toolkit than the 580 driver series accepts:
# every kernel launch fails with "the provided PTX was compiled with an
# unsupported toolchain" (seen on an H100 with driver 580.159.04). Building
# from the same source with the machine's own nvcc gives real machine code.
#
# The source is the llama.cpp release node-llama-cpp pins (its npm package
# ships it as llama/gitRelease.bundle), so the result has the ABI the
# executor binds (ggml 0.25.1). Only ggml is built: libggml-base,
# libggml (the backend registry) and libggml-cuda, as loadable backends
# (GGML_BACKEND_DL), replacing those files in the library directory.
#
# CUDA graphs are on (GGML_CUDA_GRAPHS; ggml's own default is off, llama.cpp
# turns it on): the backend captures a graph that stays the same, node for
# node, across steps and replays it with one launch instead of ~1,000 kernel
# launches a step. The executor reuses its graph between steps of the same
# shape for that reason (internal/runtime/executor/ggml/graph.go).
#
# Usage: hack/build-ggml-cuda.sh [OUTDIR]
#   OUTDIR            where the libraries go (default: a cache directory named
#                     by release and architectures, reused once built;
#                     printed at the end, pass it as --ggml-lib)
# Env:
#   CUDA_ARCHS        CMAKE_CUDA_ARCHITECTURES (default "native": the GPUs of
#                     this machine; e.g. "80-real;90-real" for A100 + H100)
#   GGML_SRC          a directory holding ggml's CMake project (ggml/), or a
#                     .tar/.tar.xz of it; default: taken from the npm package
#                     node-llama-cpp@$KVPILOT_GGML_NLC_VERSION (needs npm)
#   GGML_PREBUILT     directory of the prebuilt package whose CPU backends are
#                     copied beside the build (default: hack/setup-ggml.sh cpu)
#   GGML_CUDA_FA      ON builds ggml's flash-attention kernels (default OFF: the
#                     executor's CUDA attention uses them only with
#                     --ggml-flash-max-seqs, not yet measured on a GPU, and
#                     they are most of the build time)
#   JOBS              parallel build jobs (default: nproc)
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
VERSION="${KVPILOT_GGML_NLC_VERSION:-3.22.1}"
CACHE_ROOT="${KVPILOT_GGML_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/ggml}"
ARCHS="${CUDA_ARCHS:-native}"
OUT="${1:-${CACHE_ROOT}/${VERSION}/cuda-built-$(echo "${ARCHS}" | tr -c 'A-Za-z0-9\n' '_')}"
JOBS="${JOBS:-$(nproc)}"

log() { echo "build-ggml-cuda: $*" >&2; }
# shellcheck source=lib/llama-source.sh
source "${HERE}/lib/llama-source.sh"

# A finished build is reused (the release and the architectures are in the
# default directory's path).
if [[ -f "${OUT}/.complete" && -f "${OUT}/libggml-cuda.so" ]]; then
	echo "${OUT}"
	exit 0
fi

require_tools cmake nvcc || exit 1

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

src="${GGML_SRC:-}"
if [[ -z "${src}" ]]; then
	root="$(llama_source "${work}" "${VERSION}")" || {
		log "could not fetch the source (or set GGML_SRC)"
		exit 1
	}
	src="${root}/ggml"
elif [[ -f "${src}" ]]; then
	mkdir -p "${work}/src"
	tar -xf "${src}" -C "${work}/src"
	src="$(dirname "$(find "${work}/src" -maxdepth 2 -name CMakeLists.txt -path '*ggml*' | head -n1)")"
fi
if [[ ! -f "${src}/CMakeLists.txt" || ! -d "${src}/src/ggml-cuda" ]]; then
	log "${src} is not ggml's source tree (no CMakeLists.txt or src/ggml-cuda)"
	exit 1
fi

prebuilt="${GGML_PREBUILT:-}"
if [[ -z "${prebuilt}" ]]; then
	prebuilt="$("${HERE}/setup-ggml.sh" cpu)"
fi

log "configuring for CUDA architectures ${ARCHS} ($(nvcc --version | tail -n1))"
# ggml is built as a subproject, as llama.cpp builds it (the source bundle
# leaves out what a standalone build installs: ggml.pc.in, tests, examples).
mkdir -p "${work}/top"
printf 'cmake_minimum_required(VERSION 3.14)\nproject(kvpilot-ggml C CXX)\nadd_subdirectory("%s" ggml)\n' "${src}" >"${work}/top/CMakeLists.txt"
cmake -S "${work}/top" -B "${work}/build" -DCMAKE_BUILD_TYPE=Release \
	-DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON -DGGML_NATIVE=OFF \
	-DGGML_CUDA=ON -DGGML_CUDA_FA="${GGML_CUDA_FA:-OFF}" -DGGML_CUDA_GRAPHS=ON \
	-DCMAKE_CUDA_ARCHITECTURES="${ARCHS}" $(command -v ninja >/dev/null && echo -G Ninja) \
	>"${work}/configure.log" 2>&1 || {
	tail -n 30 "${work}/configure.log" >&2
	exit 1
}
log "building ggml-base, ggml and ggml-cuda with ${JOBS} jobs (minutes)"
cmake --build "${work}/build" --target ggml-base ggml ggml-cuda -j "${JOBS}" >"${work}/build.log" 2>&1 || {
	tail -n 40 "${work}/build.log" >&2
	exit 1
}

mkdir -p "${OUT}"
# The prebuilt CPU backends (one per x86-64 level) link against
# libggml-base.so of the same release, which the build replaces.
cp "${prebuilt}"/libggml-cpu*.so "${OUT}/"
rm -f "${OUT}"/libggml.*v*.so
# With their versioned names too (libggml-base.so.0 ...), which the
# libraries' NEEDED entries may name.
find "${work}/build" \( -name 'libggml-base.so*' -o -name 'libggml.so*' -o -name 'libggml-cuda.so*' \) -exec cp -L {} "${OUT}/" \;
echo "{\"builtFrom\":\"node-llama-cpp@${VERSION}\",\"cudaArchitectures\":\"${ARCHS}\"}" >"${OUT}/_kvpilotBuild.json"
touch "${OUT}/.complete"
log "ggml with CUDA for ${ARCHS} ready in ${OUT}"
echo "${OUT}"

#!/usr/bin/env bash
# Packs what `make test-gpu` and `make bench-gpu` need into one folder, for
# a GPU machine that has nvcc and CMake but no Go and no network (a machine
# lent for minutes, say): the runtime and the ggml package's test binary,
# and kvpilot-model, built here; llama.cpp's source of the pinned release; the release's
# prebuilt CPU backends; the two build scripts; and run.sh, which builds
# llama.cpp with CUDA there (hack/build-llama-server-cuda.sh: llama-server
# and the ggml both servers load) and runs, in order, the package's tests
# on CUDA, BenchmarkGPUVsLlamaServer (the Qwen2-0.5B, qwen3moe and
# gpt-oss shapes) and BenchmarkExecutors/StepVsHTTP,
# each within what is left of a deadline.
#
# Usage: hack/gpu-bundle.sh [OUTDIR]     (default bin/gpu-bundle; ~20 MB)
# There: OUT=<logs dir> [DEADLINE=seconds] [CUDA_ARCHS=90-real] \
#        bash OUTDIR/run.sh [build,frac,test,bench,exec]
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "${HERE}/.." && pwd)"
VERSION="${KVPILOT_GGML_NLC_VERSION:-3.22.1}"
OUT="${1:-${ROOT}/bin/gpu-bundle}"
GO="${GO:-go}"

log() { echo "gpu-bundle: $*" >&2; }
# shellcheck source=lib/llama-source.sh
source "${HERE}/lib/llama-source.sh"

rm -rf "${OUT}"
mkdir -p "${OUT}/hack/lib"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

log "building the runtime and the ggml package's test binary"
(cd "${ROOT}" && CGO_ENABLED=0 "${GO}" build -ldflags='-s -w' -o "${work}/kvpilot-runtime" ./cmd/runtime)
(cd "${ROOT}" && CGO_ENABLED=0 "${GO}" build -ldflags='-s -w' -o "${work}/kvpilot-model" ./cmd/kvpilot-model)
(cd "${ROOT}" && CGO_ENABLED=0 "${GO}" test -c -ldflags='-s -w' -o "${work}/ggml.test" ./internal/runtime/executor/ggml/)
tar -C "${work}" -cJf "${OUT}/bins.tar.xz" kvpilot-runtime kvpilot-model ggml.test

src="$(llama_source "${work}" "${VERSION}")"
log "packing llama.cpp's source (without models, docs, tests, examples)"
tar -C "$(dirname "${src}")" --exclude=.git --exclude=llama.cpp/models --exclude=llama.cpp/docs \
	--exclude=llama.cpp/benches --exclude=llama.cpp/tests --exclude=llama.cpp/examples \
	-cJf "${OUT}/llama-src.tar.xz" "$(basename "${src}")"

prebuilt="$("${HERE}/setup-ggml.sh" cpu)"
tar -C "${prebuilt}" -cJf "${OUT}/ggml-cpu.tar.xz" $(cd "${prebuilt}" && ls ./*.so)

cp "${HERE}/build-llama-server-cuda.sh" "${OUT}/hack/"
cp "${HERE}/lib/llama-source.sh" "${OUT}/hack/lib/"
cp "${HERE}/gpu-bundle-run.sh" "${OUT}/run.sh"
echo "{\"builtFrom\":\"$(cd "${ROOT}" && git rev-parse --short HEAD 2>/dev/null || echo unknown)\",\"ggml\":\"node-llama-cpp@${VERSION}\"}" >"${OUT}/bundle.json"
log "ready: ${OUT} ($(du -sh "${OUT}" | cut -f1)); on the GPU machine: OUT=<logs> bash ${OUT}/run.sh"
echo "${OUT}"

#!/usr/bin/env bash
# run.sh of the folder hack/gpu-bundle.sh packs: on a GPU machine with nvcc
# and CMake (no Go needed), builds llama.cpp with CUDA once (llama-server
# and the ggml both servers load), then runs the ggml package's tests on
# CUDA, BenchmarkGPUVsLlamaServer (kvpilot against llama-server on the
# Qwen2-0.5B, qwen3moe and gpt-oss shapes) and
# BenchmarkExecutors/StepVsHTTP. Every
# phase logs to $OUT (main.log has the summary) and stops at what is left
# of DEADLINE seconds from the start, so the next phase still gets its turn
# only when there is time.
#
# Usage: OUT=<logs dir> [DEADLINE=570] [CUDA_ARCHS=native] [REPS=2] \
#        [MODELS=qwen2,qwen3moe,gpt-oss] bash run.sh [build,test,bench,exec]
# MODELS picks BenchmarkGPUVsLlamaServer's models (its sub-benchmarks: the
# Qwen2-0.5B shape, and the qwen3moe and gpt-oss shapes); all by default.
# DEV=cpu runs the test phase on the CPU backend (a check of the bundle on
# a machine without a GPU).
set -u
PHASES="${1:-build,test,bench,exec}"
B="$(cd "$(dirname "$0")" && pwd)"
W="${WORK:-${HOME:-/tmp}/kvpilot-gpu}"
OUT="${OUT:-${W}/logs}"
mkdir -p "$W/bin" "$W/cpu" "$OUT"
LOG="$OUT/main.log"
export PATH="$PATH:/usr/local/cuda/bin"

say() { echo "[$(date +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$LOG"; }
has() { [[ ",$PHASES," == *",$1,"* ]]; }
# untar FILE DIR: tar's xz, or Python's where xz is missing.
untar() { tar -xJf "$1" -C "$2" 2>/dev/null || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"; }
# left CAP: seconds to the deadline, at most CAP, at least 1.
left() {
	local l=$((${DEADLINE:-570} - SECONDS))
	((l > $1)) && l=$1
	((l < 1)) && l=1
	echo $l
}

say "phases $PHASES; bundle $(cat "$B/bundle.json" 2>/dev/null)"
untar "$B/bins.tar.xz" "$W/bin"
untar "$B/ggml-cpu.tar.xz" "$W/cpu"
server="$W/llama/llama-server"
if has build; then
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$LOG"
	nvcc --version 2>&1 | tail -n1 | tee -a "$LOG"
	say "building llama.cpp with CUDA (architectures ${CUDA_ARCHS:-native})"
	if ! LLAMA_SRC="$B/llama-src.tar.xz" GGML_PREBUILT="$W/cpu" bash "$B/hack/build-llama-server-cuda.sh" "$W/llama" >"$OUT/build.log" 2>&1; then
		tail -n 30 "$OUT/build.log" | tee -a "$LOG"
		say "build failed"
		exit 1
	fi
	say "built"
fi
lib="$W/llama"
if [[ "${DEV:-cuda}" == cpu ]]; then
	lib="$W/cpu"
fi
export KVPILOT_GGML_LIB="$lib" KVPILOT_RUNTIME_BIN="$W/bin/kvpilot-runtime" KVPILOT_GGML_DEVICE="${DEV:-cuda}"
cd "$W/bin" || exit 1

if has test; then
	say "tests on ${DEV:-cuda}"
	KVPILOT_REQUIRE_GGML=1 timeout "$(left 300)" ./ggml.test -test.v -test.timeout 290s >"$OUT/test.log" 2>&1
	rc=$?
	grep -E '^(--- FAIL|ok|FAIL|PASS)|^\s+--- FAIL' "$OUT/test.log" | tail -n 40 | tee -a "$LOG"
	say "tests rc=$rc ($(grep -c -- '--- PASS' "$OUT/test.log") passed, $(grep -c -- '--- FAIL' "$OUT/test.log") failed)"
fi
if has bench; then
	models="${MODELS:-qwen2,qwen3moe,gpt-oss}"
	say "BenchmarkGPUVsLlamaServer ($models)"
	KVPILOT_BENCH_GPU=1 KVPILOT_LLAMA_SERVER="$server" KVPILOT_BENCH_REPS="${REPS:-2}" \
		timeout "$(left 400)" ./ggml.test -test.run '^$' -test.bench "GPUVsLlamaServer/^(${models//,/|})\$" -test.benchtime 1x -test.timeout 390s >"$OUT/bench-gpu.log" 2>&1
	rc=$?
	grep -E '^round|^kvpilot/|CUDA error|^--- FAIL|bench_gpu_test' "$OUT/bench-gpu.log" | head -n 40 | tee -a "$LOG"
	say "bench-gpu rc=$rc"
fi
if has exec; then
	if (($(left 9999) < 60)); then
		say "BenchmarkExecutors skipped: $(left 9999) s left"
	else
		say "BenchmarkExecutors|StepVsHTTP"
		KVPILOT_BENCH_EXECUTORS=1 timeout "$(left 600)" ./ggml.test -test.run '^$' -test.bench 'Executors|StepVsHTTP|ServingPath|HybridSecondTurn' -test.benchtime 1x -test.timeout 600s >"$OUT/bench-exec.log" 2>&1
		rc=$?
		grep -E 'tok/s|×|^--- FAIL|panic' "$OUT/bench-exec.log" | tail -n 30 | tee -a "$LOG"
		say "exec rc=$rc"
	fi
fi
say "done"

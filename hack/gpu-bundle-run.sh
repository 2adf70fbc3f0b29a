#!/usr/bin/env bash
# run.sh of the folder hack/gpu-bundle.sh packs: on a GPU machine with nvcc
# and CMake (no Go needed), builds llama.cpp with CUDA once (llama-server
# and the ggml both servers load), then serves a qwen3moe-shaped GGUF
# with the KV cache sized by --kv-cache-memory-fraction 0.9 (the
# InferencePool's default) and checks it answers, then runs the ggml
# package's tests on CUDA, BenchmarkGPUVsLlamaServer (kvpilot against llama-server on the
# Qwen2-0.5B, qwen3moe and gpt-oss shapes) and
# BenchmarkExecutors/StepVsHTTP. Every
# phase logs to $OUT (main.log has the summary) and stops at what is left
# of DEADLINE seconds from the start, so the next phase still gets its turn
# only when there is time.
#
# Usage: OUT=<logs dir> [DEADLINE=570] [CUDA_ARCHS=native] [REPS=2] \
#        [MODELS=qwen2,qwen3moe,gpt-oss] [TESTS=regexp] [TEST_CAP=300] \
#        bash run.sh [build,frac,test,bench,exec]
# MODELS picks BenchmarkGPUVsLlamaServer's models (its sub-benchmarks: the
# Qwen2-0.5B shape, and the qwen3moe and gpt-oss shapes); all by default.
# TESTS limits the test phase to the tests it matches (-test.run), and
# TEST_CAP its seconds.
# DEV=cpu runs the test phase on the CPU backend (a check of the bundle on
# a machine without a GPU).
set -u
PHASES="${1:-build,frac,test,bench,exec}"
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

if has frac; then
	say "--kv-cache-memory-fraction 0.9: a qwen3moe-shaped GGUF (8 layers, 64 experts, 8 used)"
	./kvpilot-model write --arch qwen3moe --layers 8 --dim 1024 --heads 16 --kv-heads 4 --head-dim 128 --experts 64 --experts-used 8 \
		--expert-ffn 512 --ffn 3072 --vocab 4096 --context 32768 --dtype q8_0 --out "$W/frac.gguf" >"$OUT/frac.log" 2>&1
	port=18123
	timeout "$(left 120)" ./kvpilot-runtime --executor ggml --device "${DEV:-cuda}" --ggml-lib "$lib" --model "$W/frac.gguf" \
		--served-model-name frac --host 127.0.0.1 --port "$port" --kv-cache-memory-fraction 0.9 --max-num-seqs 64 >>"$OUT/frac.log" 2>&1 &
	rt=$!
	for _ in $(seq 1 100); do
		curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
		kill -0 "$rt" 2>/dev/null || break
		sleep 1
	done
	curl -s "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
		-d '{"model":"frac","prompt":[1,2,3,4,5,6,7,8],"max_tokens":16,"temperature":0,"ignore_eos":true}' 2>&1 | head -c 600 | tee -a "$LOG"
	echo | tee -a "$LOG"
	nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader 2>&1 | sed 's/^/GPU memory used, total: /' | tee -a "$LOG"
	curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null | grep -E '^(vllm:cache_config_info|kvpilot_kv_cache_(blocks|capacity)[a-z_]*)' | head -n 8 | tee -a "$LOG"
	grep -E 'KV cache sized|blocks|error|panic' "$OUT/frac.log" | head -n 8 | tee -a "$LOG"
	kill "$rt" 2>/dev/null
	wait "$rt" 2>/dev/null
	say "frac done"
fi
if has test; then
	say "tests on ${DEV:-cuda}${TESTS:+ matching $TESTS}"
	cap="${TEST_CAP:-300}"
	KVPILOT_REQUIRE_GGML=1 timeout "$(left "$cap")" ./ggml.test -test.v -test.run "${TESTS:-.}" -test.timeout "$((cap - 10))s" >"$OUT/test.log" 2>&1
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

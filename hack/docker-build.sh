#!/usr/bin/env bash
# `make docker-build` and `make docker-build-cuda`: builds the Dockerfile with
# docker when a Docker daemon answers, else daemonless with podman or
# buildah.
#
# With docker, or with podman/buildah where the Dockerfile's default base
# images are in local storage or can be pulled, the build is the plain one.
# Where they cannot be pulled (no registry reachable), the bases are built
# locally by hack/build-base-images.sh and passed as build arguments; the
# Dockerfile is the same.
#
# podman/buildah builds run their RUN steps in the host's network namespace
# (the build makes no bridge and no firewall rules) with file and process
# limits at or below the host's hard limits (a container runtime cannot
# raise them without CAP_SYS_RESOURCE, which sandboxes often drop).
#
# The CUDA target needs nvidia/cuda base images. With local bases they are
# used when already in local storage (CUDA_DEVEL_IMAGE, CUDA_RUNTIME_IMAGE);
# otherwise the build stops after the stages that need no CUDA image
# (build, ggml-fetch), says so, and exits 0.
#
# Usage: hack/docker-build.sh cpu|cuda IMAGE
# Env:   CONTAINER_TOOL (docker, podman or buildah; default: the first that
#        works), KVPILOT_BASE_IMAGES (auto, registry or local; default auto),
#        GGML_NLC_VERSION, CUDA_DEVEL_IMAGE, CUDA_RUNTIME_IMAGE
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${1:?usage: $0 cpu|cuda IMAGE}"
IMAGE="${2:?usage: $0 cpu|cuda IMAGE}"
BASES="${KVPILOT_BASE_IMAGES:-auto}"
CUDA_DEVEL_IMAGE="${CUDA_DEVEL_IMAGE:-nvidia/cuda:13.0.0-devel-ubuntu24.04}"
CUDA_RUNTIME_IMAGE="${CUDA_RUNTIME_IMAGE:-nvidia/cuda:13.0.0-runtime-ubuntu24.04}"
# The Dockerfile's defaults, kept in step with its ARG lines.
DEFAULT_BASES=(golang:1.26 gcr.io/distroless/base-debian12:nonroot)

log() { echo "docker-build: $*" >&2; }

# shellcheck source=lib/container-tool.sh
source hack/lib/container-tool.sh
TOOL="$(container_tool)"
if [[ -z "${TOOL}" ]]; then
	log "no docker daemon, podman or buildah found (apt-get install podman, or set CONTAINER_TOOL)"
	exit 1
fi

cuda_args=()
if [[ "${TARGET}" == cuda ]]; then
	cuda_args=(--platform=linux/amd64 --target=runtime-cuda "--build-arg=GGML_NLC_VERSION=${GGML_NLC_VERSION:-3.22.1}"
		"--build-arg=CUDA_DEVEL_IMAGE=${CUDA_DEVEL_IMAGE}" "--build-arg=CUDA_RUNTIME_IMAGE=${CUDA_RUNTIME_IMAGE}")
	DEFAULT_BASES+=(node:22-bookworm-slim "${CUDA_DEVEL_IMAGE}" "${CUDA_RUNTIME_IMAGE}")
elif [[ "${TARGET}" != cpu ]]; then
	log "unknown target ${TARGET} (cpu or cuda)"
	exit 2
fi

if [[ "${TOOL}" == docker ]]; then
	log "docker build -t ${IMAGE}"
	exec docker build "${cuda_args[@]}" -t "${IMAGE}" .
fi

build() {
	if [[ "${TOOL}" == podman ]]; then podman build "$@"; else buildah build "$@"; fi
}
present() {
	if [[ "${TOOL}" == podman ]]; then podman image exists "$1"; else buildah inspect --type image "$1" >/dev/null 2>&1; fi
}
pull() {
	# A registry that cannot be resolved fails at once; one that hangs is
	# given a minute.
	if [[ "${TOOL}" == podman ]]; then timeout 60 podman pull -q "$1"; else timeout 60 buildah pull -q "$1"; fi >/dev/null 2>&1
}

if [[ "${BASES}" == auto ]]; then
	BASES=registry
	for b in "${DEFAULT_BASES[@]}"; do
		present "${b}" || pull "${b}" || { BASES=local; log "base image ${b} is not in local storage and cannot be pulled: building local bases"; break; }
	done
fi

# podman lowers its own process limit to 32768 before it starts the
# runtime, so a container may not ask for more than that.
cap() { local v="$1" max="$2"; [[ "${v}" == unlimited || "${v}" -gt "${max}" ]] && v="${max}"; echo "${v}"; }
nofile="$(cap "$(ulimit -Hn)" 1048576)"
nproc="$(cap "$(ulimit -Hu)" 32768)"
flags=(--network=host "--ulimit=nofile=${nofile}:${nofile}" "--ulimit=nproc=${nproc}:${nproc}" --layers)

case "${BASES}" in
registry)
	log "${TOOL} build -t ${IMAGE} (base images from the registry)"
	build "${flags[@]}" "${cuda_args[@]}" -t "${IMAGE}" .
	;;
local)
	mapfile -t base_args < <(hack/build-base-images.sh go base $([[ "${TARGET}" == cuda ]] && echo node))
	if [[ "${TARGET}" == cpu ]]; then
		log "${TOOL} build -t ${IMAGE} (local base images: ${base_args[*]})"
		build "${flags[@]}" "${base_args[@]}" -t "${IMAGE}" .
		exit 0
	fi
	missing=()
	for b in "${CUDA_DEVEL_IMAGE}" "${CUDA_RUNTIME_IMAGE}"; do present "${b}" || missing+=("${b}"); done
	if [[ ${#missing[@]} -eq 0 ]]; then
		log "${TOOL} build --target runtime-cuda -t ${IMAGE} (local base images, CUDA images from local storage)"
		build "${flags[@]}" "${base_args[@]}" "${cuda_args[@]}" -t "${IMAGE}" .
		exit 0
	fi
	for stage in build ggml-fetch; do
		log "${TOOL} build --target ${stage} (local base images)"
		build "${flags[@]}" "${base_args[@]}" "${cuda_args[@]/--target=runtime-cuda/--target=${stage}}" -t "${IMAGE}-${stage}" .
	done
	log "STOPPED after the CPU stages (build, ggml-fetch): ${missing[*]} cannot be pulled here and is not built locally, so the ggml-cuda and runtime-cuda stages did not run and ${IMAGE} was not made"
	;;
*)
	log "KVPILOT_BASE_IMAGES=${BASES}: want auto, registry or local"
	exit 2
	;;
esac

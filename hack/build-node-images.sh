#!/usr/bin/env bash
# Builds the images the e2e suite's real node runs and saves them as image
# archives for containerd to load (nothing is pulled on that node):
#
#   NODE_IMG   kvpilot's image from the Dockerfile (hack/docker-build.sh):
#              the manager Deployment and the runtime pods use it
#   PAUSE_IMG  the pod sandbox image: test/cmd/pause, static, on scratch
#              (registry.k8s.io/pause cannot be pulled here)
#
# Usage: hack/build-node-images.sh OUT_DIR   (prints OUT_DIR)
# Env:   NODE_IMG (default kvpilot.local/kvpilot:dev), PAUSE_IMG (default
#        kvpilot.local/pause:dev), CONTAINER_TOOL, GO
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:?usage: $0 OUT_DIR}"
NODE_IMG="${NODE_IMG:-kvpilot.local/kvpilot:dev}"
PAUSE_IMG="${PAUSE_IMG:-kvpilot.local/pause:dev}"
GO="${GO:-go}"

log() { echo "build-node-images: $*" >&2; }

# shellcheck source=lib/container-tool.sh
source hack/lib/container-tool.sh
TOOL="$(container_tool)"
[[ -n "${TOOL}" ]] || { log "no docker daemon, podman or buildah found (apt-get install podman)"; exit 1; }

mkdir -p "${OUT}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# Everything but the directory goes to stderr: callers read stdout.
CONTAINER_TOOL="${TOOL}" hack/docker-build.sh cpu "${NODE_IMG}" >&2

log "building ${PAUSE_IMG}"
CGO_ENABLED=0 "${GO}" build -trimpath -ldflags="-s -w" -o "${work}/pause" ./test/cmd/pause
cat >"${work}/Containerfile" <<'EOF'
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
EOF
case "${TOOL}" in
docker) docker build -q -t "${PAUSE_IMG}" -f "${work}/Containerfile" "${work}" >/dev/null ;;
podman) podman build -q -t "${PAUSE_IMG}" -f "${work}/Containerfile" "${work}" >/dev/null ;;
buildah) buildah build -q -t "${PAUSE_IMG}" -f "${work}/Containerfile" "${work}" >/dev/null ;;
esac

save() {
	local img="$1" out="$2"
	rm -f "${out}"
	case "${TOOL}" in
	docker) docker save -o "${out}" "${img}" ;;
	podman) podman save -q --format docker-archive -o "${out}" "${img}" ;;
	buildah) buildah push -q "${img}" "docker-archive:${out}:${img}" ;;
	esac
}
log "saving ${NODE_IMG} and ${PAUSE_IMG} into ${OUT}"
save "${NODE_IMG}" "${OUT}/kvpilot.tar"
save "${PAUSE_IMG}" "${OUT}/pause.tar"
echo "${OUT}"

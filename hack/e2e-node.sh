#!/usr/bin/env bash
# Picks the node `make test-e2e` and `make demo` run their pods on, builds
# what a real node needs, and prints the environment for it as export lines
# (use: env="$(hack/e2e-node.sh)" && eval "${env}").
#
#   real     kube-scheduler and a kubelet (hack/setup-kube-components.sh),
#            containerd, runc and CNI from Debian's packages, kvpilot's
#            image from the Dockerfile and the pause image
#            (hack/build-node-images.sh); see test/localcluster/node.go
#   process  the fallback: test/nodeagent runs pods as processes
#   auto     real when this machine has every piece of it, else process,
#            saying which piece is missing (the default)
#
# A missing piece is judged before anything is built; a build that fails
# afterwards fails this script (it is a bug, not a missing piece).
#
# Env: KVPILOT_E2E_NODE (auto, real, process), NODE_IMG, PAUSE_IMG,
#      NODE_IMAGES_DIR (where the image archives go), GO, CONTAINER_TOOL,
#      ENVTEST_K8S_VERSION
set -euo pipefail
cd "$(dirname "$0")/.."

MODE="${KVPILOT_E2E_NODE:-auto}"
NODE_IMG="${NODE_IMG:-kvpilot.local/kvpilot:dev}"
PAUSE_IMG="${PAUSE_IMG:-kvpilot.local/pause:dev}"
NODE_IMAGES_DIR="${NODE_IMAGES_DIR:-bin/node-images}"
GO="${GO:-go}"

log() { echo "e2e-node: $*" >&2; }

fallback() {
	if [[ "${MODE}" == real ]]; then
		log "KVPILOT_E2E_NODE=real, but ${1}"
		exit 1
	fi
	log "FALLBACK to the process-based node: ${1}"
	printf 'export KVPILOT_E2E_NODE=process KVPILOT_E2E_FALLBACK=%q\n' "${1}"
	exit 0
}

case "${MODE}" in
process)
	printf 'export KVPILOT_E2E_NODE=process KVPILOT_E2E_FALLBACK=%q\n' "KVPILOT_E2E_NODE=process was asked for"
	exit 0
	;;
auto | real) ;;
*)
	log "KVPILOT_E2E_NODE=${MODE}: want auto, real or process"
	exit 2
	;;
esac

# The host's pieces (root, containerd, runc, CNI plugins, overlayfs,
# cgroups), judged by the same check the suite runs.
check="$(mktemp -d)"
trap 'rm -rf "${check}"' EXIT
"${GO}" build -o "${check}/localcluster" ./test/cmd/localcluster
if ! why="$("${check}/localcluster" --check-node 2>&1)"; then
	fallback "${why}"
fi
# shellcheck source=lib/container-tool.sh
source hack/lib/container-tool.sh
tool="$(container_tool)"
[[ -n "${tool}" ]] || fallback "no image builder: no docker daemon answers and neither podman nor buildah is installed (apt-get install podman buildah)"
if [[ "${tool}" != docker ]] && ! command -v mmdebstrap >/dev/null; then
	# Only needed when the registry's base images cannot be pulled; a
	# machine without a registry and without it cannot build the image.
	log "note: mmdebstrap is not installed: the image builds only if the Dockerfile's base images can be pulled"
fi

components="$(ENVTEST_K8S_VERSION="${ENVTEST_K8S_VERSION:-1.36.3}" GO="${GO}" nice hack/setup-kube-components.sh kube-controller-manager kube-scheduler kubelet)"
images="$(NODE_IMG="${NODE_IMG}" PAUSE_IMG="${PAUSE_IMG}" CONTAINER_TOOL="${tool}" GO="${GO}" hack/build-node-images.sh "${NODE_IMAGES_DIR}")"
images="$(cd "${images}" && pwd)"
log "real node: components in ${components}, images ${NODE_IMG} and ${PAUSE_IMG} in ${images}"
printf 'export KVPILOT_E2E_NODE=real KUBE_COMPONENTS=%q KVPILOT_NODE_IMAGES=%q KVPILOT_NODE_IMAGE=%q KVPILOT_PAUSE_IMAGE=%q\n' \
	"${components}" "${images}" "${NODE_IMG}" "${PAUSE_IMG}"

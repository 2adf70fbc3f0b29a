#!/usr/bin/env bash
# Builds the Kubernetes components the local end-to-end cluster needs beyond
# the envtest binaries (kube-controller-manager by default; kube-scheduler and
# kubelet on request, for the e2e suite's real node) from the Go module proxy into a cache outside the work tree, and
# prints the directory holding them. It builds them the way
# hack/setup-envtest.sh builds kube-apiserver: a throwaway module requiring
# k8s.io/kubernetes with every staging repository replaced by its published
# v0.x.y release. The module versions are the same, so the Go build cache of
# the kube-apiserver build is reused and a cold build takes a few minutes.
#
# A cached binary is reused as-is: the version is part of its directory.
#
# Usage: hack/setup-kube-components.sh [component...]   (prints the directory)
#        components: kube-controller-manager (default), kube-scheduler, kubelet
# Env:   ENVTEST_K8S_VERSION, KVPILOT_ENVTEST_CACHE
set -euo pipefail

K8S_VERSION="${ENVTEST_K8S_VERSION:-1.36.3}"
CACHE_ROOT="${KVPILOT_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/envtest}"
DIR="${CACHE_ROOT}/k8s-${K8S_VERSION}-components"
GO="${GO:-go}"
COMPONENTS=("$@")
[[ ${#COMPONENTS[@]} -gt 0 ]] || COMPONENTS=(kube-controller-manager)

log() { echo "setup-kube-components: $*" >&2; }
# shellcheck source=lib/k8s-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/k8s-build.sh"

have() {
	local c
	for c in "${COMPONENTS[@]}"; do
		[[ -x "${DIR}/${c}" ]] || return 1
	done
}

for c in "${COMPONENTS[@]}"; do
	case "${c}" in
	kube-controller-manager | kube-scheduler | kubelet) ;;
	*) log "unknown component ${c}"; exit 2 ;;
	esac
done

if have; then
	echo "${DIR}"
	exit 0
fi

mkdir -p "${DIR}"
exec 9>"${DIR}.lock"
flock 9
if have; then
	echo "${DIR}"
	exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export GOFLAGS="-mod=mod -buildvcs=false"
export GOWORK=off

# One module serves every component, so `go get` resolves the graph once.
k8s_module "${work}" "${COMPONENTS[@]}"
for c in "${COMPONENTS[@]}"; do
	[[ -x "${DIR}/${c}" ]] && continue
	log "building ${c} v${K8S_VERSION} (a few minutes on 2 cores with the kube-apiserver build cached)"
	k8s_build "${work}" "${c}" "${work}/${c}.bin"
	mv "${work}/${c}.bin" "${DIR}/${c}"
done
log "ready in ${DIR}"
echo "${DIR}"

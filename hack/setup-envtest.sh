#!/usr/bin/env bash
# Builds the envtest binaries (kube-apiserver and etcd) from the Go module
# proxy into a cache outside the work tree, and prints the directory to use as
# KUBEBUILDER_ASSETS. setup-envtest downloads prebuilt binaries from hosts that
# these machines cannot reach; building from source needs only the proxy.
#
# A cached directory is reused as-is: the binaries' versions are part of its
# path, so a stale cache cannot be picked up by mistake.
#
# Usage: hack/setup-envtest.sh            (prints the assets directory)
# Env:   ENVTEST_K8S_VERSION, ENVTEST_ETCD_VERSION, KVPILOT_ENVTEST_CACHE
set -euo pipefail

K8S_VERSION="${ENVTEST_K8S_VERSION:-1.36.3}"
ETCD_VERSION="${ENVTEST_ETCD_VERSION:-3.6.5}"
CACHE_ROOT="${KVPILOT_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/envtest}"
ASSETS="${CACHE_ROOT}/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}"
GO="${GO:-go}"

log() { echo "setup-envtest: $*" >&2; }
# shellcheck source=lib/k8s-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/k8s-build.sh"

have() { [[ -x "${ASSETS}/kube-apiserver" && -x "${ASSETS}/etcd" ]]; }

if have; then
	echo "${ASSETS}"
	exit 0
fi

mkdir -p "${ASSETS}"
# Two `make test` runs on one machine must not both spend ten minutes building.
exec 9>"${ASSETS}.lock"
flock 9
if have; then
	echo "${ASSETS}"
	exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export GOFLAGS="-mod=mod -buildvcs=false"
export GOWORK=off

build_etcd() {
	[[ -x "${ASSETS}/etcd" ]] && return 0
	log "building etcd v${ETCD_VERSION} (about 2 minutes on 2 cores)"
	local dir="${work}/etcd"
	mkdir -p "${dir}"
	(
		cd "${dir}"
		"${GO}" mod init envtest.local/etcd >/dev/null 2>&1
		quiet "${GO}" get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}"
		"${GO}" build -trimpath -o "${dir}/etcd.bin" go.etcd.io/etcd/server/v3
	)
	mv "${dir}/etcd.bin" "${ASSETS}/etcd"
}

build_kube_apiserver() {
	[[ -x "${ASSETS}/kube-apiserver" ]] && return 0
	log "building kube-apiserver v${K8S_VERSION} (about 8 minutes cold on 2 cores)"
	k8s_module "${work}/apiserver" kube-apiserver
	k8s_build "${work}/apiserver" kube-apiserver "${work}/apiserver/kube-apiserver.bin"
	mv "${work}/apiserver/kube-apiserver.bin" "${ASSETS}/kube-apiserver"
}

build_etcd
build_kube_apiserver
log "envtest binaries ready in ${ASSETS}"
echo "${ASSETS}"

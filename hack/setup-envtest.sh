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

# quiet runs a command and shows its output only when it fails: `go get`
# lists every module it downloads.
quiet() {
	local out
	if ! out="$("$@" 2>&1)"; then
		echo "${out}" >&2
		return 1
	fi
}

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
	local dir="${work}/apiserver"
	mkdir -p "${dir}"
	(
		cd "${dir}"
		"${GO}" mod init envtest.local/apiserver >/dev/null 2>&1
		# k8s.io/kubernetes points its staging repositories at ./staging/...,
		# which a module download does not contain; use the published
		# v0.x.y release of each instead (1.36.3 -> 0.36.3).
		local gomod staging
		gomod="$("${GO}" mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
		[[ -n "${gomod}" ]] || { log "cannot find go.mod of k8s.io/kubernetes@v${K8S_VERSION}"; exit 1; }
		staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._/-]*\) => \./staging/.*#\1#p' "${gomod}")"
		[[ -n "${staging}" ]] || { log "no staging replacements found in ${gomod}"; exit 1; }
		local args=() m
		for m in ${staging}; do
			args+=("-replace=${m}=${m}@v0.${K8S_VERSION#1.}")
		done
		"${GO}" mod edit "${args[@]}" "-require=k8s.io/kubernetes@v${K8S_VERSION}"
		quiet "${GO}" get "k8s.io/kubernetes/cmd/kube-apiserver@v${K8S_VERSION}"
		# Stamp the version a release build would, so /version tells the truth.
		local minor="${K8S_VERSION#1.}"
		minor="${minor%%.*}"
		local ldflags="" pkg
		for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ldflags+=" -X ${pkg}.gitVersion=v${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
		done
		"${GO}" build -trimpath -ldflags="${ldflags}" -o "${dir}/kube-apiserver.bin" k8s.io/kubernetes/cmd/kube-apiserver
	)
	mv "${dir}/kube-apiserver.bin" "${ASSETS}/kube-apiserver"
}

build_etcd
build_kube_apiserver
log "envtest binaries ready in ${ASSETS}"
echo "${ASSETS}"

#!/usr/bin/env bash
# Builds prometheus-adapter (sigs.k8s.io/prometheus-adapter, cmd/adapter)
# from the Go module proxy into a cache outside the work tree and prints
# the binary's path. The e2e suite runs it as a host process serving
# kvpilot_pool_recommended_replicas as an External metric to the HPA
# controller (test/e2e/prometheus_test.go).
#
# It builds in a copy of the module's own source with its own go.sum (the
# versions its release was tested with): `go install ...@v` would also ask
# the proxy for the module's version list, which it may refuse. A cached
# binary is reused as-is: the version is part of its path.
#
# Usage: hack/setup-prometheus-adapter.sh   (prints the binary's path)
# Env:   PROMETHEUS_ADAPTER_VERSION, KVPILOT_CACHE, GO
set -euo pipefail

VERSION="${PROMETHEUS_ADAPTER_VERSION:-v0.12.0}"
CACHE_ROOT="${KVPILOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot}"
BIN="${CACHE_ROOT}/prometheus-adapter-${VERSION}/adapter"
GO="${GO:-go}"

log() { echo "setup-prometheus-adapter: $*" >&2; }

if [[ -x "${BIN}" ]]; then
	echo "${BIN}"
	exit 0
fi
mkdir -p "$(dirname "${BIN}")"
exec 9>"${BIN}.lock"
flock 9
if [[ -x "${BIN}" ]]; then
	echo "${BIN}"
	exit 0
fi

export GOFLAGS="-mod=mod -buildvcs=false" GOWORK=off
log "downloading sigs.k8s.io/prometheus-adapter@${VERSION}"
src="$("${GO}" mod download -json "sigs.k8s.io/prometheus-adapter@${VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "${src}" ]] || { log "no source directory for sigs.k8s.io/prometheus-adapter@${VERSION}"; exit 1; }
work="$(mktemp -d)"
trap 'chmod -R u+w "${work}"; rm -rf "${work}"' EXIT
cp -r "${src}/." "${work}/"
chmod -R u+w "${work}"
log "building prometheus-adapter ${VERSION} (a few minutes on 2 cores)"
(cd "${work}" && CGO_ENABLED=0 nice "${GO}" build -trimpath -ldflags="-s -w" -o "${BIN}.tmp" ./cmd/adapter)
mv "${BIN}.tmp" "${BIN}"
log "ready: ${BIN}"
echo "${BIN}"

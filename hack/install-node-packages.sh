#!/usr/bin/env bash
# Installs the Debian packages the e2e suite's real node and the daemonless
# image builds need, where they are missing: containerd and runc (the
# container runtime), containernetworking-plugins (CNI bridge, host-local,
# loopback), podman and buildah (image builds without a Docker daemon) and
# mmdebstrap (base images built locally where no registry is reachable),
# and prometheus (the e2e suite's Prometheus scraping the manager and a
# pool; the test that needs it is skipped without it).
#
# It does nothing when every package is installed. Without root or apt it
# says so and exits 0: `make test-e2e` then falls back to the process-based
# node and names what is missing.
#
# Usage: hack/install-node-packages.sh
set -euo pipefail

PKGS=(containerd runc containernetworking-plugins podman buildah mmdebstrap iptables iproute2 prometheus)

log() { echo "install-node-packages: $*" >&2; }

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q "install ok installed" || missing+=("${p}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
	log "not root or no apt-get: not installing ${missing[*]}"
	exit 0
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# Builds the Dockerfile's base images locally, for machines that reach no
# container registry but reach Debian's packages and the Go module proxy, and
# loads them into podman's (or buildah's) image storage. It prints the
# --build-arg flags that point the Dockerfile at them, one per line.
#
#   go      GO_IMAGE (stands in for golang:1.26): Debian bookworm (mmdebstrap
#           --variant=minbase) with the Go toolchain of the module proxy's
#           golang.org/toolchain module in /usr/local/go. It trusts the CA
#           bundle of the machine that built it (/etc/ssl/certs), so `go mod
#           download` inside the build works behind the same TLS-inspecting
#           proxy as the host. It is a build stage only: nothing of it
#           reaches the final image.
#   base    BASE_IMAGE (stands in for gcr.io/distroless/base-debian12:nonroot):
#           the packages of distroless/base extracted without running their
#           scripts (libc6, libssl3, ca-certificates, tzdata, netbase,
#           base-files), Mozilla's CA bundle from Debian's ca-certificates,
#           /etc/passwd and /etc/group with root, nobody and nonroot
#           (65532), a sticky /tmp. No shell, no package manager.
#   node    NODE_IMAGE (stands in for node:22-bookworm-slim, only the CUDA
#           target's ggml-fetch stage uses it): bookworm minbase with
#           Debian's nodejs and npm, trusting the host's CA bundle like go.
#
# Each root file system is cached as a tarball under
# ~/.cache/kvpilot/images, keyed by this script's content and the versions,
# so a second run (or a fresh image storage) only imports it. A lock makes
# a concurrent run wait.
#
# Usage: hack/build-base-images.sh [go] [base] [node]   (default: go base)
# Env:   CONTAINER_TOOL (podman or buildah; default: podman, else buildah),
#        KVPILOT_GO_VERSION (default 1.26.8), KVPILOT_DEBIAN_SUITE (bookworm),
#        KVPILOT_DEBIAN_MIRROR, KVPILOT_IMAGES_CACHE
set -euo pipefail

GO_VERSION="${KVPILOT_GO_VERSION:-1.26.8}"
SUITE="${KVPILOT_DEBIAN_SUITE:-bookworm}"
MIRROR="${KVPILOT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${KVPILOT_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvpilot/images}"
GO="${GO:-go}"
WANT=("$@")
[[ ${#WANT[@]} -gt 0 ]] || WANT=(go base)

log() { echo "build-base-images: $*" >&2; }

TOOL="${CONTAINER_TOOL:-}"
if [[ -z "${TOOL}" ]]; then
	if command -v podman >/dev/null; then TOOL=podman; elif command -v buildah >/dev/null; then TOOL=buildah; fi
fi
case "${TOOL}" in
podman | buildah) ;;
*) log "needs podman or buildah (CONTAINER_TOOL=${TOOL:-unset})"; exit 1 ;;
esac
command -v mmdebstrap >/dev/null || { log "needs mmdebstrap (apt-get install mmdebstrap)"; exit 1; }
[[ "$(uname -m)" == x86_64 ]] || { log "builds linux/amd64 bases only (this is $(uname -m))"; exit 1; }

key="$(sha256sum <"${BASH_SOURCE[0]}" | cut -c1-12)"
mkdir -p "${CACHE}"
exec 9>"${CACHE}/.lock"
flock 9

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

image_exists() {
	if [[ "${TOOL}" == podman ]]; then podman image exists "$1"; else buildah inspect --type image "$1" >/dev/null 2>&1; fi
}

# import_rootfs TARBALL NAME [KEY=VALUE config...] makes an image of a root
# file system tarball with the given ENV, USER and WORKDIR.
import_rootfs() {
	local tar="$1" name="$2" ctr kv
	shift 2
	ctr="$(buildah from scratch 2>/dev/null)" || {
		# podman alone: import with --change lines.
		local changes=()
		for kv in "$@"; do changes+=(--change "${kv}"); done
		podman import "${changes[@]}" "${tar}" "${name}" >/dev/null
		return
	}
	buildah add "${ctr}" "${tar}" / >/dev/null
	for kv in "$@"; do
		case "${kv}" in
		"ENV "*) buildah config --env "${kv#ENV }" "${ctr}" ;;
		"USER "*) buildah config --user "${kv#USER }" "${ctr}" ;;
		"WORKDIR "*) buildah config --workingdir "${kv#WORKDIR }" "${ctr}" ;;
		esac
	done
	buildah commit --rm -q "${ctr}" "${name}" >/dev/null
	# buildah and podman share /var/lib/containers/storage when both are
	# installed, so the image is visible to either.
}

# debootstrap_tar OUT VARIANT PACKAGES HOOK... runs mmdebstrap into OUT.
debootstrap_tar() {
	local out="$1" variant="$2" include="$3"
	shift 3
	# mmdebstrap picks the output format by the name's extension.
	local tmp="${out%.tar}.partial.tar"
	mmdebstrap --quiet --variant="${variant}" --architectures=amd64 --include="${include}" \
		--aptopt='Acquire::Retries "3"' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
		"$@" "${SUITE}" "${tmp}" "${MIRROR}" >&2
	mv "${tmp}" "${out}"
}

# base REF ARG BUILDER CONFIG... makes sure localhost/kvpilot-base/REF is in
# the image storage (BUILDER TARBALL writes its root file system when the
# cache lacks it; CONFIG as for import_rootfs) and prints the --build-arg
# setting ARG to it.
base() {
	local ref="$1" arg="$2" builder="$3"
	shift 3
	local name="localhost/kvpilot-base/${ref}" tar="${CACHE}/${ref//[:\/]/-}.tar"
	if ! image_exists "${name}"; then
		[[ -f "${tar}" ]] || "${builder}" "${tar}"
		import_rootfs "${tar}" "${name}" "$@"
	fi
	echo "--build-arg=${arg}=${name}"
}

go_rootfs() {
	log "building the Go ${GO_VERSION} base (Debian ${SUITE} minbase and golang.org/toolchain; about 2 minutes)"
	# A module zip keeps no file modes: the toolchain's programs are made
	# executable in the image (as the go command does when it switches
	# toolchains).
	local dir
	dir="$(cd "${work}" && GOFLAGS=-mod=mod GOTOOLCHAIN=local "${GO}" mod download -json "golang.org/toolchain@v0.0.1-go${GO_VERSION}.linux-amd64" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
	[[ -f "${dir}/bin/go" ]] || { log "golang.org/toolchain@v0.0.1-go${GO_VERSION}.linux-amd64 has no bin/go (${dir})"; exit 1; }
	debootstrap_tar "$1" minbase ca-certificates \
		--customize-hook="cp -a '${dir}' \"\$1/usr/local/go\" && chmod -R u+w \"\$1/usr/local/go\"" \
		--customize-hook='chmod 755 "$1"/usr/local/go/bin/* "$1"/usr/local/go/pkg/tool/*/*' \
		--customize-hook='mkdir -p "$1/go/bin" "$1/go/pkg" && chmod -R 777 "$1/go"' \
		--customize-hook='cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/ca-certificates.crt"' \
		--customize-hook='rm -rf "$1/var/lib/apt/lists/"* "$1/var/cache/apt/"*'
}

distroless_rootfs() {
	log "building the distroless-like base (Debian ${SUITE} packages extracted; about a minute)"
	# The passwd and group lines of distroless: root, nobody and nonroot
	# (65532, the user the Dockerfile runs as).
	printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
		'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"${work}/passwd"
	printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' >"${work}/group"
	debootstrap_tar "$1" extract libc6,libssl3,ca-certificates,tzdata,netbase,base-files \
		--customize-hook="cp '${work}/passwd' '${work}/group' \"\$1/etc/\"" \
		--customize-hook='mkdir -p "$1/etc/ssl/certs" && cat "$1"/usr/share/ca-certificates/mozilla/*.crt >"$1/etc/ssl/certs/ca-certificates.crt"' \
		--customize-hook='mkdir -p "$1/home/nonroot" "$1/root" "$1/tmp" && chown 65532:65532 "$1/home/nonroot" && chmod 1777 "$1/tmp"' \
		--customize-hook='rm -rf "$1/var/lib/apt" "$1/var/cache/apt" "$1/var/lib/dpkg" "$1/var/log/"*'
}

node_rootfs() {
	log "building the Node.js base (Debian ${SUITE} minbase, nodejs, npm; about 3 minutes)"
	debootstrap_tar "$1" minbase ca-certificates,nodejs,npm \
		--customize-hook='cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/ca-certificates.crt"' \
		--customize-hook='rm -rf "$1/var/lib/apt/lists/"* "$1/var/cache/apt/"*'
}

SYSTEM_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

for w in "${WANT[@]}"; do
	case "${w}" in
	go) base "golang:${GO_VERSION}-${SUITE}-${key}" GO_IMAGE go_rootfs "ENV PATH=/go/bin:/usr/local/go/bin:${SYSTEM_PATH}" \
		"ENV GOPATH=/go" "ENV GOTOOLCHAIN=local" "WORKDIR /go" ;;
	base) base "distroless-base:${SUITE}-${key}" BASE_IMAGE distroless_rootfs "ENV PATH=${SYSTEM_PATH}" \
		"ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" "USER 65532:65532" "WORKDIR /home/nonroot" ;;
	node) base "node:${SUITE}-${key}" NODE_IMAGE node_rootfs "ENV PATH=${SYSTEM_PATH}" "ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt" ;;
	*) log "unknown base ${w} (go, base, node)"; exit 2 ;;
	esac
done

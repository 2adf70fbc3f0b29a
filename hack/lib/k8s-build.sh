# Shared by hack/setup-envtest.sh and hack/setup-kube-components.sh: how to
# build Kubernetes components from the Go module proxy. Source it; it needs
# K8S_VERSION and GO set, and a log function.

# quiet runs a command and shows its output only when it fails: `go get`
# lists every module it downloads.
quiet() {
	local out
	if ! out="$("$@" 2>&1)"; then
		echo "${out}" >&2
		return 1
	fi
}

# k8s_module DIR COMPONENT... makes DIR a throwaway module that can build
# k8s.io/kubernetes/cmd/COMPONENT. k8s.io/kubernetes points its staging
# repositories at ./staging/..., which a module download does not contain;
# each is replaced by its published v0.x.y release (1.36.3 -> 0.36.3).
k8s_module() {
	local dir="$1" c m gomod staging
	shift
	mkdir -p "${dir}"
	(
		cd "${dir}"
		"${GO}" mod init envtest.local/k8s >/dev/null 2>&1
		gomod="$("${GO}" mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
		[[ -n "${gomod}" ]] || { log "cannot find go.mod of k8s.io/kubernetes@v${K8S_VERSION}"; exit 1; }
		staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._/-]*\) => \./staging/.*#\1#p' "${gomod}")"
		[[ -n "${staging}" ]] || { log "no staging replacements found in ${gomod}"; exit 1; }
		local args=()
		for m in ${staging}; do
			args+=("-replace=${m}=${m}@v0.${K8S_VERSION#1.}")
		done
		"${GO}" mod edit "${args[@]}" "-require=k8s.io/kubernetes@v${K8S_VERSION}"
		for c in "$@"; do
			quiet "${GO}" get "k8s.io/kubernetes/cmd/${c}@v${K8S_VERSION}"
		done
	)
}

# k8s_build DIR COMPONENT OUT builds a component of the module in DIR into
# OUT, stamped with the version a release build would carry, so /version
# and --version tell the truth.
k8s_build() {
	local dir="$1" c="$2" out="$3" minor ldflags="" pkg
	minor="${K8S_VERSION#1.}"
	minor="${minor%%.*}"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X ${pkg}.gitVersion=v${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
	done
	(cd "${dir}" && "${GO}" build -trimpath -ldflags="${ldflags}" -o "${out}" "k8s.io/kubernetes/cmd/${c}")
}

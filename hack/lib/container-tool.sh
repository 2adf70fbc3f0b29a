# Shared by the image scripts: which tool builds images. Source it.

# container_tool prints CONTAINER_TOOL when set, else docker when its daemon
# answers, else podman, else buildah; it prints nothing when none is there.
container_tool() {
	if [[ -n "${CONTAINER_TOOL:-}" ]]; then
		echo "${CONTAINER_TOOL}"
	elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
		echo docker
	elif command -v podman >/dev/null; then
		echo podman
	elif command -v buildah >/dev/null; then
		echo buildah
	fi
}

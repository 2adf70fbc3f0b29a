# Shared by hack/build-ggml-cuda.sh and hack/build-llama-server-cuda.sh: the
# llama.cpp source of the release node-llama-cpp pins (its npm package
# ships it as llama/gitRelease.bundle), so that what they build is the same
# release as hack/setup-ggml.sh's libraries. Source it; it needs a log
# function.

# llama_source WORKDIR VERSION prints the root of the llama.cpp source tree
# unpacked under WORKDIR from node-llama-cpp@VERSION (needs npm and git).
llama_source() {
	local work="$1" version="$2"
	if ! command -v npm >/dev/null || ! command -v git >/dev/null; then
		log "npm and git are needed to fetch the source"
		return 1
	fi
	log "fetching node-llama-cpp@${version} (its llama.cpp source bundle)"
	(cd "${work}" && npm pack --silent "node-llama-cpp@${version}" >/dev/null) || return 1
	tar -xzf "${work}"/node-llama-cpp-*.tgz -C "${work}" package/llama/gitRelease.bundle || return 1
	git clone -q "${work}/package/llama/gitRelease.bundle" "${work}/llama.cpp" 2>/dev/null || return 1
	echo "${work}/llama.cpp"
}

# require_tools TOOL... fails, naming what to install, when a tool is
# missing.
require_tools() {
	local tool
	for tool in "$@"; do
		if ! command -v "${tool}" >/dev/null; then
			log "${tool} is needed (install the CUDA toolkit and CMake)"
			return 1
		fi
	done
}

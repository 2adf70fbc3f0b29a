#!/usr/bin/env bash
# Runs the README's quick-start commands that need no cluster, as a reader
# would paste them from a fresh clone: each fenced block that follows a
# marker comment in README.md.
#
#   <!-- quickstart: serve port=N -->  started in the background; the next
#                                      blocks wait for GET /health on port N
#   <!-- quickstart: client -->        run once the server is up; must exit
#                                      0 and print a JSON answer with no
#                                      "error"; then the servers stop
#   <!-- quickstart: run -->           run; must exit 0
#
# Each block runs with bash -e from the repository root. A server has
# KVPILOT_QUICKSTART_START_TIMEOUT seconds (default 600: `make run`
# compiles the runtime first) to answer; a client or run block 300.
# Fails when the README has no serve and client block, so the quick start
# cannot silently lose its check.
#
# KVPILOT_QUICKSTART_CLONE=1 runs them in a fresh clone of HEAD (committed
# files only, as a reader gets them) instead of this working tree.
#
# Usage: hack/readme-quickstart.sh [README.md]   (make test-readme)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
START_TIMEOUT=${KVPILOT_QUICKSTART_START_TIMEOUT:-600}
log() { echo "readme-quickstart: $*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvpilot-quickstart.XXXXXX")
if [ "${KVPILOT_QUICKSTART_CLONE:-0}" = 1 ]; then
	git clone -q "${ROOT}" "${WORK}/clone"
	ROOT=${WORK}/clone
	log "in a fresh clone of $(git -C "${ROOT}" rev-parse --short HEAD) at ${ROOT}"
fi
README=${1:-${ROOT}/README.md}
servers=()
stop_servers() {
	for pid in "${servers[@]}"; do
		# Each server runs in its own process group (setsid): end the group,
		# which holds `make`, `go run` and the runtime it started.
		kill -TERM -- "-${pid}" 2>/dev/null || true
	done
	for pid in "${servers[@]}"; do wait "${pid}" 2>/dev/null || true; done
	servers=()
}
cleanup() {
	stop_servers
	rm -rf "${WORK}"
}
trap cleanup EXIT

# Split the README into numbered blocks: BLOCKS/N.kind, BLOCKS/N.arg,
# BLOCKS/N.sh.
BLOCKS=${WORK}/blocks
mkdir "${BLOCKS}"
awk -v dir="${BLOCKS}" '
	/^<!-- quickstart: [a-z]+/ {
		kind = $3; arg = ($4 == "-->") ? "" : $4
		want = 1; next
	}
	want && /^```/ && !inblock { inblock = 1; n++; f = dir "/" n ".sh"; printf "" > f
		print kind > (dir "/" n ".kind"); print arg > (dir "/" n ".arg"); next }
	inblock && /^```/ { inblock = 0; want = 0; close(f); next }
	inblock { print >> f }
' "${README}"

count=$(find "${BLOCKS}" -name '*.sh' | wc -l)
kinds=$(cat "${BLOCKS}"/*.kind 2>/dev/null | sort -u | tr '\n' ' ')
case "${kinds}" in
*client*serve*) ;;
*) log "FAIL: ${README} has no quickstart serve and client blocks (found: ${kinds:-none})"; exit 1 ;;
esac

passed=0
port=
for i in $(seq 1 "${count}"); do
	kind=$(cat "${BLOCKS}/${i}.kind")
	arg=$(cat "${BLOCKS}/${i}.arg")
	block="${BLOCKS}/${i}.sh"
	log "block ${i} (${kind}${arg:+ ${arg}}):"
	sed 's/^/    /' "${block}" >&2
	case "${kind}" in
	serve)
		port=${arg#port=}
		if curl -s -o /dev/null "http://127.0.0.1:${port}/health"; then
			log "FAIL: something already listens on port ${port}"
			exit 1
		fi
		(cd "${ROOT}" && exec setsid bash -e "${block}") >"${WORK}/server-${i}.log" 2>&1 &
		servers+=($!)
		deadline=$((SECONDS + START_TIMEOUT))
		until curl -sf -o /dev/null "http://127.0.0.1:${port}/health"; do
			if ! kill -0 "${servers[-1]}" 2>/dev/null || [ "${SECONDS}" -ge "${deadline}" ]; then
				tail -20 "${WORK}/server-${i}.log" >&2
				log "FAIL: the server of block ${i} did not answer on port ${port}"
				exit 1
			fi
			sleep 1
		done
		log "server up on port ${port} after ${SECONDS}s"
		passed=$((passed + 1))
		;;
	client)
		if ! out=$(cd "${ROOT}" && timeout 300 bash -e "${block}" 2>&1); then
			echo "${out}" >&2
			log "FAIL: block ${i} exited non-zero"
			exit 1
		fi
		echo "${out}" | head -c 600 >&2
		echo >&2
		if ! printf '%s' "${out}" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(1 if "error" in d or not d.get("choices") else 0)'; then
			log "FAIL: block ${i} did not print a JSON answer with choices"
			exit 1
		fi
		stop_servers
		passed=$((passed + 1))
		;;
	run)
		if ! (cd "${ROOT}" && timeout 300 bash -e "${block}") >&2; then
			log "FAIL: block ${i} exited non-zero"
			exit 1
		fi
		passed=$((passed + 1))
		;;
	*)
		log "FAIL: unknown quickstart kind ${kind}"
		exit 1
		;;
	esac
done
log "PASS: ${passed} blocks of ${README} ran as written"

#!/usr/bin/env bash
# `make demo` / `make demo-down`: kvpilot on a local cluster of processes.
#
#   hack/demo.sh up     build the binaries, start the cluster (etcd,
#                       kube-apiserver, kube-controller-manager, the node
#                       agent, kvpilot's manager) in the background, install
#                       the CRDs and a sample pool, wait until it serves
#   hack/demo.sh down   stop everything and remove the run directory
#
# Env: DEMO_DIR (run directory), KUBEBUILDER_ASSETS (etcd, kube-apiserver),
#      KUBE_COMPONENTS (kube-controller-manager), GO.
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO_DIR="${DEMO_DIR:-${TMPDIR:-/tmp}/kvpilot-demo}"
GO="${GO:-go}"
PID_FILE="${DEMO_DIR}/localcluster.pid"
export KUBECONFIG="${DEMO_DIR}/kubeconfig"

log() { echo "demo: $*" >&2; }

running() { [[ -f "${PID_FILE}" ]] && kill -0 "$(cat "${PID_FILE}")" 2>/dev/null; }

up() {
	: "${KUBEBUILDER_ASSETS:?set KUBEBUILDER_ASSETS (make demo does)}"
	: "${KUBE_COMPONENTS:?set KUBE_COMPONENTS (make demo does)}"
	if running; then
		log "already running (pid $(cat "${PID_FILE}")); make demo-down stops it"
	else
		rm -rf "${DEMO_DIR}"
		mkdir -p "${DEMO_DIR}/bin"
		log "building the runtime, the manager and the local cluster"
		"${GO}" build -o "${DEMO_DIR}/bin/kvpilot-runtime" ./cmd/runtime
		"${GO}" build -o "${DEMO_DIR}/bin/manager" ./cmd/manager
		"${GO}" build -o "${DEMO_DIR}/bin/localcluster" ./test/cmd/localcluster
		log "starting the cluster in ${DEMO_DIR}"
		setsid nohup "${DEMO_DIR}/bin/localcluster" --run-dir "${DEMO_DIR}" \
			--assets-dir "${KUBEBUILDER_ASSETS}" --components-dir "${KUBE_COMPONENTS}" \
			--runtime-bin "${DEMO_DIR}/bin/kvpilot-runtime" --manager-bin "${DEMO_DIR}/bin/manager" \
			>"${DEMO_DIR}/localcluster.log" 2>&1 </dev/null &
		echo $! >"${PID_FILE}"
		for _ in $(seq 1 240); do
			[[ -f "${DEMO_DIR}/ready" ]] && break
			if ! running; then
				cat "${DEMO_DIR}/localcluster.log" >&2
				log "the cluster did not start"
				exit 1
			fi
			sleep 0.5
		done
		[[ -f "${DEMO_DIR}/ready" ]] || { log "the cluster was not ready in 2 minutes; see ${DEMO_DIR}/logs"; exit 1; }
	fi

	log "installing the CRDs (config/crd, as config/default does) and a sample pool"
	kubectl apply --server-side -k config/crd >/dev/null
	kubectl wait --for condition=Established --timeout=60s crd/inferencepools.serving.kvpilot.dev crd/schedulerpolicies.serving.kvpilot.dev >/dev/null
	kubectl apply -f config/samples/serving_v1alpha1_schedulerpolicy.yaml -f config/samples/serving_v1alpha1_inferencepool_cpu.yaml
	log "waiting for the pool's pods"
	kubectl wait --for condition=Available --timeout=180s kvpool/tiny-cpu >/dev/null
	kubectl get kvpool
	kubectl get pods -o wide
	local ip
	ip="$(kubectl get pods -l serving.kvpilot.dev/pool=tiny-cpu -o jsonpath='{.items[0].status.podIP}')"
	cat <<MSG

kvpilot is running on a local cluster (pods are processes of the runtime binary,
each on its own loopback address). Try:

  export KUBECONFIG=${KUBECONFIG}
  kubectl get kvpool,pods -o wide
  curl -s http://${ip}:8000/v1/chat/completions -H 'Content-Type: application/json' \\
    -H 'X-Program-Id: agent-1' \\
    -d '{"model":"tiny","messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}'
  kubectl scale kvpool/tiny-cpu --replicas=3
  kubectl get kvpool tiny-cpu -o jsonpath='{.status.capacity}'

The built-in tiny model has random weights: its text is noise.
Logs: ${DEMO_DIR}/logs (control plane, node agent, manager) and
${DEMO_DIR}/pods/<namespace>_<pod>_<uid>/runtime.log (each pod).
Tear it down with: make demo-down
MSG
}

down() {
	if running; then
		local pid
		pid="$(cat "${PID_FILE}")"
		log "stopping the local cluster (pid ${pid})"
		kill -TERM "${pid}"
		for _ in $(seq 1 120); do
			kill -0 "${pid}" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "${pid}" 2>/dev/null; then
			log "still running after 60 s; killing it"
			kill -KILL "${pid}"
		fi
	fi
	rm -rf "${DEMO_DIR}"
	log "stopped"
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac

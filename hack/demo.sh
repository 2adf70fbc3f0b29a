#!/usr/bin/env bash
# `make demo` / `make demo-down`: kvpilot on a local cluster.
#
#   hack/demo.sh up     build the binaries, start the cluster (etcd,
#                       kube-apiserver, kube-controller-manager and a node)
#                       in the background, install kvpilot and a sample
#                       pool, wait until it serves
#   hack/demo.sh down   stop everything, undo what the node set up on the
#                       machine and remove the run directory
#
# The node is the one hack/e2e-node.sh picked (KVPILOT_E2E_NODE): real (a
# kubelet with containerd, runc and CNI running the images of
# KVPILOT_NODE_IMAGES; kvpilot installed with `kubectl apply -k
# config/default`, its image set in config/manager as a user does) or
# process (the fallback: the node agent runs pods as processes, the manager
# runs as a process, the CRDs are applied from config/crd).
#
# Env: DEMO_DIR (run directory), KUBEBUILDER_ASSETS (etcd, kube-apiserver),
#      KUBE_COMPONENTS (kube-controller-manager, and kube-scheduler and the
#      kubelet for a real node), KVPILOT_E2E_NODE, KVPILOT_NODE_IMAGES,
#      KVPILOT_NODE_IMAGE, KVPILOT_PAUSE_IMAGE, GO.
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO_DIR="${DEMO_DIR:-${TMPDIR:-/tmp}/kvpilot-demo}"
GO="${GO:-go}"
NODE="${KVPILOT_E2E_NODE:-process}"
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
		local node_args=()
		if [[ "${NODE}" == real ]]; then
			: "${KVPILOT_NODE_IMAGES:?set KVPILOT_NODE_IMAGES (make demo does, through hack/e2e-node.sh)}"
			log "building the local cluster (real node: images in ${KVPILOT_NODE_IMAGES})"
			node_args=(--node real --images-dir "${KVPILOT_NODE_IMAGES}" --pause-image "${KVPILOT_PAUSE_IMAGE:-kvpilot.local/pause:dev}")
		else
			log "FALLBACK to the process-based node: ${KVPILOT_E2E_FALLBACK:-KVPILOT_E2E_NODE is not real}"
			log "building the runtime, the manager and the local cluster"
			"${GO}" build -o "${DEMO_DIR}/bin/kvpilot-runtime" ./cmd/runtime
			"${GO}" build -o "${DEMO_DIR}/bin/manager" ./cmd/manager
			node_args=(--node process --runtime-bin "${DEMO_DIR}/bin/kvpilot-runtime" --manager-bin "${DEMO_DIR}/bin/manager")
		fi
		"${GO}" build -o "${DEMO_DIR}/bin/localcluster" ./test/cmd/localcluster
		log "starting the cluster in ${DEMO_DIR}"
		setsid nohup "${DEMO_DIR}/bin/localcluster" --run-dir "${DEMO_DIR}" \
			--assets-dir "${KUBEBUILDER_ASSETS}" --components-dir "${KUBE_COMPONENTS}" "${node_args[@]}" \
			>"${DEMO_DIR}/localcluster.log" 2>&1 </dev/null &
		echo $! >"${PID_FILE}"
		for _ in $(seq 1 600); do
			[[ -f "${DEMO_DIR}/ready" ]] && break
			if ! running; then
				cat "${DEMO_DIR}/localcluster.log" >&2
				log "the cluster did not start"
				exit 1
			fi
			sleep 0.5
		done
		[[ -f "${DEMO_DIR}/ready" ]] || { log "the cluster was not ready in 5 minutes; see ${DEMO_DIR}/logs"; exit 1; }
	fi

	local pool="config/samples/serving_v1alpha1_inferencepool_cpu.yaml"
	if [[ -f "${DEMO_DIR}/node/kubelet-config.yaml" ]]; then
		log "installing kvpilot as a user does: image ${KVPILOT_NODE_IMAGE:-kvpilot.local/kvpilot:dev} in config/manager, kubectl apply -k config/default"
		rm -rf "${DEMO_DIR}/config"
		cp -r config "${DEMO_DIR}/config"
		local img="${KVPILOT_NODE_IMAGE:-kvpilot.local/kvpilot:dev}"
		sed -i "s|^  newName: .*|  newName: ${img%:*}|; s|^  newTag: .*|  newTag: ${img##*:}|" "${DEMO_DIR}/config/manager/kustomization.yaml"
		kubectl apply --server-side -k "${DEMO_DIR}/config/default" >/dev/null
		kubectl -n kvpilot-system rollout status deployment/kvpilot-controller-manager --timeout=180s
		# The node has this machine's cores; the sample's pods ask for one
		# each, which two pods and the manager do not fit on two cores.
		if [[ "$(nproc)" -lt 3 ]]; then
			log "this node has $(nproc) cores: the sample pool's pods ask for 250m CPU instead of 1"
			sed 's/cpu: "1"/cpu: 250m/' "${pool}" >"${DEMO_DIR}/pool.yaml"
			pool="${DEMO_DIR}/pool.yaml"
		fi
	else
		log "installing the CRDs (config/crd, as config/default does)"
		kubectl apply --server-side -k config/crd >/dev/null
	fi
	kubectl wait --for condition=Established --timeout=60s crd/inferencepools.serving.kvpilot.dev crd/schedulerpolicies.serving.kvpilot.dev >/dev/null
	log "applying the agents policy and the tiny-cpu pool"
	kubectl apply -f config/samples/serving_v1alpha1_schedulerpolicy.yaml -f "${pool}"
	log "waiting for the pool's pods"
	kubectl wait --for condition=Available --timeout=180s kvpool/tiny-cpu >/dev/null
	kubectl get kvpool
	kubectl get pods -o wide
	local ip
	ip="$(kubectl get pods -l serving.kvpilot.dev/pool=tiny-cpu -o jsonpath='{.items[0].status.podIP}')"
	local where logs
	if [[ -f "${DEMO_DIR}/node/kubelet-config.yaml" ]]; then
		where="a real node: kubelet, containerd and runc, pods on the bridge kvpilot0 (10.250.0.0/24);
the manager runs in kvpilot-system as config/default installs it"
		logs="Logs: ${DEMO_DIR}/logs (control plane, containerd, kubelet) and
kubectl logs (pods; the manager: kubectl -n kvpilot-system logs deploy/kvpilot-controller-manager)."
	else
		where="the process-based node: each pod is a process of the runtime binary on
its own loopback address"
		logs="Logs: ${DEMO_DIR}/logs (control plane, node agent, manager) and
${DEMO_DIR}/pods/<namespace>_<pod>_<uid>/runtime.log (each pod)."
	fi
	cat <<MSG

kvpilot is running on a local cluster (${where}). Try:

  export KUBECONFIG=${KUBECONFIG}
  kubectl get kvpool,pods -o wide
  curl -s http://${ip}:8000/v1/chat/completions -H 'Content-Type: application/json' \\
    -H 'X-Program-Id: agent-1' \\
    -d '{"model":"tiny","messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}'
  kubectl scale kvpool/tiny-cpu --replicas=3
  kubectl get kvpool tiny-cpu -o jsonpath='{.status.capacity}'

The built-in tiny model has random weights: its text is noise.
${logs}
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
	# A cluster killed before its teardown leaves its real node's mounts
	# (containers' root file systems, pods' volumes) under the directory;
	# the next real node's start kills what is left in its cgroups and
	# removes its bridge and firewall rules.
	if command -v findmnt >/dev/null; then
		findmnt -rn -o TARGET | awk -v d="${DEMO_DIR}/" 'index($0, d) == 1' | sort -r | xargs -r -d '\n' umount -l 2>/dev/null || true
	fi
	rm -rf "${DEMO_DIR}"
	log "stopped"
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac

# kvpilot Makefile. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
BIN ?= $(CURDIR)/bin
GOFLAGS_TEST ?= -count=1
# Fuzz targets' seed corpora run as ordinary tests in `make test`; `make fuzz`
# explores further.
FUZZTIME ?= 30s
# Size of `make bench-agents`: full (the scenarios as docs/benchmarks.md
# defines them, S4 on 16 pods), large (S4 on 64 pods: hours on 2 cores) or
# small (half-length runs, S3 and S4 on 8 pods).
AGENTS_SIZE ?= full

# Image built by `make docker-build`; it holds both the manager and the runtime.
IMG ?= kvpilot:latest
# Runtime image for GPU pools (`make docker-build-cuda`): ggml's CUDA build next to the runtime.
IMG_CUDA ?= kvpilot:cuda
# docker, podman or buildah; empty picks docker when its daemon answers, else
# podman, else buildah (hack/docker-build.sh).
CONTAINER_TOOL ?=

# Pinned tools, installed into $(BIN) under a versioned name so a new pin
# reinstalls.
CONTROLLER_TOOLS_VERSION ?= v0.23.0
CONTROLLER_GEN ?= $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
# Helm, for `make test`'s chart checks (test/helm: helm lint, helm template
# against kubectl kustomize, server-side dry-run on envtest), built from the
# Go module proxy (~5 min once on 2 cores).
HELM_VERSION ?= v3.22.0
HELM ?= $(BIN)/helm-$(HELM_VERSION)
# kustomize, the other side of those checks, so they need no kubectl
# (~2 min once). v5.7.1: the newest that builds with Go 1.26.
KUSTOMIZE_VERSION ?= v5.7.1
KUSTOMIZE ?= $(BIN)/kustomize-$(KUSTOMIZE_VERSION)

# The envtest binaries (kube-apiserver, etcd) are built from source into a
# cache outside the tree and reused; see hack/setup-envtest.sh.
ENVTEST_K8S_VERSION ?= 1.36.3
ENVTEST_ETCD_VERSION ?= 3.6.5
SETUP_ENVTEST = ENVTEST_K8S_VERSION=$(ENVTEST_K8S_VERSION) ENVTEST_ETCD_VERSION=$(ENVTEST_ETCD_VERSION) GO=$(GO) hack/setup-envtest.sh
# The local end-to-end cluster also needs kube-controller-manager, built the
# same way into the same cache; see hack/setup-kube-components.sh.
SETUP_KUBE_COMPONENTS = ENVTEST_K8S_VERSION=$(ENVTEST_K8S_VERSION) GO=$(GO) hack/setup-kube-components.sh
# ggml's prebuilt libraries (the ggml executor's kernels) come from the npm
# packages of node-llama-cpp into a cache outside the tree; see
# hack/setup-ggml.sh.
GGML_NLC_VERSION ?= 3.22.1
SETUP_GGML = KVPILOT_GGML_NLC_VERSION=$(GGML_NLC_VERSION) hack/setup-ggml.sh
# llama.cpp, from the same release bundle: the greedy parity test of `make
# test` and the executor benchmarks. `make test` goes on without it (the
# test skips) when npm fails, and asks npm to fail fast (no retries: an
# unreachable registry otherwise costs 2⅓ minutes a run).
SETUP_LLAMA_CPP = KVPILOT_GGML_NLC_VERSION=$(GGML_NLC_VERSION) hack/setup-llama-cpp.sh
# Where `make demo` keeps the local cluster's files while it runs.
DEMO_DIR ?= $(or $(TMPDIR),/tmp)/kvpilot-demo
E2E_TIMEOUT ?= 20m
# Which e2e tests to run (go test -run).
E2E_RUN ?= .
# The node of `make test-e2e` and `make demo`: real (kubelet, containerd,
# runc, CNI; images from the Dockerfile; the manager in the cluster),
# process (the node agent's pods as processes, the fallback) or auto (real
# when this machine has every piece, else process, saying which is missing).
# See hack/e2e-node.sh.
E2E_NODE ?= auto
# How the real node's e2e installs kvpilot: kustomize (`kubectl apply -k
# config/default`) or helm (charts/kvpilot, with helm built into bin/).
E2E_INSTALL ?= kustomize
# The images the real node runs, built by hack/build-node-images.sh.
NODE_IMG ?= kvpilot.local/kvpilot:dev
PAUSE_IMG ?= kvpilot.local/pause:dev
E2E_NODE_ENV = KVPILOT_E2E_NODE=$(E2E_NODE) NODE_IMG=$(NODE_IMG) PAUSE_IMG=$(PAUSE_IMG) NODE_IMAGES_DIR=$(BIN)/node-images \
	CONTAINER_TOOL=$(CONTAINER_TOOL) ENVTEST_K8S_VERSION=$(ENVTEST_K8S_VERSION) GO=$(GO) hack/e2e-node.sh

# Packages with goroutines of their own (the engine loop, the HTTP server,
# the fleet's parallel reads): `make test` runs them under the race detector
# too, with -short skipping what is too slow there.
RACE_PACKAGES = ./internal/scheduler/... ./internal/runtime/... ./internal/fleet/...

# Generated files; `make verify` fails when they are stale.
GENERATED = api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml config/grafana/kvpilot-dashboard.json \
	charts/kvpilot/templates/crds charts/kvpilot/templates/rbac/role.yaml charts/kvpilot/files

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: ## gofmt check and go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: test
test: lint envtest ggml $(HELM) $(KUSTOMIZE) ## Run all tests (unit, fuzz seed corpora, envtest suites, the Helm chart against the kustomize config, the ggml executor on CPU and its greedy parity with llama.cpp: node-llama-cpp from npm, ~85 MB once, skipped without node or the registry), and the concurrent packages under the race detector.
	KUBEBUILDER_ASSETS="$$($(SETUP_ENVTEST))" KVPILOT_REQUIRE_ENVTEST=1 \
		KVPILOT_HELM=$(HELM) KVPILOT_KUSTOMIZE=$(KUSTOMIZE) KVPILOT_REQUIRE_HELM=1 \
		KVPILOT_GGML_LIB="$$($(SETUP_GGML) cpu)" KVPILOT_REQUIRE_GGML=1 \
		KVPILOT_LLAMA_CPP_DIR="$$(npm_config_fetch_retries=0 npm_config_fetch_timeout=60000 $(SETUP_LLAMA_CPP) || true)" $(GO) test $(GOFLAGS_TEST) ./...
	KVPILOT_GGML_LIB="$$($(SETUP_GGML) cpu)" $(GO) test -race -short $(GOFLAGS_TEST) $(RACE_PACKAGES)

.PHONY: test-readme
test-readme: ## Run the README's quick-start commands that need no cluster as written (make run, then its curl; GGUF writing), from the repository root (~1 min, the build included).
	hack/readme-quickstart.sh

.PHONY: test-agent-clients
test-agent-clients: ggml ## Claude Code and Codex from npm (pinned; ~800 MB once, cached) complete headless turns with their defaults against a local pod, a forced tool call each, and a second Claude Code session reads >= 95% of its prompt from the prefix cache (~1 min; skipped without node, npm or the registry).
	KVPILOT_GGML_LIB="$$($(SETUP_GGML) cpu)" hack/agent-clients/run.sh

.PHONY: ggml
ggml: ## Fetch (first time, ~10 MB from npm) or reuse ggml's CPU libraries; prints nothing.
	@$(SETUP_GGML) cpu >/dev/null

.PHONY: envtest
envtest: ## Build (first time, ~10 min) or reuse the envtest kube-apiserver and etcd.
	@$(SETUP_ENVTEST) >/dev/null

.PHONY: bench
bench: ## Run the Go benchmarks (engine, block manager, queue, placement, executors, batching simulation).
	$(GO) test -run '^$$' -bench . -benchmem ./internal/scheduler/... ./internal/runtime/...
	$(GO) test -run '^$$' -bench ContinuousVsStatic -benchtime=1x ./internal/simulator/

.PHONY: bench-executors
bench-executors: ggml ## ggml vs llama.cpp (node-llama-cpp, same GGUF and threads, interleaved, BENCH_REPS rounds; its 32 streams in lockstep) on random Qwen2-0.5B (Q8_0, F16), qwen3moe, gpt-oss, qwen35 and qwen35moe shapes, and vs the cpu executor (GGML_THREADS=n to set the CPU threads): prefill, decode, 32 streams (~40 min on 2 cores).
	KVPILOT_GGML_LIB="$$($(SETUP_GGML) cpu)" KVPILOT_LLAMA_CPP_DIR="$$($(SETUP_LLAMA_CPP))" KVPILOT_BENCH_EXECUTORS=1 \
		KVPILOT_BENCH_GGML_THREADS=$(GGML_THREADS) KVPILOT_BENCH_REPS=$(BENCH_REPS) \
		$(GO) test -run '^$$' -bench 'VsLlamaCpp|ThreadsUnderLoad|Executors|StepVsHTTP|ServingPath|GraphReuse|GraphBuild|DeviceArgmax|HybridSecondTurn|GatherInCacheType' -benchtime=1x -timeout 90m ./internal/runtime/executor/ggml/

.PHONY: test-gpu
test-gpu: ## The ggml executor's tests and benchmark on CUDA (ggml built for this GPU with nvcc when present, with its flash-attention kernels, as make bench-gpu builds it: ~3 min; else the prebuilt); skipped without an NVIDIA GPU.
	@if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then \
		echo "test-gpu: no NVIDIA GPU on this machine (nvidia-smi finds none): skipped (it runs on a machine with one)"; \
		exit 0; \
	fi; \
	if [ -n "$(KVPILOT_GGML_LIB)" ]; then lib="$(KVPILOT_GGML_LIB)"; \
	elif command -v nvcc >/dev/null && command -v cmake >/dev/null; then server="$$(hack/build-llama-server-cuda.sh)" || exit 1; lib="$$(dirname "$$server")"; \
	else echo "test-gpu: no nvcc/cmake: using the prebuilt CUDA library, which cannot run on every GPU (see hack/build-ggml-cuda.sh)"; lib="$$($(SETUP_GGML) cuda)"; fi; \
	KVPILOT_GGML_LIB="$$lib" KVPILOT_REQUIRE_GGML=1 KVPILOT_GGML_DEVICE=cuda $(GO) test $(GOFLAGS_TEST) -v ./internal/runtime/executor/ggml/ && \
	KVPILOT_GGML_LIB="$$lib" KVPILOT_GGML_DEVICE=cuda KVPILOT_BENCH_EXECUTORS=1 $(GO) test -run '^$$' -bench 'Executors|StepVsHTTP|ServingPath' -benchtime=1x -timeout 60m ./internal/runtime/executor/ggml/

.PHONY: gpu-bundle
gpu-bundle: ## Pack test-gpu and bench-gpu for a GPU machine without Go (bin/gpu-bundle: binaries, llama.cpp source, run.sh; see hack/gpu-bundle.sh).
	hack/gpu-bundle.sh

.PHONY: bench-gpu
bench-gpu: ## kvpilot (ggml on CUDA) vs llama.cpp's llama-server of the same release, same GGUF, same ggml build, one GPU: Qwen2-0.5B, qwen3moe and gpt-oss shapes, 1/8/32/128 streams, prefill 512 and 8k (builds llama.cpp with nvcc, ~3 min on 16 cores for one GPU architecture); skipped without an NVIDIA GPU.
	@if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then \
		echo "bench-gpu: no NVIDIA GPU on this machine (nvidia-smi finds none): skipped (it runs on a machine with one)"; \
		exit 0; \
	fi; \
	server="$${KVPILOT_LLAMA_SERVER:-$$(hack/build-llama-server-cuda.sh)}" || exit 1; \
	lib="$${KVPILOT_GGML_LIB:-$$(dirname "$$server")}"; \
	KVPILOT_GGML_LIB="$$lib" KVPILOT_GGML_DEVICE=cuda KVPILOT_LLAMA_SERVER="$$server" KVPILOT_BENCH_GPU=1 KVPILOT_BENCH_REPS=$(BENCH_REPS) \
		$(GO) test -run '^$$' -bench GPUVsLlamaServer -benchtime=1x -timeout 60m ./internal/runtime/executor/ggml/

.PHONY: bench-agents
bench-agents: ## Agent scenarios S1-S5 (S1a, S1b: S1 one phase at a time; S5: a hybrid model, the recurrent state between turns): kvpilot vs the best hand-tuned baseline on simulated pools (virtual time). AGENTS_SIZE=small|full|large, AGENTS_SEEDS, AGENTS_SCENARIOS, AGENTS_ARMS, AGENTS_MODEL (a sim profile; docs/benchmarks.md).
	AGENTS_SIZE=$(AGENTS_SIZE) $(GO) test -run '^$$' -bench Agents -benchtime=1x -timeout 0 ./internal/simulator/

.PHONY: fuzz
fuzz: ## Explore every fuzz target for FUZZTIME each (their seed corpora already run in `make test`).
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

##@ End to end (a local cluster: a real node, or processes as the fallback)

.PHONY: kube-components
kube-components: ## Build (first time, ~2 min after `make envtest`) or reuse kube-controller-manager.
	@$(SETUP_KUBE_COMPONENTS) >/dev/null

.PHONY: test-e2e
test-e2e: envtest kube-components $(if $(filter helm,$(E2E_INSTALL)),$(HELM)) ## End-to-end tests on a local cluster with a real node (E2E_NODE=auto|real|process; E2E_INSTALL=kustomize|helm on a real node; first time ~20 min to build the node's binaries and images, then ~2.5 min).
	node_env="$$($(E2E_NODE_ENV))" && eval "$$node_env" && \
	KUBEBUILDER_ASSETS="$$($(SETUP_ENVTEST))" KUBE_COMPONENTS="$${KUBE_COMPONENTS:-$$($(SETUP_KUBE_COMPONENTS))}" \
		KVPILOT_E2E_INSTALL=$(E2E_INSTALL) KVPILOT_HELM=$(HELM) \
		KVPILOT_PROMETHEUS_ADAPTER="$${KVPILOT_PROMETHEUS_ADAPTER:-$$(GO=$(GO) hack/setup-prometheus-adapter.sh || true)}" \
		$(GO) test -tags e2e $(GOFLAGS_TEST) -timeout $(E2E_TIMEOUT) -run '$(E2E_RUN)' -v ./test/e2e/

.PHONY: demo
demo: envtest kube-components ## Run kvpilot on a local cluster in the background with a sample pool (E2E_NODE as for test-e2e; make demo-down stops it).
	node_env="$$($(E2E_NODE_ENV))" && eval "$$node_env" && \
	KUBEBUILDER_ASSETS="$$($(SETUP_ENVTEST))" KUBE_COMPONENTS="$${KUBE_COMPONENTS:-$$($(SETUP_KUBE_COMPONENTS))}" \
		DEMO_DIR="$(DEMO_DIR)" GO=$(GO) hack/demo.sh up

.PHONY: demo-down
demo-down: ## Stop the local cluster of `make demo` and remove its files.
	DEMO_DIR="$(DEMO_DIR)" hack/demo.sh down

##@ Code generation

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRDs and the manager's RBAC from the markers, into config/ and the Helm chart.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths="./internal/controller/..." output:rbac:artifacts:config=config/rbac
	hack/helm-chart.sh

.PHONY: helm-chart
helm-chart: ## Copy the generated CRDs and manager role from config/ into the Helm chart (charts/kvpilot); make manifests runs it.
	hack/helm-chart.sh

.PHONY: helm-lint
helm-lint: $(HELM) ## helm lint --strict the chart (test/helm runs it too, with the kustomize comparison).
	$(HELM) lint --strict charts/kvpilot

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate the API types' DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: jinja-fixtures
jinja-fixtures: ## Re-render with Python Jinja2 (python3-jinja2 3.1) llama.cpp's chat templates and the engine's snippets, the goldens of the Jinja tests.
	KVPILOT_LLAMA_CPP_DIR="$$($(SETUP_LLAMA_CPP))" python3 hack/jinja-fixtures.py

.PHONY: grafana-dashboard
grafana-dashboard: ## Write config/grafana/kvpilot-dashboard.json from hack/grafana-dashboard.py (and its copy in the Helm chart).
	python3 hack/grafana-dashboard.py > config/grafana/kvpilot-dashboard.json
	hack/helm-chart.sh

.PHONY: verify
verify: manifests generate grafana-dashboard ## Regenerate everything and fail if a generated file was stale.
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		git status --short -- $(GENERATED); git diff --stat -- $(GENERATED); \
		echo "generated files differ from what is committed: run 'make manifests generate grafana-dashboard' and commit the result"; exit 1; \
	fi
	kubectl kustomize config/default >/dev/null
	kubectl kustomize config/samples >/dev/null
	kubectl kustomize config/prometheus >/dev/null
	kubectl kustomize config/grafana >/dev/null

$(HELM):
	@mkdir -p $(BIN)/.install
	GOBIN=$(BIN)/.install $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/.install/helm $@

$(KUSTOMIZE):
	@mkdir -p $(BIN)/.install
	GOBIN=$(BIN)/.install $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(BIN)/.install/kustomize $@

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)/.install
	GOBIN=$(BIN)/.install $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(BIN)/.install/controller-gen $@

##@ Build

.PHONY: build
build: ## Build the binaries into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: docker-build
docker-build: ## Build the image holding the manager and the runtime (IMG=kvpilot:latest) with docker, or podman/buildah and local base images where no registry answers.
	CONTAINER_TOOL=$(CONTAINER_TOOL) hack/docker-build.sh cpu $(IMG)

.PHONY: docker-build-cuda
docker-build-cuda: ## Build the runtime image with ggml's CUDA libraries for GPU pools (IMG_CUDA=kvpilot:cuda; linux/amd64); without CUDA base images it stops after the CPU stages.
	CONTAINER_TOOL=$(CONTAINER_TOOL) GGML_NLC_VERSION=$(GGML_NLC_VERSION) hack/docker-build.sh cuda $(IMG_CUDA)

##@ Deploy

.PHONY: deploy
deploy: ## Install the CRDs and run the manager in the current kubectl context.
	kubectl apply --server-side -k config/default

.PHONY: undeploy
undeploy: ## Remove the manager and the CRDs (and with them every pool).
	kubectl delete --ignore-not-found -k config/default

##@ Run

.PHONY: run
run: ## Run the runtime serving the built-in model on CPU.
	$(GO) run ./cmd/runtime

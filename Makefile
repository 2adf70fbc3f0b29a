# kvpilot Makefile. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
BIN ?= $(CURDIR)/bin
GOFLAGS_TEST ?= -count=1
# Fuzz targets' seed corpora run as ordinary tests in `make test`; `make fuzz`
# explores further.
FUZZTIME ?= 30s

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
test: lint ## Run all tests (unit, fuzz seed corpora, envtest suites).
	$(GO) test $(GOFLAGS_TEST) ./...

.PHONY: bench
bench: ## Run the Go benchmarks (engine, block manager, queue, placement, executors, batching simulation).
	$(GO) test -run '^$$' -bench . -benchmem ./internal/scheduler/... ./internal/runtime/...
	$(GO) test -run '^$$' -bench ContinuousVsStatic -benchtime=1x ./internal/loadgen/

.PHONY: fuzz
fuzz: ## Explore every fuzz target for FUZZTIME each (their seed corpora already run in `make test`).
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

##@ Build

.PHONY: build
build: ## Build the binaries into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

##@ Run

.PHONY: run
run: ## Run the runtime serving the built-in model on CPU.
	$(GO) run ./cmd/runtime

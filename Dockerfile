# syntax=docker/dockerfile:1
# One image, two binaries: /manager (the operator) and /kvpilot-runtime (the
# pod that serves a model). Build with `make docker-build IMG=...`. The
# runtime-cuda target (`make docker-build-cuda`) is the runtime with ggml's
# CUDA libraries for GPU pools.
#
# The base images are build arguments. Where no registry is reachable,
# `make docker-build` builds stand-ins from Debian packages and the Go module
# proxy (hack/build-base-images.sh) and passes them here; elsewhere the
# defaults below are pulled as usual.
ARG GO_IMAGE=golang:1.26
ARG NODE_IMAGE=node:22-bookworm-slim
ARG BASE_IMAGE=gcr.io/distroless/base-debian12:nonroot

# The CUDA runtime image of the runtime-cuda target (its tag is not verified:
# the machines this was built on reach no container registry, and CUDA base
# images are not built locally, so the CUDA target stops there; see
# hack/docker-build.sh).
ARG CUDA_RUNTIME_IMAGE=nvidia/cuda:13.0.0-runtime-ubuntu24.04
# Where ggml's CUDA backend is compiled (same CUDA release and Ubuntu as the
# runtime image, so the libraries find the same glibc and libcudart).
ARG CUDA_DEVEL_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu24.04

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
# Modules first, so editing code does not redownload them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/kvpilot-runtime ./cmd/runtime

# ggml's CUDA build (the ggml executor's kernels), from the release that
# hack/setup-ggml.sh installs for tests (node-llama-cpp's npm packages,
# fetched with npm pack; no install scripts run): its CPU backends as
# prebuilt, its CUDA backend compiled here for the GPUs named in
# GGML_CUDA_ARCHS by hack/build-ggml-cuda.sh. The prebuilt CUDA library
# is not used: it has machine code for sm_86/89/120/121 only, and on an
# H100 with the 580 driver its PTX fails to load (see the script).
FROM --platform=linux/amd64 ${NODE_IMAGE} AS ggml-fetch
ARG GGML_NLC_VERSION=3.22.1
WORKDIR /tmp/ggml
RUN npm pack --silent "@node-llama-cpp/linux-x64@${GGML_NLC_VERSION}" "node-llama-cpp@${GGML_NLC_VERSION}" && \
    mkdir -p x /prebuilt /src && for f in ./*.tgz; do tar -xzf "$f" -C x; done && \
    cp x/package/bins/linux-x64/libggml-cpu*.so /prebuilt/ && \
    cp x/package/llama/gitRelease.bundle /src/ && rm -rf /tmp/ggml

FROM --platform=linux/amd64 ${CUDA_DEVEL_IMAGE} AS ggml-cuda
RUN apt-get update && apt-get install -y --no-install-recommends cmake ninja-build git && rm -rf /var/lib/apt/lists/*
# Volta and older are not supported by CUDA 13; add archs as needed.
ARG GGML_CUDA_ARCHS="75-real;80-real;86-real;89-real;90-real;100-real;120-real"
COPY hack/build-ggml-cuda.sh /build-ggml-cuda.sh
COPY --from=ggml-fetch /prebuilt /prebuilt
COPY --from=ggml-fetch /src /src
RUN git clone -q /src/gitRelease.bundle /src/llama.cpp && \
    GGML_SRC=/src/llama.cpp/ggml GGML_PREBUILT=/prebuilt CUDA_ARCHS="${GGML_CUDA_ARCHS}" \
    bash /build-ggml-cuda.sh /ggml && rm -rf /src

# The runtime for NVIDIA GPUs: `make docker-build-cuda IMG_CUDA=...`. ggml's
# CUDA backend links libcudart.so.13 and libcublas.so.13, which the CUDA
# runtime image carries; libcuda.so.1 and NVML come from the node's driver
# through the NVIDIA container toolkit. linux/amd64 only (the package is
# built for x86-64). It holds the runtime only: the manager stays in the
# default image.
FROM --platform=linux/amd64 ${CUDA_RUNTIME_IMAGE} AS runtime-cuda
COPY --from=build /out/kvpilot-runtime /kvpilot-runtime
COPY --from=ggml-cuda /ggml /opt/kvpilot/ggml
ENV KVPILOT_GGML_LIB=/opt/kvpilot/ggml
USER 65532:65532
ENTRYPOINT ["/kvpilot-runtime"]

# The default target, last: the manager and the runtime (cpu, sim; ggml needs
# the libraries, as in the CUDA image above).
# distroless/base rather than /static: it has glibc, which the NVIDIA
# libraries the runtime may load at run time (NVML, for device discovery)
# need. Still no shell and no package manager; nonroot is uid 65532.
FROM ${BASE_IMAGE}
COPY --from=build /out/manager /manager
COPY --from=build /out/kvpilot-runtime /kvpilot-runtime
USER 65532:65532
ENTRYPOINT ["/manager"]

# syntax=docker/dockerfile:1
# One image, two binaries: /manager (the operator) and /kvpilot-runtime (the
# pod that serves a model). Build with `make docker-build IMG=...`.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
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

# distroless/base rather than /static: it has glibc, which the NVIDIA
# libraries the runtime may load at run time (NVML, for device discovery)
# need. Still no shell and no package manager; nonroot is uid 65532.
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/kvpilot-runtime /kvpilot-runtime
USER 65532:65532
ENTRYPOINT ["/manager"]

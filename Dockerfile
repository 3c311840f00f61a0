# syntax=docker/dockerfile:1
# The ConfigBundle Hub image: `make docker-build IMG=...`. Needs BuildKit (docker buildx) for the
# cache mounts. `make image` builds the same layout without Docker (docs/image.md compares them).

# The Go version of go.mod's go line (go 1.26.x); the golang image sets GOTOOLCHAIN=local.
FROM golang:1.26 AS builder
WORKDIR /src

# Modules first, so that a source change does not download them again (third_party holds a
# module that go.mod replaces).
COPY go.mod go.sum ./
COPY third_party/ third_party/
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .
# What `hub version` and the configbundle_build_info metric say (make docker-build passes them).
ARG VERSION=devel
ARG GIT_COMMIT=unknown
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X configbundle.dev/hub/pkg/version.Version=${VERSION} -X configbundle.dev/hub/pkg/version.GitCommit=${GIT_COMMIT}" \
      -o /hub ./hub

# A static binary on distroless: no shell, no package manager, a non-root user.
FROM gcr.io/distroless/static:nonroot
COPY --from=builder /hub /hub
USER 65532:65532
ENTRYPOINT ["/hub"]

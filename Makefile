# ConfigBundle Hub. `make` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
CONTROLLER_GEN := $(GO) tool controller-gen
# golangci-lint is a tool of its own module, so that its dependencies never mix with the hub's.
GOLANGCI_LINT := $(GO) tool -modfile=$(CURDIR)/hack/tools/go.mod golangci-lint
# gotestsum runs `go test -json` and keeps it for the report of `make test` (a tool of go.mod).
GOTESTSUM := $(CURDIR)/bin/gotestsum
# crd-ref-docs writes docs/reference/api.md from the Go types of api/ (a tool of the same module).
CRD_REF_DOCS := $(GO) tool -modfile=$(CURDIR)/hack/tools/go.mod crd-ref-docs


# What `hub version` and the configbundle_build_info metric say of a build from this checkout.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X configbundle.dev/hub/pkg/version.Version=$(VERSION) -X configbundle.dev/hub/pkg/version.GitCommit=$(GIT_COMMIT)

# Go test flags; for example `make test TESTFLAGS='-run TestDrift -v'`.
TESTFLAGS ?=

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code with controller-gen.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate CRDs and RBAC with controller-gen.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=configbundle-member paths=./pkg/configbundle/... paths=./pkg/placement/... paths=./spoke-provider/... output:rbac:artifacts:config=config/rbac/member
	$(CONTROLLER_GEN) rbac:roleName=configbundle-hub paths=./pkg/fleet/... paths=./pkg/tenancy/... paths=./pkg/hubmanager/... output:rbac:artifacts:config=config/rbac/hub

.PHONY: fmt
fmt: ## Run gofmt.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet (the module and test/monitoring, a module of its own).
	$(GO) vet ./...
	cd test/monitoring && $(GO) vet ./...

.PHONY: lint
lint: ## Run golangci-lint (config in .golangci.yml).
	$(GOLANGCI_LINT) run ./...
	cd test/monitoring && $(GOLANGCI_LINT) run ./...

.PHONY: tidy
tidy: ## Run go mod tidy on the module, on the tools module and on test/monitoring.
	$(GO) mod tidy
	cd hack/tools && $(GO) mod tidy
	cd test/monitoring && $(GO) mod tidy

.PHONY: helm
helm: ## Generate the Helm chart config/chart/configbundle-hub from config/default, config/sharded and config/prometheus.
	$(GO) run ./hack/helmgen

.PHONY: helmbin
helmbin: ## Build the helm binary the chart tests run (cached; about 3 minutes the first time).
	@bash hack/offline/helmbin.sh

.PHONY: docs
docs: ## Regenerate docs/reference: the API (crd-ref-docs), the CLI (cobra/doc), the metrics and the Helm values.
	@mkdir -p docs/reference
	$(CRD_REF_DOCS) --log-level=ERROR --source-path=./api --config=hack/docs/crd-ref-docs.yaml --renderer=markdown --output-path=docs/reference/api.md
	$(GO) test ./hub -run '^TestCLIReference$$' -count=1 -args -update-cli-reference
	$(GO) run ./hack/docs/metrics > docs/reference/metrics.md
	$(GO) run ./hack/docs/helmvalues config/chart/configbundle-hub/values.yaml > docs/reference/helm-values.md

.PHONY: verify
verify: manifests generate helm docs lint ## Fail on stale generated files (CRDs, RBAC, deepcopy, the Helm chart, docs/reference), a broken docs link, an untidy module, unformatted code or lint findings.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run make tidy"; exit 1; }
	@cd test/monitoring && $(GO) mod tidy -diff || { echo "test/monitoring/go.mod/go.sum are not tidy: run make tidy"; exit 1; }
	@git diff --exit-code -- config api pkg || { echo "generated files are stale: run make manifests generate helm and commit"; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- config/chart)" || { git ls-files --others --exclude-standard -- config/chart; echo "config/chart has files make helm made and git does not know: commit them"; exit 1; }
	@git diff --exit-code -- docs/reference || { echo "docs/reference is stale: run make docs and commit"; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- docs/reference)" || { git ls-files --others --exclude-standard -- docs/reference; echo "docs/reference has files make docs made and git does not know: commit them"; exit 1; }
	@$(GO) run ./hack/docs/links README.md CHANGELOG.md docs

.PHONY: testbin
testbin: ## Build the control-plane binaries for tests (cached; about 10 minutes the first time).
	@bash hack/offline/testbin.sh

.PHONY: test
test: ## Build what the tests need, then run every test on real control planes in two lanes at once: in-process packages with the race detector, binary suites without; prints each package's time and the 20 slowest tests.
	@dir="$$(bash hack/offline/testbin.sh)"; \
	helm="$$(bash hack/offline/helmbin.sh)"; \
	$(GO) vet ./...; \
	$(GO) vet -tags kind ./test/kind/...; \
	$(GO) build -o /dev/null ./hack/bench; $(GO) build -o /dev/null ./hack/demo; \
	$(GO) build -o $(GOTESTSUM) gotest.tools/gotestsum; \
	rm -rf bin/test && mkdir -p bin/test; \
	export KUBEBUILDER_ASSETS="$$dir" HELM="$$helm"; \
	race_pkgs="$$($(GO) list ./... | grep -v -e '/test/' -e '/hack/' -e '/internal/demo')"; \
	binary_pkgs="$$($(GO) list ./... | grep -e '/test/' -e '/hack/' -e '/internal/demo')"; \
	($(GOTESTSUM) --format pkgname-and-test-fails --jsonfile bin/test/race.json -- -race -count=1 -timeout 30m $(TESTFLAGS) $$race_pkgs 2>&1 | sed -u 's/^/[race] /') & race=$$!; \
	($(GOTESTSUM) --format pkgname-and-test-fails --jsonfile bin/test/binary.json -- -count=1 -timeout 30m $(TESTFLAGS) $$binary_pkgs 2>&1 | sed -u 's/^/[binary] /') & binary=$$!; \
	rc=0; wait $$race || rc=1; wait $$binary || rc=1; \
	(cd test/monitoring && $(GO) vet ./... && $(GOTESTSUM) --format pkgname-and-test-fails --jsonfile ../../bin/test/monitoring.json -- -count=1 -timeout 10m $(TESTFLAGS) ./...) || rc=1; \
	$(GO) run ./hack/testreport bin/test/*.json; \
	exit $$rc

.PHONY: test-faults
test-faults: ## Run the fault matrix alone (also part of make test), printing each case's timing.
	@dir="$$(bash hack/offline/testbin.sh)"; \
	KUBEBUILDER_ASSETS="$$dir" $(GO) test ./pkg/configbundle ./spoke-provider ./test/e2e -run '^TestFault' -race -count=1 -timeout 20m -v $(TESTFLAGS)

##@ Run

.PHONY: demo
demo: ## Run the hub on an embedded local fleet (real control planes on loopback) and show it at work.
	@dir="$$(bash hack/offline/testbin.sh)"; \
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/hub ./hub; \
	KUBEBUILDER_ASSETS="$$dir" $(GO) run ./hack/demo --hub-binary bin/hub $(DEMO_ARGS)

.PHONY: bench
bench: ## Measure heal latency, convergence, cost per member, the hub's memory with tenants at their revision history bounds and the scale curve (1 and 3 sharded replicas) on real control planes; prints tables (about 50 minutes; BENCH_ARGS=--scale=none skips the curve).
	@dir="$$(bash hack/offline/testbin.sh)"; \
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/hub ./hub; \
	KUBEBUILDER_ASSETS="$$dir" $(GO) run ./hack/bench --hub-binary bin/hub $(BENCH_ARGS)

.PHONY: bench-smoke
bench-smoke: ## Run every phase of the benchmark at a small size and check its figures are all there (about 5 minutes; make test runs a shorter one).
	@dir="$$(bash hack/offline/testbin.sh)"; \
	BENCH_SMOKE=1 KUBEBUILDER_ASSETS="$$dir" $(GO) test ./hack/bench -run '^TestSmoke$$' -count=1 -v -timeout 20m $(TESTFLAGS)

##@ Build

.PHONY: build
build: ## Build the hub binary into bin/.
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/hub ./hub

.PHONY: release
release: ## Write the release VERSION (make release VERSION=v0.9.0) into dist/: hub binaries for linux and darwin (amd64, arm64), the image tar, the Helm chart and SHA256SUMS.
	@VERSION="$(VERSION)" GO="$(GO)" bash hack/release.sh

# Image of `make docker-build`; `make kind-up` loads it into the kind hub cluster.
IMG ?= ghcr.io/configbundle/hub:dev
# Extra flags of `docker build`, for example DOCKER_BUILD_FLAGS=--provenance=false.
DOCKER_BUILD_FLAGS ?=

.PHONY: image
image: ## Build the hub image IMG without Docker into bin/hub-image.tar (a docker-archive for ctr/kind/docker load; see docs/how-to/build-the-image.md).
	$(GO) run ./hack/image --image $(IMG) --output bin/hub-image.tar --version $(VERSION) --git-commit $(GIT_COMMIT)

.PHONY: docker-build
docker-build: ## Build the hub container image IMG (default ghcr.io/configbundle/hub:dev; needs Docker with BuildKit).
	docker build $(DOCKER_BUILD_FLAGS) --build-arg VERSION=$(VERSION) --build-arg GIT_COMMIT=$(GIT_COMMIT) -t $(IMG) .

##@ kind

.PHONY: kind-up
kind-up: ## Create a kind hub cluster and member clusters, deploy the hub, register the members (HUB, MEMBERS, IMG, KIND_NODE_IMAGE; docs/how-to/kind.md).
	IMG="$(IMG)" bash hack/kind/up.sh

.PHONY: kind-down
kind-down: ## Delete the kind clusters of kind-up (HUB, MEMBERS); then stop what kind-up started on this machine.
	bash hack/kind/down.sh

.PHONY: test-kind
test-kind: ## As root: the kind e2e test on three kind clusters, with Docker, cgroup mounts and an offline node image set up and undone here (docs/how-to/kind.md); prints its time.
	@bash hack/kind/test.sh

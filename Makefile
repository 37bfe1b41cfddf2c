# The two commands a newcomer needs are `make demo` and `make test`.
export GOTOOLCHAIN := local
GO ?= go
COVERAGE_FLOOR := 80
ARGS ?=
# What the binaries say on --version: a release's tag (make build VERSION=v1.2.0),
# by default the tag at HEAD where there is one, else Go's own record (a
# pseudo-version or "(devel)"); and the commit they were built from.
VERSION ?= $(shell git describe --tags --exact-match HEAD 2>/dev/null)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
STAMP := -X github.com/JorisJonkers-dev/delivery/internal/cli.version=$(VERSION) -X github.com/JorisJonkers-dev/delivery/internal/cli.commit=$(COMMIT)

.PHONY: demo run build test test-deps lint bench fuzz clean check schemas-check gen gen-check secret-scan

## demo: deliver a release along the whole path on a node that runs pods, or on kwok's cluster where the node cannot run (ARGS=--once: tell the story and exit; ARGS=--kwok: kwok's cluster anywhere)
demo:
	scripts/test-binaries.sh cluster >/dev/null
	@if [ "$$(id -u)" -eq 0 ]; then scripts/test-binaries.sh node >/dev/null && scripts/test-binaries.sh flux >/dev/null; fi
	$(GO) run ./cmd/demo $(ARGS)

## mesh-demo: tell a node delivery step by step on a bus of its own (three agents, a canary, a failing build, a put)
.PHONY: mesh-demo
mesh-demo:
	$(GO) run ./cmd/mesh demo

## run: start the Release Gate against the cluster KUBECONFIG names
run:
	$(GO) run ./cmd/release-gate

## build: build every service into bin/
build:
	$(GO) build -trimpath -ldflags "$(STAMP)" -o bin/ ./cmd/...

## images: build an OCI image per command into bin/images/, with no daemon and no base (DEVELOPMENT.md, "Images")
.PHONY: images
images:
	IMAGES_VERSION=$(VERSION) IMAGES_COMMIT=$(COMMIT) $(GO) run ./tools/images

## release: publish a release (VERSION=v1.2.0 REGISTRY=ghcr.io/org/delivery COSIGN_KEY=cosign.key): every image for amd64 and arm64, signed, with SBOMs, and the manifests as a signed Flux OCI artifact (docs/releasing.md)
.PHONY: release
release:
	VERSION=$(VERSION) RELEASE_COMMIT=$(COMMIT) SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct)} $(GO) run ./tools/release

## test-deps: install the packages and build the servers the tests start
test-deps:
	scripts/test-deps.sh

## test: install what the tests need, run them with the race detector, check coverage
# The whole-path package starts once the node's servers are built; the rest
# of the suite after Vault, MinIO and nats-server, beside it (scripts/test.sh).
test:
	GO=$(GO) scripts/test.sh $(COVERAGE_FLOOR)

## lint: golangci-lint with the project's configuration
lint:
	"$$(scripts/test-binaries.sh lint)" run ./...

## check: everything CI holds a change to: the vendored contracts, the generated types, the secret scan, lint, the tests and the images
# Lint and the images run beside the tests, in the time the whole-path
# package spends waiting on the node.
check: schemas-check gen-check secret-scan
	$(MAKE) --no-print-directory -j3 lint test images

## schemas-check: fail when third_party/ differs from the reference folder beside the repository (passes, saying so, where it is absent)
schemas-check:
	scripts/schemas-check.sh

## gen: regenerate the Go types of deploy-kit's schemas (internal/deploykit/*/types_gen.go)
gen:
	$(GO) generate ./internal/deploykit/...

## gen-check: regenerate those types in a temporary folder and fail when the committed ones differ
gen-check:
	scripts/gen-check.sh

## secret-scan: fail on a private key or token in any tracked file outside the allowed fixtures
secret-scan:
	$(GO) test -count=1 ./internal/secretscan/

## bench: run the benchmarks whose figures docs/benchmarks.md records
bench: test-deps
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./...

clean:
	rm -rf bin cover.out

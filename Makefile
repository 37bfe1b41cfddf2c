# The two commands a newcomer needs are `make demo` and `make test`.
export GOTOOLCHAIN := local
GO ?= go
COVERAGE_FLOOR := 80
ARGS ?=

.PHONY: demo run build test test-deps lint bench fuzz clean

## demo: run a whole release through the Release Gate and the real Flagger on an embedded cluster (ARGS=--once: run the story and exit)
demo:
	scripts/test-binaries.sh envtest >/dev/null
	scripts/test-binaries.sh cluster >/dev/null
	$(GO) run ./cmd/demo $(ARGS)

## run: start the Release Gate against the cluster KUBECONFIG names
run:
	$(GO) run ./cmd/release-gate

## build: build every service into bin/
build:
	$(GO) build -trimpath -o bin/ ./cmd/...

## test-deps: install the packages and build the servers the tests start
test-deps:
	scripts/test-deps.sh

## test: install what the tests need, run them with the race detector, check coverage
test: test-deps
	$(GO) test -race -count=1 -timeout 20m -coverpkg=./... -coverprofile=cover.out ./...
	scripts/coverage.sh cover.out $(COVERAGE_FLOOR)

## lint: golangci-lint with the project's configuration
lint:
	"$$(scripts/test-binaries.sh lint)" run ./...

## bench: run the benchmarks whose figures docs/benchmarks.md records
bench: test-deps
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./...

clean:
	rm -rf bin cover.out

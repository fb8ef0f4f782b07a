SHELL := /bin/bash
# strand: build and test entry points. `make test` is the README's test command
# and what .ci/run calls.
GO ?= go
PKGS := ./...

.PHONY: test unit lint infra-test build soak fmt

# Infra first, so that the unit tests' summary line closes the run.
test: lint infra-test unit

lint:
	@echo "== gofmt"; out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@echo "== go vet"; $(GO) vet $(PKGS)

unit:
	@echo "== go test"; set -o pipefail; $(GO) test -json -count=1 -timeout 20m $(PKGS) | python3 .ci/summary.py

infra-test:
	@if [ -f infra/go.mod ]; then echo "== infra"; $(MAKE) -C infra test; fi

build:
	$(GO) build -o bin/ ./cmd/... ./functions/...

fmt:
	gofmt -w $$(git ls-files '*.go')

# soak runs the deterministic simulation over many seeds (CI runs the
# default budget in `make unit`). A failure prints its seed; replay it with
# go test ./tests/sim -run TestSim -seed=N -v.
SOAK_SEEDS ?= 1000
SOAK_STEPS ?= 200
# The edge workload (TestSimEdges, issue 13) runs its own seeds in a second
# invocation, so each gets its own timeout.
soak:
	@$(GO) test -count=1 -timeout 60m ./tests/sim -run TestSim -skip 'TestSimEdges$$' -seeds=$(SOAK_SEEDS) -steps=$(SOAK_STEPS) -v > soak.log 2>&1; \
	  status=$$?; \
	  $(GO) test -count=1 -timeout 60m ./tests/sim -run 'TestSimEdges$$' -edge-seeds=$(SOAK_SEEDS) -v >> soak.log 2>&1 || status=1; \
	  grep -E 'SUMMARY|FAIL|seed=[0-9]+ step=|^ok' soak.log; echo "full log: soak.log"; exit $$status

# mutants applies each mutation listed in tests/mutants/mutants.sh (small
# changes to protocol code that break a promise) to a temporary copy of the
# tree, and fails unless the simulation's default budget and the named
# package tests each catch every one. Heavy (several minutes): run it with
# the soak, never in `make test`. `make mutants MUTANTS="name ..."` runs some.
MUTANTS ?=
.PHONY: mutants
mutants:
	@bash tests/mutants/mutants.sh $(MUTANTS)

# localstack-test runs the localstack/ suite on LocalStack's open-source
# core from PyPI, without Docker (localstack/suite.sh; docs/localstack.md):
# the integration and conformance suites, deploy and checks against the
# stack, settlement end to end, the template on its CloudFormation. Heavy
# (the first run installs the core; then ~7 min): not in `make test`.
.PHONY: localstack-test
localstack-test:
	@bash localstack/suite.sh

# proto regenerates shared/api from proto/ with pinned buf and plugins
# (fetched through the Go module proxy). The generated code is committed;
# regenerating must give no diff.
BUF_VERSION ?= v1.75.0
.PHONY: proto
proto:
	$(GO) run github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION) generate

# proto-check regenerates shared/api and fails if the committed code differs.
.PHONY: proto-check
proto-check: proto
	git diff --exit-code -- shared/api

# bench runs the hot-path Go benchmarks (allocations included) and one
# `strand bench` of each class in-process; docs/performance.md has the
# figures and the full commands. Heavy: run it once, not in a loop.
.PHONY: bench
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./shared/format/ ./shared/star/
	$(GO) run ./cmd/strand bench --class express,standard --duration 10s --plot docs/perf

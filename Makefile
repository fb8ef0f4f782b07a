SHELL := /bin/bash
# strand: build and test entry points. `make test` is the README's test command
# and what .ci/run calls.
GO ?= go
PKGS := ./...

.PHONY: test unit lint infra-test build soak fmt quick

# Infra first, so that the unit tests' summary line closes the run.
test: lint infra-test unit

lint:
	@echo "== gofmt ($$(date -u +%H:%M:%S))"; out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@echo "== go vet"; $(GO) vet $(PKGS)

unit:
	@echo "== go test ($$(date -u +%H:%M:%S))"; set -o pipefail; $(GO) test -json -count=1 -timeout 20m $(PKGS) | python3 .ci/summary.py

infra-test:
	@if [ -f infra/go.mod ]; then echo "== infra ($$(date -u +%H:%M:%S))"; $(MAKE) -C infra test; fi

# quick is the inner loop: gofmt, vet and `go test -short` of the packages
# changed since main (QUICK_BASE), or of QUICK_PKGS. Not a substitute for
# `make test`, which CI runs.
quick:
	@bash .ci/quick.sh

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
# invocation, so each gets its own timeout; settle's kill workload
# (TestSettleKillAtEveryWrite, issue 30) as many seeds in a third.
soak:
	@$(GO) test -count=1 -timeout 60m ./tests/sim -run TestSim -skip 'TestSimEdges$$' -seeds=$(SOAK_SEEDS) -steps=$(SOAK_STEPS) -v > soak.log 2>&1; \
	  status=$$?; \
	  $(GO) test -count=1 -timeout 60m ./tests/sim -run 'TestSimEdges$$' -edge-seeds=$(SOAK_SEEDS) -v >> soak.log 2>&1 || status=1; \
	  $(GO) test -count=1 -timeout 30m ./shared/settle -run 'TestSettleKillAtEveryWrite$$' -settle.kill-seeds=$(SOAK_SEEDS) >> soak.log 2>&1 || status=1; \
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

# standby-kills is docs/operations.md's failover measurement: two `strand
# dev --standby` on one data directory, the leader killed with SIGKILL 20
# times under idempotent appends and tailing readers, then stopped with
# SIGTERM 20 times, then the same under a Kafka producer and consumer
# (about 4 minutes; the default test run kills twice and stops once, and
# kills once under Kafka).
.PHONY: standby-kills
standby-kills:
	set -o pipefail; STRAND_STANDBY_KILLS=20 STRAND_STANDBY_TERMS=20 STRAND_STANDBY_KAFKA_KILLS=20 STRAND_STANDBY_KAFKA_TERMS=20 \
	  $(GO) test -count=1 -timeout 15m -run 'TestStandby(TakesOverKill9|HandoverSIGTERM|KafkaThroughKill9|KafkaHandoverSIGTERM)$$' -v ./tests/e2e | \
	  grep -E ' x [0-9]+: |^(---|ok|FAIL)'

# kafka-java runs the Apache Kafka Java tools (Maven Central; Java 17)
# against strand dev's Kafka front end and records what they print in
# docs/perf/kafka-java.txt (tests/kafkajava/run.sh). A few minutes; not
# in `make test`.
.PHONY: kafka-java
kafka-java:
	@bash tests/kafkajava/run.sh

# kafka-side-by-side measures Apache Kafka (KRaft, one node, from Maven
# Central) and strand dev with the Kafka perf tools on this machine, at
# Kafka's default and at fsync parity, into
# docs/perf/kafka-side-by-side.md (tests/kafkajava/sidebyside.sh).
.PHONY: kafka-side-by-side
kafka-side-by-side:
	@bash tests/kafkajava/sidebyside.sh

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

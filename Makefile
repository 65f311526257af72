# Strata. `make demo` and `make test` set everything up on a fresh machine.
SHELL := /bin/bash
GO    ?= go
BIN   := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
export STRATA_BIN_DIR := $(BIN)

# Pinned third-party servers and tools, built from the Go module proxy.
MINIO_VERSION    := v0.0.0-20260212201848-7aac2a2c5b7c
FAKEGCS_VERSION  := v1.56.1

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/stratafs/strata/internal/config.Version=$(VERSION)

TEST_TIMEOUT ?= 75m

.PHONY: all build tools sysdeps test unit clean fmt vet

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/strata ./cmd/strata

# System packages: fuse3 provides fusermount3 (unprivileged mounts, umount);
# rsync is what the copy-tool tests run against a mount.
SYSDEPS := fusermount3:fuse3 rsync:rsync
sysdeps:
	@for d in $(SYSDEPS); do cmd=$${d%%:*}; pkg=$${d#*:}; \
		if ! command -v $$cmd >/dev/null; then \
			if [ "$$(id -u)" = 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$pkg || exit 1; \
			else echo "$$cmd missing: install $$pkg (sudo apt-get install $$pkg)"; exit 1; fi; \
		fi; \
	done

$(BIN)/minio:
	GOBIN=$(BIN) $(GO) install github.com/minio/minio@$(MINIO_VERSION)

$(BIN)/fake-gcs-server:
	GOBIN=$(BIN) $(GO) install github.com/fsouza/fake-gcs-server@$(FAKEGCS_VERSION)

tools: sysdeps $(BIN)/minio $(BIN)/fake-gcs-server

# Unit tests only: no servers, no mounts.
unit:
	$(GO) test -race -short ./...

# The check lane first (make check, integration/check.mk: gofmt, go vet,
# golangci-lint, go mod tidy; a finding fails the run), then the whole suite
# with the race detector, then the unit tests again on one CPU
# (GOMAXPROCS=1 finds code that only works with parallelism), then every
# fuzz target for a short bounded time (CI_FUZZ_TIME each).
CI_FUZZ_TIME ?= 5s
test: check build tools
	STRATA_E2E=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	GOMAXPROCS=1 $(GO) test -race -short -count=1 ./...
	$(MAKE) --no-print-directory fuzz FUZZ_TIME=$(CI_FUZZ_TIME)

fmt:
	gofmt -l -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf $(BIN)

# Feature fragments: benchmark and demo, operations, reliability, the check
# lane (make check: gofmt, go vet, golangci-lint, go mod tidy).
-include integration/bench.mk
-include integration/ops.mk
-include integration/reliability.mk
-include integration/check.mk

# Benchmark and demo targets (integration/bench, integration/demo).
# Included by the top-level Makefile, which defines GO, BIN, build and tools.
#
#   make demo                       the README's demo: MinIO, mount, two epochs
#   make bench                      the training benchmark: PyTorch DataLoader,
#                                   accelerator utilisation, Python shard reader,
#                                   checkpoints (markdown tables + PNG charts)
#   make bench-paths                one read path at a time: small files, shards,
#                                   random preads, listings
#   make bench-all                  both in one run
#   make bench-quick                every workload at a small scale (a few minutes)
#   make bench BENCH_FLAGS='-workloads imagefolder -systems local,strata'
#
# bench-tools installs what only the benchmark needs: toxiproxy (from the Go
# module proxy, pinned), the peers rclone and s3fs, and PyTorch for the
# DataLoader and checkpoint workloads (Debian packages: python3-torch, python3-torchvision
# and python3-pil for /usr/bin/python3; about 280 packages, 1 GiB).

TOXIPROXY_VERSION ?= v2.5.0
BENCH_OUT         ?= $(CURDIR)/bench-results
BENCH_FLAGS       ?=
# make bench's workloads (strata-bench's set "training"; BENCH_FLAGS may
# name others: the last -workloads given wins).
BENCH_WORKLOADS   ?= training
DEMO_FLAGS        ?=

.PHONY: bench bench-paths bench-all bench-quick bench-tools bench-peers bench-bin demo demo-bin

# toxiproxy v2.5.0 keeps its server under cmd/server; install it under the
# name its documentation uses.
$(BIN)/toxiproxy-server:
	rm -rf $(BIN)/.toxiproxy
	GOBIN=$(BIN)/.toxiproxy $(GO) install github.com/Shopify/toxiproxy/v2/cmd/server@$(TOXIPROXY_VERSION)
	mv $(BIN)/.toxiproxy/server $@
	rm -rf $(BIN)/.toxiproxy

bench-peers:
	@missing=""; for p in rclone s3fs; do command -v $$p >/dev/null || missing="$$missing $$p"; done; \
	/usr/bin/python3 -c 'import torch, torchvision, PIL' 2>/dev/null || \
		missing="$$missing python3-torch python3-torchvision python3-pil"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing || \
			{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; }; \
		else echo "missing:$$missing (sudo apt-get install$$missing); their bench rows will be skipped and make test fails"; fi; \
	fi

bench-tools: $(BIN)/toxiproxy-server bench-peers

# make test runs the peers', the DataLoader's and the checkpoints' smoke tests
# (integration/workload, bench, demo), where a missing peer or PyTorch is a
# failure (STRATA_E2E=1): install them first.
test: bench-tools

bench-bin:
	$(GO) build -o $(BIN)/strata-bench ./integration/bench

demo-bin:
	$(GO) build -o $(BIN)/strata-demo ./integration/demo

bench: build tools bench-tools bench-bin
	$(BIN)/strata-bench -workloads $(BENCH_WORKLOADS) -out $(BENCH_OUT) $(BENCH_FLAGS)

bench-paths: build tools bench-tools bench-bin
	$(BIN)/strata-bench -workloads paths -out $(BENCH_OUT)-paths $(BENCH_FLAGS)

bench-all: build tools bench-tools bench-bin
	$(BIN)/strata-bench -workloads all -out $(BENCH_OUT)-all $(BENCH_FLAGS)

bench-quick: build tools bench-tools bench-bin
	$(BIN)/strata-bench -scale quick -out $(BENCH_OUT)-quick $(BENCH_FLAGS)

demo: build tools demo-bin
	$(BIN)/strata-demo $(DEMO_FLAGS)

# Reliability targets: fuzzing, the soak, and the toxiproxy server the fault
# tests in `make test` need (integration/faults_test.go).
# Included by the top-level Makefile, which defines GO, BIN, build and tools;
# include it after bench.mk, whose toxiproxy pin and rule are reused.
#
#   make fuzz                       every fuzz target for FUZZ_TIME (10s) each
#   make fuzz FUZZ_TIME=10m         longer runs (nightly); new inputs land in
#                                   the package's testdata/fuzz: commit them
#   make soak                       64 readers on a real mount for SOAK_DURATION
#   make soak SOAK_FLAGS='-readers 128 -out soak.json'
#   make test-gomaxprocs1           the whole suite once with GOMAXPROCS=1

FUZZ_TIME     ?= 10s
SOAK_DURATION ?= 3m
SOAK_FLAGS    ?=

# package:FuzzTarget. Seed corpora (f.Add) and committed corpora in
# <package>/testdata/fuzz/<FuzzTarget> also run in every `go test`.
FUZZ_TARGETS := \
	./cache:FuzzObjectRanges \
	./cache/index:FuzzBlockLayout \
	./cache/index:FuzzUnmarshalBlock \
	./cache/index:FuzzUnmarshalObject \
	./cache/index:FuzzUnmarshalEntry \
	./cache/meta:FuzzMerger \
	./cache/meta:FuzzChildName \
	./internal/config:FuzzParseSource \
	./internal/config:FuzzParseValues \
	./internal/config:FuzzTTL \
	./internal/config:FuzzSizeAndMode \
	./prefetch:FuzzReadRanges

.PHONY: fuzz soak soak-bin test-gomaxprocs1 reliability-tools

# bench.mk pins toxiproxy and installs it; without bench.mk, do it here.
# v2.5.0 keeps its server under cmd/server.
ifndef TOXIPROXY_VERSION
TOXIPROXY_VERSION := v2.5.0
$(BIN)/toxiproxy-server:
	rm -rf $(BIN)/.toxiproxy
	GOBIN=$(BIN)/.toxiproxy $(GO) install github.com/Shopify/toxiproxy/v2/cmd/server@$(TOXIPROXY_VERSION)
	mv $(BIN)/.toxiproxy/server $@
	rm -rf $(BIN)/.toxiproxy
endif

reliability-tools: $(BIN)/toxiproxy-server

# `make test` runs the fault tests, which need the server.
tools: reliability-tools

# go1.26's fuzz coordinator can end a clean run with "context deadline
# exceeded" and no failing input (go.dev/issue/75804, fixed in go1.27): a
# target fails only if its run wrote a reproducer to testdata/fuzz, or
# failed some other way.
#
# Each target runs with a TMPDIR of its own, removed after it: the fuzz
# workers stopped at -fuzztime never run their t.TempDir cleanups, and
# their cache directories (up to 700 MB each) stayed in /tmp run after run.
fuzz:
	@failed=""; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; dir=$$pkg/testdata/fuzz/$$fn; \
		echo "== $$fn ($$pkg, $(FUZZ_TIME))"; \
		before=$$(ls $$dir 2>/dev/null | wc -l); \
		tmp=$$(mktemp -d); \
		if ! TMPDIR=$$tmp $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_TIME) $$pkg > $(BIN)/.fuzz.log 2>&1; then \
			grep -v '^fuzz: elapsed' $(BIN)/.fuzz.log; \
			if [ "$$(ls $$dir 2>/dev/null | wc -l)" = "$$before" ] && grep -q 'context deadline exceeded' $(BIN)/.fuzz.log; then \
				echo "   (go.dev/issue/75804 at the deadline, no failing input: not a failure)"; \
			else failed="$$failed $$fn"; fi; \
		elif ! grep -q '^fuzz: elapsed' $(BIN)/.fuzz.log; then \
			echo "   no fuzz target $$fn in $$pkg"; failed="$$failed $$fn"; \
		else grep '^fuzz: elapsed' $(BIN)/.fuzz.log | tail -1; fi; \
		rm -rf $$tmp; \
	done; rm -f $(BIN)/.fuzz.log; \
	if [ -n "$$failed" ]; then echo "fuzz: FAIL:$$failed (inputs in <package>/testdata/fuzz)"; exit 1; fi

soak-bin:
	$(GO) build -o $(BIN)/strata-soak ./integration/soak

soak: build tools soak-bin
	$(BIN)/strata-soak -duration $(SOAK_DURATION) $(SOAK_FLAGS)

test-gomaxprocs1: build tools
	GOMAXPROCS=1 STRATA_E2E=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

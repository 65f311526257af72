# The check lane: formatting, vet, golangci-lint (.golangci.yml) and a tidy
# go.mod. Included by the top-level Makefile, which defines GO and BIN;
# `make test` runs it first.
#
#   make check          fails on the first finding
#   make lint           golangci-lint alone

GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT         := $(BIN)/golangci-lint

.PHONY: check lint

# Installed under a versioned name so that bumping the pin reinstalls it;
# bin/golangci-lint is a link to the pinned one.
$(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION):
	rm -rf $(BIN)/.golangci-lint
	GOBIN=$(BIN)/.golangci-lint $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/.golangci-lint/golangci-lint $@
	rm -rf $(BIN)/.golangci-lint

$(GOLANGCI_LINT): $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
	ln -sf $(notdir $<) $@

lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

check: $(GOLANGCI_LINT)
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: these files need gofmt -w:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...
	$(GO) mod tidy -diff

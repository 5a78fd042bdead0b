# The Go binding (bindings/go): cgo against the build tree's library.
#
#   make check-go        gofmt, go vet, go test and go test -race against the driver
#                        double; runs examples/sgemm (the program docs/go.md shows,
#                        checked to be the same text) against the double
#   make go-test-binary  $(BUILD)/go/tenferro.test, the tests as one binary that
#                        finds the library in ../lib ($ORIGIN): carry it with
#                        $(BUILD)/lib to a GPU machine (no Go toolchain needed there) and
#                        run it with bindings/go/tools/run-test-binary
#
# Go never writes to $HOME or the network here: caches and GOPATH live in
# $(BUILD)/go, modules resolve locally (the module has no dependencies).

DEBS_CI += golang-go

GO ?= go
GO_DIR := bindings/go
GO_BUILD := $(abspath $(BUILD))/go
GO_ENV := env GOCACHE=$(GO_BUILD)/cache GOPATH=$(GO_BUILD)/path GOENV=off \
  GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local CGO_ENABLED=1 \
  PKG_CONFIG_PATH=$(abspath $(BUILD))/pkgconfig
# The double's folder first, exactly where a real libcuda.so.1 would be
# found (as tools/test/run-suites does), then the library.
GO_TEST_ENV := $(GO_ENV) TF_TEST_MODE=double \
  LD_LIBRARY_PATH=$(abspath $(DOUBLE_DIR)):$(abspath $(BUILD))/lib
GO_SRCS := $(shell find $(GO_DIR) -name '*.go' -o -name '*.[ch]' -o -name go.mod)

.PHONY: check-go go-test-binary
check-go: lib double $(PC_UNINSTALLED)
	@if ! command -v $(GO) >/dev/null; then \
	  echo "check-go: SKIPPED: no Go toolchain ($(GO) not found; 'make deps' installs golang-go)"; \
	  exit 0; \
	fi; \
	set -e; cd $(GO_DIR); \
	unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "check-go: gofmt would change: $$unformatted"; exit 1; fi; \
	$(GO_ENV) $(GO) vet ./...; \
	log=$(GO_BUILD)/test.log; mkdir -p $(GO_BUILD); \
	if ! $(GO_TEST_ENV) $(GO) test -v -count=1 ./... >$$log 2>&1; then cat $$log; exit 1; fi; \
	grep -E '^(tenferro Go tests|ok|FAIL)' $$log; \
	echo "check-go: $$(grep -c -- '--- PASS' $$log) passed, $$(grep -c -- '--- FAIL' $$log) failed, $$(grep -c -- '--- SKIP' $$log) skipped"; \
	$(GO_TEST_ENV) $(GO) test -race -count=1 ./...; \
	$(GO_TEST_ENV) $(GO) run ./examples/sgemm; \
	cd $(CURDIR) && tools/ci/check-doc-example docs/go.md $(GO_DIR)/examples/sgemm/main.go

go-test-binary: $(GO_BUILD)/tenferro.test
$(GO_BUILD)/tenferro.test: $(GO_SRCS) $(LIB_LINKS) $(PC_UNINSTALLED)
	cd $(GO_DIR) && $(GO_ENV) $(GO) test -c -ldflags='-r $$ORIGIN/../lib' -o $@ ./tenferro

CI_TARGETS += check-go

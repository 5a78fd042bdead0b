# SPDX-License-Identifier: MIT OR Apache-2.0
# The Go binding (bindings/go): cgo, with the library opened at run time.
#
#   make check-go        gofmt, go vet, go test and go test -race against the driver
#                        double; the same API and tests built without cgo
#                        (CGO_ENABLED=0: every call returns ErrNotAvailable);
#                        examples/gpuinfo run with libtenferro_gpu.so.1 absent (it
#                        must start, say "not available" and exit 0, never 127);
#                        the build tag tenferro_linked (link-time linking) vetted
#                        and its tests of loading run; examples/sgemm (the program
#                        docs/go.md shows, checked to be the same text, as
#                        examples/gpuinfo is) against the double
#   make go-test-binary  $(BUILD)/go/tenferro.test, the tests as one binary that
#                        finds the library in ../lib ($ORIGIN; the dlopen of the
#                        library honours the executable's RUNPATH): carry it with
#                        $(BUILD)/lib to a GPU machine (no Go toolchain needed
#                        there) and run it with bindings/go/tools/run-test-binary
#
# Go never writes to $(HOME) or the network here: caches and GOPATH live in
# $(BUILD)/go, modules resolve locally (the module has no dependencies).  The
# header comes from include/ through the package's own #cgo CFLAGS; pkg-config
# (the uninstalled .pc) is needed only by the tenferro_linked build.

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
	echo "check-go: without cgo:"; \
	$(GO_ENV) CGO_ENABLED=0 $(GO) vet ./...; \
	$(GO_ENV) CGO_ENABLED=0 $(GO) test -count=1 ./...; \
	$(GO_ENV) $(GO) doc -all ./tenferro >$(GO_BUILD)/api-cgo.txt; \
	$(GO_ENV) CGO_ENABLED=0 $(GO) doc -all ./tenferro >$(GO_BUILD)/api-nocgo.txt; \
	if ! diff -u $(GO_BUILD)/api-cgo.txt $(GO_BUILD)/api-nocgo.txt; then \
	  echo "check-go: the API differs with and without cgo (above)"; exit 1; fi; \
	echo "check-go: the API is the same with and without cgo ($$(grep -c '^func' $(GO_BUILD)/api-cgo.txt) functions)"; \
	$(GO_ENV) $(GO) build -o $(GO_BUILD)/gpuinfo ./examples/gpuinfo; \
	if readelf -d $(GO_BUILD)/gpuinfo | grep -q 'NEEDED.*libtenferro_gpu'; then \
	  echo "check-go: examples/gpuinfo links libtenferro_gpu.so.1: it would not start without it"; exit 1; fi; \
	rm -rf $(GO_BUILD)/empty-lib && mkdir -p $(GO_BUILD)/empty-lib; \
	out=$$(env -u TENFERRO_GPU_LIBRARY LD_LIBRARY_PATH=$(GO_BUILD)/empty-lib $(GO_BUILD)/gpuinfo) || { \
	  echo "check-go: examples/gpuinfo without the library exited $$? (want 0): $$out"; exit 1; }; \
	echo "check-go: without the library: $$out"; \
	case "$$out" in *"not available"*) ;; *) echo "check-go: it did not report the library not available"; exit 1;; esac; \
	$(GO_ENV) $(GO) vet -tags tenferro_linked ./...; \
	$(GO_TEST_ENV) $(GO) test -tags tenferro_linked -count=1 -run 'Version|Status|Shim|Constants|StreamKeeps' ./tenferro; \
	$(GO_TEST_ENV) $(GO) run ./examples/sgemm; \
	cd $(CURDIR) && tools/ci/check-doc-example docs/go.md $(GO_DIR)/examples/sgemm/main.go; \
	tools/ci/check-doc-example docs/go.md $(GO_DIR)/examples/gpuinfo/main.go

go-test-binary: $(GO_BUILD)/tenferro.test
$(GO_BUILD)/tenferro.test: $(GO_SRCS) include/tenferro_gpu.h $(LIB_LINKS)
	cd $(GO_DIR) && $(GO_ENV) $(GO) test -c -ldflags='-r $$ORIGIN/../lib' -o $@ ./tenferro

CI_TARGETS += check-go

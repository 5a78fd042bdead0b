# SPDX-License-Identifier: MIT OR Apache-2.0
# The Julia binding (bindings/julia).  No Julia toolchain is needed for the
# main check, and none has run the Julia tests on the machines that build
# this tree: a checker parses every source file with a real Julia grammar
# (tree-sitter-julia, from npm) and verifies every ccall and @ccall against
# the header's prototypes (and cuBLAS's header, for the cuBLAS functions the
# module calls through tf_cublas_symbol), gc_safe @ccalls for the blocking
# functions, loaded only by Julia 1.12 or later, every @cfunction against
# the C callback type it is passed for, structs, constants, exports (none
# that CUDA.jl exports too), LibTenferro and TenferroGPU names, rethrows
# that keep backtraces, and the package extension Project.toml declares;
# its own tests feed it deliberately wrong snippets.
#
#   make check-julia   npm ci (once per lock change), the checker's tests, the
#                      checker on bindings/julia/src and the extensions of
#                      Project.toml (tests and the example: parsed, their
#                      rethrows, LibTenferro names and unqualified calls
#                      checked), the example's copy in docs/julia.md, and the
#                      Julia tests when a `julia` is on PATH (else a SKIPPED
#                      line)

JULIA ?= julia
JL_DIR := bindings/julia
JL_CHECKER := $(JL_DIR)/checker
# npm writes its cache inside the build tree, not to $HOME.
NPM_ENV := env npm_config_cache=$(abspath $(BUILD))/npm-cache npm_config_audit=false \
  npm_config_fund=false npm_config_update_notifier=false

# node_modules/.package-lock.json is what npm ci writes last.
$(JL_CHECKER)/node_modules/.package-lock.json: $(JL_CHECKER)/package.json $(JL_CHECKER)/package-lock.json
	cd $(JL_CHECKER) && $(NPM_ENV) npm ci --no-progress
	@touch $@

.PHONY: check-julia check-julia-ccalls
check-julia:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  echo "check-julia: SKIPPED: node and npm are needed for the ccall checker (not found)"; \
	else \
	  $(MAKE) --no-print-directory check-julia-ccalls || exit 1; \
	fi
	@if ! command -v $(JULIA) >/dev/null; then \
	  echo "check-julia: SKIPPED the Julia tests ($(JL_DIR)/test/runtests.jl): no Julia toolchain ($(JULIA) not found)"; \
	else \
	  $(MAKE) --no-print-directory lib double && \
	  env TF_TEST_MODE=double TENFERRO_GPU_LIBRARY=$(abspath $(LIB)) \
	    LD_LIBRARY_PATH=$(abspath $(DOUBLE_DIR)):$(abspath $(BUILD))/lib \
	    $(JULIA) --threads=4 --project=$(JL_DIR) $(JL_DIR)/test/runtests.jl; \
	fi

JL_CUBLAS_HEADER := $(CUDA_HOME)/include/cublas_api.h

check-julia-ccalls: $(JL_CHECKER)/node_modules/.package-lock.json
	cd $(JL_CHECKER) && CUDA_HOME=$(CUDA_HOME) node --test test/
	node $(JL_CHECKER)/check-ccalls.js include/tenferro_gpu.h $(JL_DIR)/src \
	  --vendor $(JL_CUBLAS_HEADER) --project $(JL_DIR)/Project.toml \
	  --syntax $(JL_DIR)/test $(JL_DIR)/examples
	tools/ci/check-doc-example docs/julia.md $(JL_DIR)/examples/sgemm.jl

CI_TARGETS += check-julia

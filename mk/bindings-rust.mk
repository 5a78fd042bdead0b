# Rust binding (bindings/rust/): cargo test against the CUDA driver double.
#
#   make check-rust        the crate's tests, TF_TEST_MODE=double
#   make rust-test-bin     build the test binary without running it and copy
#                          it to $(BUILD)/rust-tests/tenferro_gpu_suite (and the
#                          example to .../hello), for a GPU machine without a
#                          Rust toolchain (tools/gpu/gpu-bundle puts them in
#                          .gpu/rust/).  Run it there as
#
#     TF_TEST_MODE=gpu LD_LIBRARY_PATH=<libtenferro_gpu dir>:<cuBLAS/NVRTC dirs> \
#       .gpu/rust/tenferro_gpu_suite --test-threads=1 --skip double_ --skip source_
#
#                          Tests that need the driver double are named double_*,
#                          tests that read the repository's sources source_*;
#                          libtest's --skip matches any part of the full name
#                          (memory::double_..., source::source_...), so those two
#                          flags leave out exactly them.  Every other test runs
#                          there against the real driver, cuBLAS and NVRTC: GEMM
#                          against a CPU reference, transfers, an NVRTC kernel.
#   build.rs finds the library through the Makefile's uninstalled .pc
#   ($(PC_UNINSTALLED), libdir $(BUILD)/lib).
#
# cargo comes from PATH or $HOME/.cargo/bin; without it the tests skip with
# a line saying so.  Cargo's output goes to $(BUILD)/rust.

CARGO ?= $(or $(shell command -v cargo 2>/dev/null),$(wildcard $(HOME)/.cargo/bin/cargo))
RUST_BINDING_DIR := bindings/rust
RUST_TARGET_DIR := $(abspath $(BUILD)/rust)
BUILD_PC := $(PC_UNINSTALLED)
BUILD_PC_DIR := $(dir $(PC_UNINSTALLED))

# cargo with the build tree's library: found by pkg-config at build time,
# by the loader (the double's folder first) at run time.
RUST_ENV = MAKEFLAGS= PATH="$(dir $(CARGO)):$$PATH" CARGO_TARGET_DIR=$(RUST_TARGET_DIR) \
  CARGO_NET_OFFLINE=true PKG_CONFIG_PATH=$(abspath $(BUILD_PC_DIR)) \
  LD_LIBRARY_PATH="$(abspath $(DOUBLE_DIR)):$(abspath $(BUILD)/lib)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}"
RUST_NO_CARGO = echo "SKIPPED rust binding tests: no cargo on PATH or in $$HOME/.cargo/bin (install a Rust toolchain with rustup)"

.PHONY: check-rust rust-test-bin
check-rust: lib double $(BUILD_PC)
	@if [ -z "$(CARGO)" ]; then $(RUST_NO_CARGO); exit 0; fi; \
	echo "rust binding tests ($(CARGO), against the driver double)"; \
	$(RUST_ENV) TF_TEST_MODE=double $(CARGO) test --quiet --manifest-path $(RUST_BINDING_DIR)/Cargo.toml && \
	$(RUST_ENV) $(CARGO) run --quiet --manifest-path $(RUST_BINDING_DIR)/Cargo.toml --example hello

rust-test-bin: lib $(BUILD_PC)
	@if [ -z "$(CARGO)" ]; then $(RUST_NO_CARGO); exit 1; fi; \
	mkdir -p $(BUILD)/rust-tests; \
	exe=$$($(RUST_ENV) $(CARGO) test --no-run --message-format=json \
	         --manifest-path $(RUST_BINDING_DIR)/Cargo.toml --test suite \
	       | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1); \
	[ -n "$$exe" ] || { echo "rust-test-bin: cargo reported no test executable" >&2; exit 1; }; \
	cp "$$exe" $(BUILD)/rust-tests/tenferro_gpu_suite; \
	cp $(RUST_TARGET_DIR)/debug/examples/hello $(BUILD)/rust-tests/hello; \
	echo "$(BUILD)/rust-tests/tenferro_gpu_suite (from $$exe) and $(BUILD)/rust-tests/hello"

# The GPU run's filter, for scripts: $(RUST_GPU_SKIP).
RUST_GPU_SKIP := --skip double_ --skip source_

CI_TARGETS += check-rust

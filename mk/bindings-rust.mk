# SPDX-License-Identifier: MIT OR Apache-2.0
# Rust binding (bindings/rust/): the crates tenferro-gpu (safe API) and
# tenferro-gpu-sys (raw declarations, bindings/rust/sys/), tested with cargo
# against the CUDA driver double.
#
#   make check-rust        in order, stopping at the first failure:
#                          - docs/rust.md shows examples/hello.rs as it is;
#                          - the documentation builds with no library and no
#                            pkg-config (default feature dynamic-loading);
#                          - both crates' tests, doc tests included, against
#                            the double (TF_TEST_MODE=double), the library
#                            opened at run time;
#                          - the suite again built with the feature `linked`
#                            (pkg-config, link-time);
#                          - the example against the double, and again with
#                            libtenferro_gpu.so.1 out of the loader's reach:
#                            it must start, say "no GPU: ..." and exit 1; and
#                            with the library but no libcuda.so.1: it must
#                            give the library's message and exit 1.
#   make rust-test-bin     build the test binary without running it and copy
#                          it to $(BUILD)/rust-tests/tenferro_gpu_suite (and the
#                          example to .../hello), for a GPU machine without a
#                          Rust toolchain (tools/gpu/gpu-bundle puts them in
#                          .gpu/rust/).  Built with the default feature
#                          dynamic-loading: it opens libtenferro_gpu.so.1 at
#                          run time through LD_LIBRARY_PATH.  Run it there as
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
#                          against a CPU reference, transfers, streams moving
#                          between threads, an NVRTC kernel, the program that
#                          starts without the library.
#   make rust-bench        the per-call cost of the binding (benches/
#                          call_overhead.rs), built with dynamic-loading and
#                          with linked, against the double; informational.
#   With `linked`, the sys crate's build.rs finds the library through the
#   Makefile's uninstalled .pc ($(PC_UNINSTALLED), libdir $(BUILD)/lib).
#
# cargo comes from PATH or $HOME/.cargo/bin; without it the tests skip with
# a line saying so.  Cargo's output goes to $(BUILD)/rust.

CARGO ?= $(or $(shell command -v cargo 2>/dev/null),$(wildcard $(HOME)/.cargo/bin/cargo))
RUST_BINDING_DIR := bindings/rust
RUST_MANIFEST := --manifest-path $(RUST_BINDING_DIR)/Cargo.toml
RUST_TARGET_DIR := $(abspath $(BUILD)/rust)
BUILD_PC := $(PC_UNINSTALLED)
BUILD_PC_DIR := $(dir $(PC_UNINSTALLED))
RUST_LINKED := --no-default-features --features linked

# cargo with the build tree's library: found by pkg-config at build time
# (feature `linked` only), by the loader (the double's folder first) at run
# time.
RUST_CARGO_ENV = MAKEFLAGS= PATH="$(dir $(CARGO)):$$PATH" CARGO_TARGET_DIR=$(RUST_TARGET_DIR) \
  CARGO_NET_OFFLINE=true
RUST_ENV = $(RUST_CARGO_ENV) PKG_CONFIG_PATH=$(abspath $(BUILD_PC_DIR)) \
  LD_LIBRARY_PATH="$(abspath $(DOUBLE_DIR)):$(abspath $(BUILD)/lib)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}"
RUST_NO_CARGO = echo "SKIPPED rust binding tests: no cargo on PATH or in $$HOME/.cargo/bin (install a Rust toolchain with rustup)"

.PHONY: check-rust rust-test-bin rust-bench
check-rust: lib double $(BUILD_PC)
	@tools/ci/check-doc-example docs/rust.md $(RUST_BINDING_DIR)/examples/hello.rs
	@if [ -z "$(CARGO)" ]; then $(RUST_NO_CARGO); exit 0; fi; \
	echo "rust binding: documentation without the library or pkg-config"; \
	env -u PKG_CONFIG_PATH $(RUST_CARGO_ENV) PKG_CONFIG=false RUSTDOCFLAGS="-D warnings" \
	  $(CARGO) doc --quiet --no-deps --workspace $(RUST_MANIFEST) && \
	echo "rust binding tests ($(CARGO), against the driver double, dynamic-loading)" && \
	$(RUST_ENV) TF_TEST_MODE=double $(CARGO) test --quiet --workspace $(RUST_MANIFEST) && \
	echo "rust binding tests (feature linked)" && \
	$(RUST_ENV) TF_TEST_MODE=double $(CARGO) test --quiet $(RUST_LINKED) $(RUST_MANIFEST) --test suite && \
	$(RUST_ENV) $(CARGO) run --quiet $(RUST_MANIFEST) --example hello && \
	$(MAKE) --no-print-directory rust-hello-without-library

# The example where the loader cannot find libtenferro_gpu.so.1: only the
# double's folder on LD_LIBRARY_PATH.  (If the library is installed where
# the loader always looks, there is nothing to show.)
.PHONY: rust-hello-without-library
rust-hello-without-library:
	@hello=$(RUST_TARGET_DIR)/debug/examples/hello; \
	if { /sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null; } | grep -q 'libtenferro_gpu\.so\.1 '; then \
	  echo "SKIPPED the example without the library: libtenferro_gpu.so.1 is installed system-wide"; exit 0; fi; \
	out=$$(env -u TENFERRO_GPU_LIBRARY LD_LIBRARY_PATH=$(abspath $(DOUBLE_DIR)) $$hello 2>&1); rc=$$?; \
	if [ $$rc -ne 1 ] || ! printf '%s\n' "$$out" | grep -q '^no GPU: tenferro-gpu: cannot load libtenferro_gpu.so.1'; then \
	  echo "rust binding: the example without libtenferro_gpu.so.1 exited $$rc (want 1 and 'no GPU: ...'):"; \
	  printf '%s\n' "$$out"; exit 1; fi; \
	echo "rust binding: the example starts without libtenferro_gpu.so.1: $$out"; \
	if { /sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null; } | grep -q 'libcuda\.so\.1 '; then \
	  echo "SKIPPED the example without a CUDA driver: libcuda.so.1 is installed system-wide"; exit 0; fi; \
	out=$$(env -u TENFERRO_GPU_CUDA_DRIVER LD_LIBRARY_PATH=$(abspath $(BUILD)/lib) $$hello 2>&1); rc=$$?; \
	if [ $$rc -ne 1 ] || ! printf '%s\n' "$$out" | grep -q '^no GPU: tf_device_count: cannot load the CUDA driver libcuda.so.1'; then \
	  echo "rust binding: the example without libcuda.so.1 exited $$rc (want 1 and the library's message):"; \
	  printf '%s\n' "$$out"; exit 1; fi; \
	echo "rust binding: the example without a CUDA driver: $$out"

rust-test-bin: lib $(BUILD_PC)
	@if [ -z "$(CARGO)" ]; then $(RUST_NO_CARGO); exit 1; fi; \
	mkdir -p $(BUILD)/rust-tests; \
	exe=$$($(RUST_ENV) $(CARGO) test --no-run --message-format=json \
	         $(RUST_MANIFEST) --test suite \
	       | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1); \
	[ -n "$$exe" ] || { echo "rust-test-bin: cargo reported no test executable" >&2; exit 1; }; \
	$(RUST_ENV) $(CARGO) build --quiet $(RUST_MANIFEST) --example hello && \
	cp "$$exe" $(BUILD)/rust-tests/tenferro_gpu_suite && \
	cp $(RUST_TARGET_DIR)/debug/examples/hello $(BUILD)/rust-tests/hello && \
	echo "$(BUILD)/rust-tests/tenferro_gpu_suite (from $$exe) and $(BUILD)/rust-tests/hello"

rust-bench: lib double $(BUILD_PC)
	@if [ -z "$(CARGO)" ]; then $(RUST_NO_CARGO); exit 1; fi; \
	$(RUST_ENV) TF_TEST_MODE=double $(CARGO) bench --quiet $(RUST_MANIFEST) --bench call_overhead && \
	$(RUST_ENV) TF_TEST_MODE=double $(CARGO) bench --quiet $(RUST_LINKED) $(RUST_MANIFEST) --bench call_overhead

# The GPU run's filter, for scripts: $(RUST_GPU_SKIP).
RUST_GPU_SKIP := --skip double_ --skip source_

CI_TARGETS += check-rust

# SPDX-License-Identifier: MIT OR Apache-2.0
# The soak (tests/soak/, docs/testing.md section Soak): N threads mixing
# every call kind for D seconds, every status checked, resources sampled at
# quiescent points; exits non-zero on any error or growth.
#
#   make soak          on a GPU machine: 32 threads, 300 s, against libcuda.so.1
#                      behind the counting shim (SOAK_THREADS, SOAK_SECONDS)
#   make soak-double   against the driver double: 8 threads for 20 s (20 s
#                      once built)
#   make soak-tsan     soak-double under ThreadSanitizer (build/tsan), 8 s
#
# The program links only the library (and -ldl); the shim is a driver that
# exports cuGetProcAddress_v2 alone and counts what the library creates and
# destroys, loaded through TENFERRO_GPU_CUDA_DRIVER.  Both are built with the
# benchmarks (bench-build, so `make check` compiles them) and packed by
# tools/gpu/gpu-bundle; tools/gpu/gpu-soak runs them on the GPU machine.

SOAK_DIR := $(BUILD)/soak
SOAK_BIN := $(SOAK_DIR)/soak
SOAK_SHIM := $(SOAK_DIR)/libtf_count_driver.so
SOAK_SRCS := $(sort $(wildcard tests/soak/*.cpp))
SOAK_THREADS ?= 32
SOAK_SECONDS ?= 300
SOAK_DOUBLE_THREADS ?= 8
SOAK_DOUBLE_SECONDS ?= 20
# The double is host memory only; it measures +0.0 to +0.1 MiB: 1 MiB is ample.
SOAK_DOUBLE_RSS_MIB ?= 1

$(SOAK_BIN): $(SOAK_SRCS) tests/soak/*.h include/tenferro_gpu.h $(LIB_LINKS)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 $(OPT) -g $(WARN) -Iinclude -isystem $(CUDA_HOME)/include -pthread \
	  $(SAN_FLAGS) $(SOAK_SRCS) -o $@ -L$(BUILD)/lib -Wl,-rpath,'$$ORIGIN/../lib' \
	  -ltenferro_gpu -ldl

$(SOAK_SHIM): tests/soak/count_driver.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g $(WARN) -fPIC -shared -fvisibility=hidden \
	  -isystem $(CUDA_HOME)/include $(SAN_FLAGS) $< -o $@ -ldl -lpthread

.PHONY: soak soak-build soak-double soak-tsan
soak-build: $(SOAK_BIN) $(SOAK_SHIM)
bench-build: soak-build

soak: soak-build
	TENFERRO_GPU_CUDA_DRIVER=$(abspath $(SOAK_SHIM)) \
	  $(SOAK_BIN) --threads $(SOAK_THREADS) --seconds $(SOAK_SECONDS)

soak-double: soak-build double
	LD_LIBRARY_PATH=$(abspath $(DOUBLE_DIR)) TENFERRO_GPU_CUDA_DRIVER=$(abspath $(SOAK_SHIM)) \
	  $(SOAK_BIN) --threads $(SOAK_DOUBLE_THREADS) --seconds $(SOAK_DOUBLE_SECONDS) \
	  --rss-tolerance-mib $(SOAK_DOUBLE_RSS_MIB)

soak-tsan:
	$(MAKE) --no-print-directory BUILD=build/tsan SANITIZE=thread OPT=-O1 \
	  SOAK_DOUBLE_SECONDS=8 SOAK_DOUBLE_RSS_MIB=1024 soak-double

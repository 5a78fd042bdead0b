# tenferro-gpu
#
#   make                 the library: build/lib/libtenferro_gpu.so.1.0.0
#   make run-example     set up, build and run examples/hello (needs a GPU)
#   make check           build and run every test against the CUDA driver double
#   make check-gpu       the same suites against the real driver (GPU machine)
#   make install         PREFIX=/usr/local LIBDIR=$(PREFIX)/lib DESTDIR=
#   make bench           benchmarks against the raw driver (GPU machine)
#   make asan tsan valgrind   the suites under sanitizers
#   make mutation        the suites' mutation score (mk/mutation.mk; not in check)
#   make soak            32 threads for 300 s on a GPU (mk/soak.mk; soak-double here)
#   make docs            the API reference and guides (Doxygen), warnings are errors
#   make abi-baseline    bump abi/ to the ABI as built, on purpose (docs/abi-stability.md)
#
# CUDA is used at build time for its headers only (CUDA_HOME).  Nothing links
# against libcuda, libcudart or libcublas; the library loads them at run time.

.DEFAULT_GOAL := all
SHELL := /bin/bash
.DELETE_ON_ERROR:

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR ?=
CUDA_HOME ?= /usr/local/cuda
BUILD ?= build

# The header is the single source of the version.
version_part = $(shell sed -n 's/^\#define TF_VERSION_$(1) \([0-9]*\).*/\1/p' include/tenferro_gpu.h)
VERSION_MAJOR := $(call version_part,MAJOR)
VERSION_MINOR := $(call version_part,MINOR)
VERSION_PATCH := $(call version_part,PATCH)
VERSION := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)
SONAME := libtenferro_gpu.so.$(VERSION_MAJOR)
LIB_REAL := libtenferro_gpu.so.$(VERSION)

CXX := g++
CC := gcc
# SANITIZE=address,undefined or SANITIZE=thread builds every object with it.
SANITIZE ?=
SAN_FLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer,)
OPT ?= -O2
WARN := -Wall -Wextra -Wpedantic -Werror

LIB_CXXFLAGS := -std=c++17 $(OPT) -g -fPIC $(WARN) -fvisibility=hidden \
  -fvisibility-inlines-hidden -Iinclude -isystem $(CUDA_HOME)/include \
  -MMD -MP $(SAN_FLAGS)
# -z defs: every symbol resolved at link time.  A fuzzing build (clang's
# sanitizer runtimes live in the executable) turns it off with LIB_DEFS=.
LIB_DEFS ?= -Wl,-z,defs
LIB_LDFLAGS := -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/tenferro_gpu.map \
  $(LIB_DEFS) -Wl,-z,relro -Wl,-z,now $(SAN_FLAGS)
LIB_LIBS := -ldl -lpthread

LIB_SRCS := $(sort $(wildcard src/*.cpp))
LIB_OBJS := $(LIB_SRCS:src/%.cpp=$(BUILD)/obj/%.o)
LIB := $(BUILD)/lib/$(LIB_REAL)
LIB_LINKS := $(BUILD)/lib/$(SONAME) $(BUILD)/lib/libtenferro_gpu.so

.PHONY: all lib
all: lib
lib: $(LIB) $(LIB_LINKS)

$(BUILD)/obj/%.o: src/%.cpp | $(BUILD)/obj
	$(CXX) $(LIB_CXXFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS) src/tenferro_gpu.map | $(BUILD)/lib
	$(CXX) $(LIB_LDFLAGS) -o $@ $(LIB_OBJS) $(LIB_LIBS)

$(BUILD)/lib/$(SONAME): $(LIB)
	ln -sf $(LIB_REAL) $@
$(BUILD)/lib/libtenferro_gpu.so: $(LIB)
	ln -sf $(LIB_REAL) $@

$(BUILD)/obj $(BUILD)/lib $(BUILD)/tests $(BUILD)/examples $(BUILD)/bench:
	mkdir -p $@

-include $(LIB_OBJS:.o=.d)

# ---- dependencies ----------------------------------------------------------
# Debian packages the tests and tools need.  tools/ensure-debs installs the
# missing ones when it can (root or password-less sudo), else prints the exact
# command and fails.
# mk/*.mk fragments append what their checks need.
DEBS_CHECK := libcmocka-dev pkg-config valgrind
.PHONY: deps
deps:
	@tools/ensure-debs $(DEBS_CHECK)

# ---- the CUDA driver double --------------------------------------------------
DOUBLE_DIR := $(BUILD)/double
DOUBLE12_DIR := $(BUILD)/double12
-include tests/cuda_double/double.mk

# ---- tests -----------------------------------------------------------------
CMOCKA_CFLAGS = $(shell pkg-config --cflags cmocka 2>/dev/null)
CMOCKA_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)
TEST_CFLAGS := -std=c11 $(OPT) -g $(WARN) -Wno-unused-parameter -Iinclude -Itests -isystem $(CUDA_HOME)/include \
  -D_GNU_SOURCE $(SAN_FLAGS)
TEST_CXXFLAGS := -std=c++17 $(OPT) -g $(WARN) -Wno-unused-parameter -Iinclude -Itests -isystem $(CUDA_HOME)/include \
  -D_GNU_SOURCE $(SAN_FLAGS)
# $ORIGIN lets the test folder travel: the library sits in ../lib and a
# carried libcmocka.so.0 beside the tests.
TEST_LDFLAGS := -L$(BUILD)/lib -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib' $(SAN_FLAGS)
TEST_LIBS = -ltenferro_gpu $(CMOCKA_LIBS) -ldl -lpthread

SUPPORT_SRCS := $(sort $(wildcard tests/support/*.c))
SUPPORT_OBJS := $(SUPPORT_SRCS:tests/support/%.c=$(BUILD)/tests/support/%.o)
TEST_C_SRCS := $(sort $(wildcard tests/test_*.c))
TEST_CXX_SRCS := $(sort $(wildcard tests/test_*.cpp))
TEST_BINS := $(TEST_C_SRCS:tests/%.c=$(BUILD)/tests/%) $(TEST_CXX_SRCS:tests/%.cpp=$(BUILD)/tests/%)

$(BUILD)/tests/support/%.o: tests/support/%.c
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $(CMOCKA_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/tests/%: tests/%.c $(SUPPORT_OBJS) $(LIB_LINKS) | $(BUILD)/tests
	$(CC) $(TEST_CFLAGS) $(CMOCKA_CFLAGS) -MMD -MP $< $(SUPPORT_OBJS) -o $@ $(TEST_LDFLAGS) $(TEST_LIBS)
$(BUILD)/tests/%: tests/%.cpp $(SUPPORT_OBJS) $(LIB_LINKS) | $(BUILD)/tests
	$(CXX) $(TEST_CXXFLAGS) $(CMOCKA_CFLAGS) -MMD -MP $< $(SUPPORT_OBJS) -o $@ $(TEST_LDFLAGS) $(TEST_LIBS)
-include $(SUPPORT_OBJS:.o=.d) $(TEST_BINS:=.d)

# Helper programs the suites spawn; they do not link the library.
HELPER_SRCS := $(sort $(wildcard tests/helpers/*.c))
HELPER_BINS := $(HELPER_SRCS:tests/%.c=$(BUILD)/tests/%)
$(BUILD)/tests/helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $< -o $@ -ldl

.PHONY: tests check check-suites check-gpu
tests: lib double $(TEST_BINS) $(HELPER_BINS)

# Every suite against the double; the double's folder goes first on the
# library path, exactly where a real libcuda.so.1 would be found.
check-suites: tests
	@tools/run-suites --double $(DOUBLE_DIR) $(TEST_BINS)

# Fragments in mk/ (one per concern: bindings, ABI gate, docs, ...) add
# their own targets and append them to CHECK_TARGETS; `make check` runs each
# after the suites, in file-name order.
CHECK_TARGETS :=

# An uninstalled .pc for the build tree (the library from $(BUILD)/lib, the
# header from include/): the bindings' builds find the library through it.
PC_UNINSTALLED := $(BUILD)/pkgconfig/tenferro_gpu.pc
$(PC_UNINSTALLED): pkgconfig/tenferro_gpu.pc.in include/tenferro_gpu.h
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(abspath .)|g' -e 's|@LIBDIR@|$(abspath $(BUILD))/lib|g' \
	    -e 's|@INCLUDEDIR@|$(abspath include)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@

-include $(sort $(wildcard mk/*.mk))

check: deps
	@$(MAKE) --no-print-directory check-suites
	@$(MAKE) --no-print-directory check-static
	@$(MAKE) --no-print-directory examples bench-build
	@for t in $(CHECK_TARGETS); do $(MAKE) --no-print-directory $$t || exit 1; done
	@echo "make check: all passed"

# The same suites against the real driver: tests that need fault injection
# skip.  Run on a GPU machine.
check-gpu: tests
	@tools/run-suites --gpu $(TEST_BINS)

# ---- static checks of the build itself ---------------------------------------
.PHONY: check-static
check-static: lib
	@tools/check-library $(LIB) $(SONAME) $(VERSION)

# ---- examples and benchmarks -----------------------------------------------
EXAMPLE_SRCS := $(sort $(wildcard examples/*.c))
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/%.c=$(BUILD)/examples/%)
EXAMPLE_CFLAGS := -std=c99 $(OPT) -g $(WARN) -Iinclude
$(BUILD)/examples/%: examples/%.c $(LIB_LINKS) | $(BUILD)/examples
	$(CC) $(EXAMPLE_CFLAGS) $< -o $@ -L$(BUILD)/lib -Wl,-rpath,'$$ORIGIN/../lib' -ltenferro_gpu

.PHONY: examples run-example
examples: $(EXAMPLE_BINS)
run-example: deps lib examples
	$(BUILD)/examples/hello

BENCH_SRCS := $(sort $(wildcard bench/*.cpp))
BENCH_BINS := $(BENCH_SRCS:bench/%.cpp=$(BUILD)/bench/%)
BENCH_CXXFLAGS := -std=c++17 -O2 -g $(WARN) -Iinclude -isystem $(CUDA_HOME)/include -pthread
$(BUILD)/bench/%: bench/%.cpp bench/*.h $(LIB_LINKS) | $(BUILD)/bench
	$(CXX) $(BENCH_CXXFLAGS) $< -o $@ -L$(BUILD)/lib -Wl,-rpath,'$$ORIGIN/../lib' -ltenferro_gpu -ldl

.PHONY: bench bench-build
bench-build: $(BENCH_BINS)
# Writes docs/benchmarks.md from the measurements (GPU machine).
bench: bench-build
	@tools/run-bench $(BUILD)/bench docs/benchmarks.md

# ---- install -------------------------------------------------------------
.PHONY: install uninstall
# Rewritten on every install whose PREFIX, LIBDIR or INCLUDEDIR differ from
# the last one (a file rule alone would install a stale prefix).
$(BUILD)/tenferro_gpu.pc: pkgconfig/tenferro_gpu.pc.in include/tenferro_gpu.h FORCE
	@mkdir -p $(dir $@)
	@sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi
.PHONY: FORCE
FORCE:

install: lib $(BUILD)/tenferro_gpu.pc
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(LIB_REAL) $(DESTDIR)$(LIBDIR)/libtenferro_gpu.so
	install -m 0644 include/tenferro_gpu.h $(DESTDIR)$(INCLUDEDIR)/tenferro_gpu.h
	install -m 0644 $(BUILD)/tenferro_gpu.pc $(DESTDIR)$(PKGCONFIGDIR)/tenferro_gpu.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	      $(DESTDIR)$(LIBDIR)/libtenferro_gpu.so $(DESTDIR)$(INCLUDEDIR)/tenferro_gpu.h \
	      $(DESTDIR)$(PKGCONFIGDIR)/tenferro_gpu.pc

# ---- sanitizers ------------------------------------------------------------
.PHONY: asan tsan valgrind
asan: deps
	$(MAKE) --no-print-directory BUILD=build/asan SANITIZE=address,undefined OPT=-O1 check-suites
tsan: deps
	$(MAKE) --no-print-directory BUILD=build/tsan SANITIZE=thread OPT=-O1 check-suites
valgrind: deps tests
	@tools/run-suites --double $(DOUBLE_DIR) --valgrind $(TEST_BINS)

.PHONY: clean
clean:
	rm -rf build stage

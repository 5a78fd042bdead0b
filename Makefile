# SPDX-License-Identifier: MIT OR Apache-2.0
# tenferro-gpu
#
#   make                 the library: build/lib/libtenferro_gpu.so.MAJOR.MINOR.PATCH
#   make run-example     set up, build and run examples/hello (needs a GPU)
#   make check           build, every suite against the CUDA driver double, and the
#                        fast gates (symbols, ABI, layout, header, bad-input table,
#                        fault coverage, ...): CHECK_TARGETS, a few minutes
#   make ci              what CI runs after `make check` (.ci/run): fuzzing, the
#                        bindings, docs, packaging, asan, tsan, valgrind: CI_TARGETS
#   make check-gpu       the same suites against the real driver (GPU machine)
#   make install         PREFIX=/usr/local LIBDIR=$(PREFIX)/lib DESTDIR=: the library,
#                        the header, tenferro_gpu.pc and the CMake package
#                        (find_package(tenferro_gpu), $(LIBDIR)/cmake/tenferro_gpu);
#                        as root without DESTDIR it runs ldconfig, and it says
#                        whether programs find the library (tools/build/after-install)
#   make deb             libtenferro-gpu1 and libtenferro-gpu-dev .deb files in build/deb
#                        (dpkg-buildflags, /usr/lib/<multiarch>; mk/packaging.mk)
#   make bench           benchmarks against the raw driver (GPU machine)
#   make asan tsan valgrind   the suites under sanitizers
#   make mutation        the suites' mutation score (mk/mutation.mk; not in check)
#   make soak            32 threads for 300 s on a GPU (mk/soak.mk; soak-double here)
#   make docs            the API reference and guides (Doxygen), warnings are errors
#   make abi-baseline    bump abi/ to the ABI as built, on purpose (docs/abi-stability.md)
#   make format          clang-format 14 over src/, tests/, bench/, examples/ (.clang-format);
#                        make format-check lists what it would change
#
# Variables, from the environment or the command line:
#   CC, CXX              compilers (gcc and g++ unless named)
#   CPPFLAGS, CFLAGS, CXXFLAGS, LDFLAGS
#                        a packager's flags, after the project's own in every
#                        compile and link (dpkg-buildflags' hardening flags apply)
#   WERROR=1             warnings are errors (CI)
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
CMAKEDIR ?= $(LIBDIR)/cmake/tenferro_gpu
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

# ---- toolchain and the packager's flags ---------------------------------------
# gcc and g++ unless the environment or the command line names others (make's
# own default, CC=cc, does not count as a choice).
ifeq ($(origin CC),default)
CC := gcc
endif
ifeq ($(origin CXX),default)
CXX := g++
endif
# CPPFLAGS, CFLAGS, CXXFLAGS and LDFLAGS (from the environment or the command
# line; empty here) come after the project's own flags in every compile and
# link of the library, the double, the tests, examples and benchmarks, so a
# packager's optimization, debug and hardening flags win.
# SANITIZE=address,undefined or SANITIZE=thread builds every object with it.
SANITIZE ?=
SAN_FLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer,)
OPT ?= -O2
# WERROR=1 (CI) turns warnings into errors.
WERROR ?= 0
WARN := -Wall -Wextra -Wpedantic $(if $(filter 1,$(WERROR)),-Werror)

# -iquote src: a source in a layer folder names another's header from src/
# ("runtime/x.h"); a header beside it is found first, as always.
# Thread-locals use the default (global-dynamic) TLS model.  TLS
# descriptors (-mtls-dialect=gnu2) were tried for tf_with_context's budget:
# with the library dlopen'd (Python ctypes, Rust's dynamic loading) and
# threads started before the load, glibc's dynamic descriptor path crashed
# the Python suite (tests/test_errors.py, 2026-12-01, glibc 2.36 and 2.39).
LIB_CXXFLAGS := -std=c++17 $(OPT) -g -fPIC $(WARN) -fvisibility=hidden \
  -fvisibility-inlines-hidden -Iinclude -iquote src -isystem $(CUDA_HOME)/include \
  -MMD -MP $(SAN_FLAGS)
# -z defs: every symbol resolved at link time.  A fuzzing build (clang's
# sanitizer runtimes live in the executable) turns it off with LIB_DEFS=.
LIB_DEFS ?= -Wl,-z,defs
LIB_LDFLAGS := -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/tenferro_gpu.map \
  $(LIB_DEFS) -Wl,-z,relro -Wl,-z,now $(SAN_FLAGS)
LIB_LIBS := -ldl -lpthread

# src/*.cpp and src/<layer>/**/*.cpp; objects mirror the folders under $(BUILD)/obj.
LIB_SRCS := $(sort $(shell find src -name '*.cpp'))
LIB_OBJS := $(LIB_SRCS:src/%.cpp=$(BUILD)/obj/%.o)
LIB := $(BUILD)/lib/$(LIB_REAL)
LIB_LINKS := $(BUILD)/lib/$(SONAME) $(BUILD)/lib/libtenferro_gpu.so

.PHONY: all lib
all: lib
lib: $(LIB) $(LIB_LINKS)

$(BUILD)/obj/%.o: src/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(LIB_CXXFLAGS) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS) src/tenferro_gpu.map | $(BUILD)/lib
	$(CXX) $(LIB_LDFLAGS) $(CXXFLAGS) $(LDFLAGS) -o $@ $(LIB_OBJS) $(LIB_LIBS)

$(BUILD)/lib/$(SONAME): $(LIB)
	ln -sf $(LIB_REAL) $@
$(BUILD)/lib/libtenferro_gpu.so: $(LIB)
	ln -sf $(LIB_REAL) $@

$(BUILD)/lib $(BUILD)/tests $(BUILD)/examples $(BUILD)/bench:
	mkdir -p $@

-include $(LIB_OBJS:.o=.d)

# ---- dependencies ----------------------------------------------------------
# Debian packages the checks need: DEBS_CHECK for `make check`, DEBS_CI for
# what `make ci` adds.  tools/build/ensure-debs installs the missing ones when
# it can (root or password-less sudo), else prints the exact command and
# fails.  mk/*.mk fragments append what their checks need.
DEBS_CHECK := libcmocka-dev pkg-config
DEBS_CI := valgrind
.PHONY: deps deps-ci
deps:
	@tools/build/ensure-debs $(DEBS_CHECK)
deps-ci:
	@tools/build/ensure-debs $(DEBS_CHECK) $(DEBS_CI)

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
	$(CC) $(TEST_CFLAGS) $(CMOCKA_CFLAGS) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/tests/%: tests/%.c $(SUPPORT_OBJS) $(LIB_LINKS) | $(BUILD)/tests
	$(CC) $(TEST_CFLAGS) $(CMOCKA_CFLAGS) $(CPPFLAGS) $(CFLAGS) -MMD -MP $< $(SUPPORT_OBJS) -o $@ \
	  $(TEST_LDFLAGS) $(LDFLAGS) $(TEST_LIBS)
$(BUILD)/tests/%: tests/%.cpp $(SUPPORT_OBJS) $(LIB_LINKS) | $(BUILD)/tests
	$(CXX) $(TEST_CXXFLAGS) $(CMOCKA_CFLAGS) $(CPPFLAGS) $(CXXFLAGS) -MMD -MP $< $(SUPPORT_OBJS) -o $@ \
	  $(TEST_LDFLAGS) $(LDFLAGS) $(TEST_LIBS)
-include $(SUPPORT_OBJS:.o=.d) $(TEST_BINS:=.d)

# Helper programs the suites spawn; they do not link the library.
HELPER_SRCS := $(sort $(wildcard tests/helpers/*.c))
HELPER_BINS := $(HELPER_SRCS:tests/%.c=$(BUILD)/tests/%)
$(BUILD)/tests/helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) $(CPPFLAGS) $(CFLAGS) $< -o $@ $(LDFLAGS) -ldl

.PHONY: tests check ci check-suites check-gpu
tests: lib double $(TEST_BINS) $(HELPER_BINS)

# Every suite against the double; the double's folder goes first on the
# library path, exactly where a real libcuda.so.1 would be found.
check-suites: tests
	@tools/test/run-suites --double $(DOUBLE_DIR) $(TEST_BINS)

# Fragments in mk/ (one per concern: ABI gate, bindings, docs, ...) add their
# own targets and append each to one of two lists:
#   CHECK_TARGETS  `make check`, after the suites: fast gates over the build,
#                  the header, the sources and the tables (minutes in all)
#   CI_TARGETS     `make ci`, what CI runs after `make check`: fuzzing, the
#                  bindings, docs, packaging, sanitizers
# Each list runs in file-name order of the fragments, one make per target.
CHECK_TARGETS :=
CI_TARGETS :=

# An uninstalled .pc for the build tree (the library from $(BUILD)/lib, the
# header from include/): the bindings' builds find the library through it.
PC_UNINSTALLED := $(BUILD)/pkgconfig/tenferro_gpu.pc
$(PC_UNINSTALLED): packaging/pkgconfig/tenferro_gpu.pc.in include/tenferro_gpu.h
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(abspath .)|g' -e 's|@LIBDIR@|$(abspath $(BUILD))/lib|g' \
	    -e 's|@INCLUDEDIR@|$(abspath include)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@

-include $(sort $(wildcard mk/*.mk))

# The sanitizers (below) close `make ci`.
CI_TARGETS += asan tsan valgrind

check: deps
	@$(MAKE) --no-print-directory check-suites
	@$(MAKE) --no-print-directory check-static
	@$(MAKE) --no-print-directory examples bench-build
	@for t in $(CHECK_TARGETS); do $(MAKE) --no-print-directory $$t || exit 1; done
	@echo "make check: all passed"

ci: deps-ci
	@for t in $(CI_TARGETS); do $(MAKE) --no-print-directory $$t || exit 1; done
	@echo "make ci: all passed ($(CI_TARGETS))"

# The same suites against the real driver: tests that need fault injection
# skip.  Run on a GPU machine.
check-gpu: tests
	@tools/test/run-suites --gpu $(TEST_BINS)

# ---- static checks of the build itself ---------------------------------------
.PHONY: check-static
check-static: lib
	@tools/ci/check-library $(LIB) $(SONAME) $(VERSION)

# ---- examples and benchmarks -----------------------------------------------
EXAMPLE_SRCS := $(sort $(wildcard examples/*.c))
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/%.c=$(BUILD)/examples/%)
EXAMPLE_CFLAGS := -std=c99 $(OPT) -g $(WARN) -Iinclude
$(BUILD)/examples/%: examples/%.c $(LIB_LINKS) | $(BUILD)/examples
	$(CC) $(EXAMPLE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $< -o $@ -L$(BUILD)/lib -Wl,-rpath,'$$ORIGIN/../lib' \
	  $(LDFLAGS) -ltenferro_gpu

.PHONY: examples run-example
examples: $(EXAMPLE_BINS)
run-example: deps lib examples
	$(BUILD)/examples/hello

BENCH_SRCS := $(sort $(wildcard bench/*.cpp))
BENCH_BINS := $(BENCH_SRCS:bench/%.cpp=$(BUILD)/bench/%)
BENCH_CXXFLAGS := -std=c++17 -O2 -g $(WARN) -Iinclude -isystem $(CUDA_HOME)/include -pthread
$(BUILD)/bench/%: bench/%.cpp bench/*.h $(LIB_LINKS) | $(BUILD)/bench
	$(CXX) $(BENCH_CXXFLAGS) $(CPPFLAGS) $(CXXFLAGS) $< -o $@ -L$(BUILD)/lib \
	  -Wl,-rpath,'$$ORIGIN/../lib' $(LDFLAGS) -ltenferro_gpu -ldl

.PHONY: bench bench-build
bench-build: $(BENCH_BINS)
# Writes docs/benchmarks.md from the measurements (GPU machine).
bench: bench-build
	@tools/gpu/run-bench $(BUILD)/bench docs/benchmarks.md

# ---- install -------------------------------------------------------------
# The .pc file (packaging/pkgconfig/) and the CMake package (packaging/cmake/)
# are written from their templates for the install paths.  The CMake files
# hold paths relative to CMAKEDIR, so a staged or moved tree still works.
INSTALL_FILES := $(BUILD)/install/tenferro_gpu.pc $(BUILD)/install/tenferro_gpuConfig.cmake \
  $(BUILD)/install/tenferro_gpuConfigVersion.cmake
# realpath -s: a relative path from the names alone, whatever this machine's
# links are.
relative_to_cmakedir = $(shell realpath -m -s --relative-to=$(CMAKEDIR) $(1))
INSTALL_SUBST = -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
  -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
  -e 's|@VERSION_MAJOR@|$(VERSION_MAJOR)|g' -e 's|@LIB_REAL@|$(LIB_REAL)|g' -e 's|@SONAME@|$(SONAME)|g' \
  -e 's|@CMAKEDIR_TO_LIBDIR@|$(call relative_to_cmakedir,$(LIBDIR))|g' \
  -e 's|@CMAKEDIR_TO_INCLUDEDIR@|$(call relative_to_cmakedir,$(INCLUDEDIR))|g' \
  -e "s|@SIZEOF_VOID_P@|$$sizeof|g" -e "s|@POINTER_BITS@|$$((sizeof * 8))|g"
# Rewritten on every install whose paths differ from the last one (a file
# rule alone would install a stale prefix); a placeholder left unreplaced
# fails.  The pointer size is the compiler's, as the library is built.
define configure_install_file
	@mkdir -p $(@D)
	@sizeof=$$(echo __SIZEOF_POINTER__ | $(CC) $(CPPFLAGS) $(CFLAGS) -E -P -x c - | tail -n 1); \
	sed $(INSTALL_SUBST) $< > $@.new
	@if grep -o '@[A-Z_]*@' $@.new; then echo "$<: placeholders left unreplaced" >&2; rm $@.new; exit 1; fi
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi
endef
$(BUILD)/install/%.pc: packaging/pkgconfig/%.pc.in include/tenferro_gpu.h FORCE
	$(configure_install_file)
$(BUILD)/install/%.cmake: packaging/cmake/%.cmake.in include/tenferro_gpu.h FORCE
	$(configure_install_file)
.PHONY: FORCE
FORCE:

.PHONY: install uninstall
install: lib $(INSTALL_FILES)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(CMAKEDIR)
	install -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(LIB_REAL) $(DESTDIR)$(LIBDIR)/libtenferro_gpu.so
	install -m 0644 include/tenferro_gpu.h $(DESTDIR)$(INCLUDEDIR)/tenferro_gpu.h
	install -m 0644 $(BUILD)/install/tenferro_gpu.pc $(DESTDIR)$(PKGCONFIGDIR)/tenferro_gpu.pc
	install -m 0644 $(BUILD)/install/tenferro_gpuConfig.cmake \
	  $(BUILD)/install/tenferro_gpuConfigVersion.cmake $(DESTDIR)$(CMAKEDIR)/
	@tools/build/after-install $(LIBDIR) $(SONAME) "$(DESTDIR)"

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	      $(DESTDIR)$(LIBDIR)/libtenferro_gpu.so $(DESTDIR)$(INCLUDEDIR)/tenferro_gpu.h \
	      $(DESTDIR)$(PKGCONFIGDIR)/tenferro_gpu.pc $(DESTDIR)$(CMAKEDIR)/tenferro_gpuConfig.cmake \
	      $(DESTDIR)$(CMAKEDIR)/tenferro_gpuConfigVersion.cmake
	rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null || true

# ---- sanitizers ------------------------------------------------------------
.PHONY: asan tsan valgrind
asan: deps
	$(MAKE) --no-print-directory BUILD=build/asan SANITIZE=address,undefined OPT=-O1 check-suites
tsan: deps
	$(MAKE) --no-print-directory BUILD=build/tsan SANITIZE=thread OPT=-O1 check-suites
valgrind: deps-ci tests
	@tools/test/run-suites --double $(DOUBLE_DIR) --valgrind --rerun-failed $(TEST_BINS)

.PHONY: clean
clean:
	rm -rf build stage

# SPDX-License-Identifier: MIT OR Apache-2.0
# The CUDA driver double and its companions (tests only).
#
#   $(DOUBLE_DIR)/libcuda.so.1       driver double + tfd_* control interface
#   $(DOUBLE_DIR)/libcublas.so.13    cuBLAS double (reports 13.x)
#   $(DOUBLE_DIR)/libcublasLt.so.13  cuBLASLt double (tf_cublaslt_enqueue, bench/explore_gemm)
#   $(DOUBLE_DIR)/libnvrtc.so.13     NVRTC double
#   $(DOUBLE_DIR)/libnccl.so.2       NCCL double (all-reduce across ranks)
#   $(DOUBLE12_DIR)/libcublas.so.12  cuBLAS double (reports 12.x)
#
# The companions link the driver double and share its state; their rpath
# finds it beside them (or in ../double).  Included by the main Makefile,
# which defines BUILD, DOUBLE_DIR, DOUBLE12_DIR, OPT, WARN, SAN_FLAGS and
# CUDA_HOME; CPPFLAGS, CXXFLAGS and LDFLAGS come from the environment or the
# command line.

DOUBLE_SRC := tests/cuda_double
DOUBLE_OBJ := $(BUILD)/double-obj
DOUBLE_CXXFLAGS := -std=c++17 $(OPT) -g -fPIC $(WARN) $(SAN_FLAGS) \
  -isystem $(CUDA_HOME)/include -I$(DOUBLE_SRC) -Isrc -MMD -MP
# nodelete: a dlclose never unmaps a double, so its state (reachable only
# from its own globals) survives for leak checkers and later dlopens.
# The packager's CXXFLAGS and LDFLAGS (after these) apply to the links too.
DOUBLE_LDFLAGS = -shared -Wl,-z,defs -Wl,-z,now -Wl,-z,nodelete $(SAN_FLAGS) $(CXXFLAGS) $(LDFLAGS)

DRIVER_DOUBLE_NAMES := state queue control proc_address device context stream_event \
  memory mem_pool copy module error_names graph host_pages
DRIVER_DOUBLE_OBJS := $(DRIVER_DOUBLE_NAMES:%=$(DOUBLE_OBJ)/%.o)
DOUBLE_ALL_OBJS := $(DRIVER_DOUBLE_OBJS) $(DOUBLE_OBJ)/cublas13.o \
  $(DOUBLE_OBJ)/cublas12.o $(DOUBLE_OBJ)/nvrtc_double.o $(DOUBLE_OBJ)/nccl_double.o \
  $(DOUBLE_OBJ)/cublaslt_double.o

DOUBLE_LIBS := $(DOUBLE_DIR)/libcuda.so.1 $(DOUBLE_DIR)/libcublas.so.13 \
  $(DOUBLE_DIR)/libnvrtc.so.13 $(DOUBLE_DIR)/libnccl.so.2 $(DOUBLE12_DIR)/libcublas.so.12 \
  $(DOUBLE_DIR)/libcublasLt.so.13

.PHONY: double
double: $(DOUBLE_LIBS)

$(DOUBLE_OBJ)/%.o: $(DOUBLE_SRC)/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(DOUBLE_CXXFLAGS) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(DOUBLE_OBJ)/cublas13.o: $(DOUBLE_SRC)/cublas_double.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(DOUBLE_CXXFLAGS) $(CPPFLAGS) $(CXXFLAGS) -DTFD_CUBLAS_VERSION=130100 -c $< -o $@

$(DOUBLE_OBJ)/cublas12.o: $(DOUBLE_SRC)/cublas_double.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(DOUBLE_CXXFLAGS) $(CPPFLAGS) $(CXXFLAGS) -DTFD_CUBLAS_VERSION=120900 -c $< -o $@

$(DOUBLE_DIR)/libcuda.so.1: $(DRIVER_DOUBLE_OBJS) $(DOUBLE_SRC)/libcuda.map
	@mkdir -p $(dir $@)
	$(CXX) $(DOUBLE_LDFLAGS) -Wl,-soname,libcuda.so.1 \
	  -Wl,--version-script=$(DOUBLE_SRC)/libcuda.map -o $@ $(DRIVER_DOUBLE_OBJS) -lpthread

$(DOUBLE_DIR)/libcublas.so.13: $(DOUBLE_OBJ)/cublas13.o $(DOUBLE_SRC)/libcublas.map $(DOUBLE_DIR)/libcuda.so.1
	$(CXX) $(DOUBLE_LDFLAGS) -Wl,-soname,libcublas.so.13 \
	  -Wl,--version-script=$(DOUBLE_SRC)/libcublas.map -o $@ $< \
	  -L$(DOUBLE_DIR) -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN'

$(DOUBLE_DIR)/libcublasLt.so.13: $(DOUBLE_OBJ)/cublaslt_double.o $(DOUBLE_SRC)/libcublasLt.map $(DOUBLE_DIR)/libcuda.so.1
	$(CXX) $(DOUBLE_LDFLAGS) -Wl,-soname,libcublasLt.so.13 \
	  -Wl,--version-script=$(DOUBLE_SRC)/libcublasLt.map -o $@ $< \
	  -L$(DOUBLE_DIR) -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN'

$(DOUBLE_DIR)/libnvrtc.so.13: $(DOUBLE_OBJ)/nvrtc_double.o $(DOUBLE_SRC)/libnvrtc.map $(DOUBLE_DIR)/libcuda.so.1
	$(CXX) $(DOUBLE_LDFLAGS) -Wl,-soname,libnvrtc.so.13 \
	  -Wl,--version-script=$(DOUBLE_SRC)/libnvrtc.map -o $@ $< \
	  -L$(DOUBLE_DIR) -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN'

$(DOUBLE_DIR)/libnccl.so.2: $(DOUBLE_OBJ)/nccl_double.o $(DOUBLE_SRC)/libnccl.map $(DOUBLE_DIR)/libcuda.so.1
	$(CXX) $(DOUBLE_LDFLAGS) -Wl,-soname,libnccl.so.2 \
	  -Wl,--version-script=$(DOUBLE_SRC)/libnccl.map -o $@ $< \
	  -L$(DOUBLE_DIR) -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN' -lpthread

$(DOUBLE12_DIR)/libcublas.so.12: $(DOUBLE_OBJ)/cublas12.o $(DOUBLE_SRC)/libcublas.map $(DOUBLE_DIR)/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CXX) $(DOUBLE_LDFLAGS) -Wl,-soname,libcublas.so.12 \
	  -Wl,--version-script=$(DOUBLE_SRC)/libcublas.map -o $@ $< \
	  -L$(DOUBLE_DIR) -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN/../double'

-include $(DOUBLE_ALL_OBJS:.o=.d)

# ---- installed for binding users ------------------------------------------
# `make install-double` puts the doubles where a program or a binding's test
# suite can load them instead of a real driver, on a machine without a GPU:
#
#   LD_LIBRARY_PATH=$(DOUBLE_INSTALL_DIR)  (first on the path)
#
# plus the control interface (fault injection, execution modes, counters) as
# $(INCLUDEDIR)/tenferro_gpu/tfd_control.h.  The companions find the driver
# double beside them through their $ORIGIN rpath.  Not part of `make install`:
# a double must never shadow a real driver by accident.
DOUBLE_INSTALL_DIR ?= $(LIBDIR)/tenferro_gpu/double
DOUBLE_INSTALL_LIBS := libcuda.so.1 libcublas.so.13 libnvrtc.so.13 libnccl.so.2

.PHONY: install-double uninstall-double
install-double: $(DOUBLE_LIBS)
	install -d $(DESTDIR)$(DOUBLE_INSTALL_DIR) $(DESTDIR)$(INCLUDEDIR)/tenferro_gpu
	install -m 0755 $(addprefix $(DOUBLE_DIR)/,$(DOUBLE_INSTALL_LIBS)) $(DESTDIR)$(DOUBLE_INSTALL_DIR)/
	install -m 0644 $(DOUBLE_SRC)/tfd_control.h $(DESTDIR)$(INCLUDEDIR)/tenferro_gpu/tfd_control.h

uninstall-double:
	rm -f $(addprefix $(DESTDIR)$(DOUBLE_INSTALL_DIR)/,$(DOUBLE_INSTALL_LIBS)) \
	      $(DESTDIR)$(INCLUDEDIR)/tenferro_gpu/tfd_control.h
	rmdir $(DESTDIR)$(DOUBLE_INSTALL_DIR) $(DESTDIR)$(LIBDIR)/tenferro_gpu \
	      $(DESTDIR)$(INCLUDEDIR)/tenferro_gpu 2>/dev/null || true

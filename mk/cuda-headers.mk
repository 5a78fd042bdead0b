# SPDX-License-Identifier: MIT OR Apache-2.0
# The CUDA Toolkit's headers (CUDA_HOME, /usr/local/cuda by default): every
# object of the library, the driver double and the suites includes them.
# Where $(CUDA_HOME)/include/cuda.h is missing, the build stops before the
# first compile and says what to install or set, rather than the compiler's
# "cuda.h: No such file or directory".  `make deps` installs no CUDA
# Toolkit: NVIDIA's packages come from NVIDIA's repository.

CUDA_H := $(CUDA_HOME)/include/cuda.h

$(LIB_OBJS) $(DOUBLE_ALL_OBJS) $(SUPPORT_OBJS) $(TEST_BINS): | $(CUDA_H)

$(CUDA_H):
	@echo "tenferro-gpu builds against the CUDA Toolkit's headers (12.0 or newer), and" \
	  "$(CUDA_H) is missing." >&2
	@echo "Install the CUDA Toolkit (it goes to /usr/local/cuda: NVIDIA's apt repository," \
	  "https://developer.nvidia.com/cuda-downloads, package cuda-toolkit-13-0), or set" \
	  "CUDA_HOME to the folder that holds include/cuda.h: make CUDA_HOME=/opt/cuda-13.0 ..." >&2
	@echo "(Debian 12's own nvidia-cuda-dev is CUDA 11.8, too old.)" >&2
	@exit 1

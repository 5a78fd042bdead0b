# SPDX-License-Identifier: MIT OR Apache-2.0
# Several GPUs (issue 8).  `make check` runs test_multi_gpu against the
# double (two devices there) like every suite; on a machine with two GPUs:
#
#   make check-multi-gpu   test_multi_gpu and test_nccl against the real driver
#                          (NCCL from LD_LIBRARY_PATH or TF_TEST_NCCL)
#   make bench-peer        peer copy bandwidth against the raw driver
#
# tools/gpu/gpu-session-multi runs all of it from a bundle in one call.
.PHONY: check-multi-gpu bench-peer
check-multi-gpu: tests
	@NCCL_NVLS_ENABLE=0 tools/test/run-suites --gpu $(BUILD)/tests/test_multi_gpu $(BUILD)/tests/test_nccl

bench-peer: bench-build
	$(BUILD)/bench/bench_peer

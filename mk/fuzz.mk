# SPDX-License-Identifier: MIT OR Apache-2.0
# libFuzzer over random call sequences against the driver double
# (tests/fuzz/).  The library is built with clang, ASan, UBSan and coverage
# into build/fuzz; the double without instrumentation.  `make fuzz` runs for
# FUZZ_SECONDS starting from the committed corpus (tests/fuzz/corpus) and
# keeps what it finds in build/fuzz/found; `make fuzz-merge` folds that
# into the committed corpus, minimized, on purpose.  `make ci` runs `make fuzz`.
FUZZ_BUILD := build/fuzz
FUZZ_SECONDS ?= 60
FUZZ_BIN := $(FUZZ_BUILD)/fuzz_calls

.PHONY: fuzz fuzz-build
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CXX=clang++ CC=clang LIB_DEFS= \
	  SANITIZE=address,undefined,fuzzer-no-link OPT=-O1 lib
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) SANITIZE= double
	clang -std=c11 -O1 -g -D_GNU_SOURCE -fsanitize=fuzzer-no-link,address,undefined -Itests \
	  -c tests/support/double_link.c -o $(FUZZ_BUILD)/double_link.o
	clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude -Itests \
	  tests/fuzz/fuzz_calls.cpp $(FUZZ_BUILD)/double_link.o -o $(FUZZ_BIN) \
	  -L$(FUZZ_BUILD)/lib -Wl,-rpath,'$$ORIGIN/lib' -ltenferro_gpu -ldl

fuzz: fuzz-build
	@mkdir -p $(FUZZ_BUILD)/found
	@echo "fuzz: $(FUZZ_SECONDS) s of random call sequences (log: $(FUZZ_BUILD)/fuzz.log)"
	@LD_LIBRARY_PATH=$(FUZZ_BUILD)/double $(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=1024 -timeout=10 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/ \
	  $(FUZZ_BUILD)/found tests/fuzz/corpus >$(FUZZ_BUILD)/fuzz.log 2>&1 \
	  || { tail -60 $(FUZZ_BUILD)/fuzz.log; exit 1; }
	@grep -E '^stat::(number_of_executed_units|new_units_added)' $(FUZZ_BUILD)/fuzz.log

.PHONY: fuzz-merge
fuzz-merge: fuzz-build
	rm -rf $(FUZZ_BUILD)/merged && mkdir -p $(FUZZ_BUILD)/merged
	LD_LIBRARY_PATH=$(FUZZ_BUILD)/double $(FUZZ_BIN) -merge=1 $(FUZZ_BUILD)/merged \
	  tests/fuzz/corpus $(FUZZ_BUILD)/found
	rm -rf tests/fuzz/corpus && mv $(FUZZ_BUILD)/merged tests/fuzz/corpus

CI_TARGETS += fuzz

# What a packager and a user see of an installed tenferro-gpu, run by `make ci`:
#
#   make check-package   a staged `make install DESTDIR=... PREFIX=/usr`: the exact
#                        file list, pkg-config and the CMake package
#                        (tests/package/cmake-consumer, Debian's cmake), a consumer
#                        built from each and run against the driver double, the
#                        CMake package's version checks and relocation, dlopen of
#                        every symbol

DEBS_CI += cmake

.PHONY: check-package
check-package: lib double
	@tools/ci/check-package "$(MAKE)" $(BUILD)/package $(DOUBLE_DIR) $(VERSION)

CI_TARGETS += check-package

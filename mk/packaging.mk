# What a packager and a user see of an installed tenferro-gpu, run by `make ci`:
#
#   make check-package   a staged `make install DESTDIR=... PREFIX=/usr`: the exact
#                        file list, pkg-config, a consumer built from it and run
#                        against the driver double, dlopen of every symbol

.PHONY: check-package
check-package: lib double
	@tools/ci/check-package "$(MAKE)" $(BUILD)/package $(DOUBLE_DIR) $(VERSION)

CI_TARGETS += check-package

# SPDX-License-Identifier: MIT OR Apache-2.0
# What a packager and a user see of an installed tenferro-gpu.
#
#   make check-packaging  (make check) packaging/debian/ against the header and
#                        abi/: the changelog's version is the header's, the
#                        package is named for the SONAME, the symbols file lists
#                        exactly abi/symbols.txt
#   make check-package   (make ci) a staged `make install DESTDIR=... PREFIX=/usr`:
#                        the exact file list, pkg-config and the CMake package
#                        (tests/package/cmake-consumer, Debian's cmake), a consumer
#                        built from each and run against the driver double, the
#                        CMake package's version checks and relocation, dlopen of
#                        every symbol
#   make deb             $(DEB_BUILD)/libtenferro-gpu1_<version>_<arch>.deb and
#                        libtenferro-gpu-dev_..._<arch>.deb: the library built in
#                        $(DEB_BUILD) with dpkg-buildflags' flags (hardening=+all),
#                        installed to /usr/lib/<multiarch>, packaged by
#                        tools/build/build-deb from packaging/debian/
#   make check-deb       (make ci) make deb, then tools/ci/check-deb: contents,
#                        permissions, stripped library, lintian --fail-on error;
#                        as root, the packages installed, a pkg-config and a CMake
#                        consumer built against them and run against the driver
#                        double, then purged (without root: a SKIPPED line)

DEB_BUILD := build/deb
DEBS_CI += cmake dpkg-dev lintian

.PHONY: check-packaging check-package deb check-deb
check-packaging:
	@tools/ci/check-packaging $(VERSION)

check-package: lib double
	@tools/ci/check-package "$(MAKE)" $(BUILD)/package $(DOUBLE_DIR) $(VERSION)

# The flags are dpkg-buildflags' (a packager's DEB_CFLAGS_APPEND and the like
# apply), evaluated by the shell when the recipe runs.
deb:
	@tools/build/ensure-debs dpkg-dev
	@rm -rf $(DEB_BUILD)/stage
	@ma=$$(dpkg-architecture -qDEB_HOST_MULTIARCH) && \
	  export DEB_BUILD_MAINT_OPTIONS=hardening=+all && \
	  $(MAKE) --no-print-directory BUILD=$(DEB_BUILD) PREFIX=/usr LIBDIR=/usr/lib/$$ma \
	    DESTDIR=$(abspath $(DEB_BUILD))/stage CPPFLAGS="$$(dpkg-buildflags --get CPPFLAGS)" \
	    CFLAGS="$$(dpkg-buildflags --get CFLAGS)" CXXFLAGS="$$(dpkg-buildflags --get CXXFLAGS)" \
	    LDFLAGS="$$(dpkg-buildflags --get LDFLAGS)" install
	@tools/build/build-deb $(DEB_BUILD)/stage $(DEB_BUILD) $(VERSION)

check-deb: deb double
	@tools/build/ensure-debs cmake lintian pkg-config
	@tools/ci/check-deb $(DEB_BUILD) $(DOUBLE_DIR) $(VERSION)

CHECK_TARGETS += check-packaging
CI_TARGETS += check-package check-deb

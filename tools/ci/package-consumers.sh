# SPDX-License-Identifier: MIT OR Apache-2.0
# Builds and runs the two consumers of an installed tenferro-gpu: the
# pkg-config one (tests/package/consumer.c) and the CMake project
# tests/package/cmake-consumer (the same program, found with find_package).
# Sourced by tools/ci/check-package (a staged install) and tools/ci/check-deb
# (the installed Debian packages), which define fail(), root (the
# repository), version and major.

# pc_consumer OUT: consumer.c built with `pkg-config --cflags --libs
# tenferro_gpu` (pkg-config searches where the environment says) under
# -Wall -Wextra -Werror -pedantic.
pc_consumer() {
  local out=$1 flags
  flags=$(pkg-config --cflags --libs tenferro_gpu) || fail "pkg-config does not find tenferro_gpu"
  # shellcheck disable=SC2086 # $flags is a list of words
  cc -std=c99 -Wall -Wextra -Werror -pedantic "$root/tests/package/consumer.c" $flags -o "$out" ||
    fail "the pkg-config consumer does not build with: $flags"
}

# cmake_configure BUILD WANT [CMAKE_ARG...]: configures the CMake consumer in
# BUILD with find_package(tenferro_gpu WANT REQUIRED); its output in BUILD.log.
cmake_configure() {
  local build=$1 want=$2
  shift 2
  rm -rf "$build"
  cmake -S "$root/tests/package/cmake-consumer" -B "$build" -DTENFERRO_GPU_WANT="$want" "$@" \
    >"$build.log" 2>&1
}

# cmake_consumer BUILD WANT LIBDIR INCLUDEDIR [CMAKE_ARG...]: find_package must
# accept WANT and define tenferro_gpu::tenferro_gpu as the library in LIBDIR
# (by its SONAME) with the header in INCLUDEDIR; builds BUILD/consumer.
cmake_consumer() {
  local build=$1 want=$2 libdir=$3 includedir=$4 line
  shift 4
  cmake_configure "$build" "$want" "$@" ||
    { cat "$build.log" >&2; fail "find_package(tenferro_gpu $want) failed"; }
  for line in "VERSION=$version" "IMPORTED_LOCATION=$libdir/libtenferro_gpu.so.$version" \
              "IMPORTED_SONAME=libtenferro_gpu.so.$major" "INTERFACE_INCLUDE_DIRECTORIES=$includedir"; do
    grep -qxF -- "-- tenferro_gpu $line" "$build.log" ||
      { cat "$build.log" >&2; fail "find_package(tenferro_gpu $want) did not give $line"; }
  done
  cmake --build "$build" >>"$build.log" 2>&1 || { cat "$build.log" >&2; fail "the CMake consumer does not build"; }
  readelf -d "$build/consumer" | grep -qF "(NEEDED)             Shared library: [libtenferro_gpu.so.$major]" ||
    fail "the CMake consumer does not name libtenferro_gpu.so.$major as NEEDED"
}

# cmake_refuses BUILD WANT [CMAKE_ARG...]: find_package(tenferro_gpu WANT) must
# find the package and refuse it for its version.
cmake_refuses() {
  local build=$1 want=$2
  shift 2
  if cmake_configure "$build" "$want" "$@"; then
    cat "$build.log" >&2; fail "find_package(tenferro_gpu $want) accepted version $version"
  fi
  grep -q "compatible with requested version" "$build.log" && grep -qF "version: $version" "$build.log" ||
    { cat "$build.log" >&2; fail "find_package(tenferro_gpu $want) failed, but not on the version"; }
}

# run_consumer BIN LD_LIBRARY_PATH LIBRARY...: runs BIN (output in BIN.out); it
# must have loaded one of the LIBRARY paths, at the header's version.
run_consumer() {
  local bin=$1 path=$2 loaded
  shift 2
  env -u TENFERRO_GPU_CUDA_DRIVER LD_LIBRARY_PATH="$path" "$bin" >"$bin.out" 2>&1 ||
    { cat "$bin.out" >&2; fail "$bin failed (LD_LIBRARY_PATH=$path)"; }
  loaded=$(sed -n 's/^library //p' "$bin.out")
  case " $* " in *" $loaded "*) ;; *) cat "$bin.out" >&2; fail "$bin loaded '$loaded', not one of: $*";; esac
  grep -qx "version $version" "$bin.out" || { cat "$bin.out" >&2; fail "$bin: tf_version_string() is not $version"; }
}

# run_without_double BIN LD_LIBRARY_PATH LIBRARY...: no driver must be reported
# cleanly; a machine's real driver must give a working runtime.  Prints which.
run_without_double() {
  run_consumer "$@"
  if grep -q '^driver missing: ' "$1.out"; then
    echo "driver missing, reported cleanly"
  else
    grep -qx 'runtime ok' "$1.out" || { cat "$1.out" >&2; fail "$1: unexpected output"; }
    echo "the machine's driver: runtime ok"
  fi
}

# run_with_double BIN DOUBLE_DIR LD_LIBRARY_PATH LIBRARY...: against the driver
# double, BIN must create, use and release a runtime.
run_with_double() {
  local bin=$1 double=$2 path=$3
  shift 3
  run_consumer "$bin" "$double${path:+:$path}" "$@"
  grep -qx 'devices 1' "$bin.out" && grep -qx 'runtime ok' "$bin.out" ||
    { cat "$bin.out" >&2; fail "$bin did not run a runtime against the driver double"; }
}

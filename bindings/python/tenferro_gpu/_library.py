# SPDX-License-Identifier: MIT OR Apache-2.0
"""Finding and loading libtenferro_gpu.so.1.

The library is looked up the way a Python package on ctypes usually does it,
in this order:

1. ``TENFERRO_GPU_LIBRARY``: an absolute path to the library file.  When it
   is set it is the only place tried (a wrong override is an error, never a
   silent fall-back).  A relative path is refused, as the C library refuses
   a relative ``TENFERRO_GPU_CUDA_DRIVER``: it would be resolved against the
   working directory.  The variable is ignored in set-user-ID processes.
2. The copy bundled in the package, ``tenferro_gpu/_lib/libtenferro_gpu.so.1``
   (a wheel from ``make python-wheel`` has one; a source checkout has none),
   so an installed wheel uses the library it was built and tested with.
3. The SONAME ``libtenferro_gpu.so.1`` through the dynamic loader's normal
   search path (``LD_LIBRARY_PATH``, the ld.so cache, the system folders).
4. ``pkg-config --variable=libdir tenferro_gpu`` (the ``PKG_CONFIG``
   program, ``pkg-config`` by default), for an install under a prefix the
   loader does not search.

The library is loaded once per process, at the first call that needs it, so
``import tenferro_gpu`` never fails for lack of it.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from typing import Any, List, Optional, Tuple

ENV_LIBRARY = "TENFERRO_GPU_LIBRARY"
SONAME = "libtenferro_gpu.so.1"
PKG_CONFIG_MODULE = "tenferro_gpu"
# The major version this binding speaks; it is the SONAME's number.
ABI_MAJOR = 1


class LoadError(OSError):
    """libtenferro_gpu.so.1 could not be found or is not one this binding
    can use.  The message lists every place that was tried."""

    __module__ = "tenferro_gpu"


# Where a wheel bundles the library (see mk/bindings-python.mk).
BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", SONAME)

_lock = threading.Lock()
_loaded: Optional[Tuple[ctypes.CDLL, str]] = None


def _environment_allowed() -> bool:
    """Mirror secure_getenv: no environment overrides in set-ID processes."""
    return os.getuid() == os.geteuid() and os.getgid() == os.getegid()


def _from_override(path: str) -> Tuple[ctypes.CDLL, str]:
    if not os.path.isabs(path):
        raise LoadError(
            f"{ENV_LIBRARY}={path!r} is not an absolute path; it was ignored "
            f"and nothing was loaded (give the full path of {SONAME})")
    try:
        return ctypes.CDLL(path), path
    except OSError as e:
        raise LoadError(f"{ENV_LIBRARY}={path!r} could not be loaded: {e}") from e


def _pkg_config_libdir() -> Tuple[Optional[str], Optional[str]]:
    """libdir of the tenferro_gpu pkg-config module, or (None, why)."""
    program = os.environ.get("PKG_CONFIG", "pkg-config")
    try:
        done = subprocess.run(
            [program, "--variable=libdir", PKG_CONFIG_MODULE],
            capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{program} could not run ({e})"
    libdir = done.stdout.strip()
    if done.returncode != 0 or not libdir:
        why = done.stderr.strip().splitlines()
        return None, f"{program} has no module {PKG_CONFIG_MODULE}" + (
            f" ({why[0]})" if why else "")
    return libdir, None


def _search() -> Tuple[ctypes.CDLL, str]:
    """Steps 2 to 4: (CDLL, where) or raise LoadError naming each attempt."""
    tried: List[str] = []
    if os.path.exists(BUNDLED):
        try:
            return ctypes.CDLL(BUNDLED), BUNDLED
        except OSError as e:
            tried.append(f"the copy in the package: {e}")
    try:
        return ctypes.CDLL(SONAME), SONAME
    except OSError as e:
        tried.append(f"the loader's search path: {e}")
    libdir, why = _pkg_config_libdir()
    if libdir is None:
        tried.append(f"pkg-config: {why}")
    else:
        path = os.path.join(libdir, SONAME)
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"pkg-config libdir {libdir}: {e}")
    raise LoadError(
        f"cannot load {SONAME}; tried:\n  - " + "\n  - ".join(tried) +
        f"\nInstall tenferro-gpu (make install), add the folder that holds "
        f"{SONAME} to LD_LIBRARY_PATH or the folder of its tenferro_gpu.pc to "
        f"PKG_CONFIG_PATH, or set {ENV_LIBRARY} to its absolute path.")


def _check_version(lib: Any, where: str) -> None:
    lib.tf_version.restype = ctypes.c_uint32
    lib.tf_version.argtypes = []
    number = lib.tf_version()
    if number // 10000 != ABI_MAJOR:
        raise LoadError(
            f"{where} is tenferro-gpu {number // 10000}.{number // 100 % 100}."
            f"{number % 100}; this binding needs major version {ABI_MAJOR}")


def load() -> Tuple[ctypes.CDLL, str]:
    """The loaded library as (ctypes.CDLL, where it came from).

    Thread-safe; the first successful load is kept for the process.
    Raises LoadError.
    """
    global _loaded
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is None:
            override = os.environ.get(ENV_LIBRARY) if _environment_allowed() else None
            lib, where = _from_override(override) if override else _search()
            _check_version(lib, where)
            _loaded = (lib, where)
        return _loaded

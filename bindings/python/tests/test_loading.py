# SPDX-License-Identifier: MIT OR Apache-2.0
"""Finding the library: the SONAME through the loader's search path, the
TENFERRO_GPU_LIBRARY override, pkg-config; and what is said when none
works.  Each scenario runs in a child Python, since a process loads the
library once."""

import os
import shutil
import subprocess
import sys
import textwrap
import types

import pytest

import tenferro_gpu as tg
from tenferro_gpu import _library
import support

PACKAGE_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PROBE = textwrap.dedent("""
    import tenferro_gpu as tg
    try:
        print("loaded", tg.library_path(), tg.library_version_string())
    except tg.LoadError as e:
        print("LoadError", e)
""")


def _library_dir():
    return os.path.dirname(support.loaded_library_file())


def _child_env(**overrides):
    """This environment without the library's folder on LD_LIBRARY_PATH
    (the double's folder stays) and without any override."""
    env = dict(os.environ)
    libdir = _library_dir()
    kept = [d for d in env.get("LD_LIBRARY_PATH", "").split(":")
            if d and os.path.realpath(d) != libdir]
    env["LD_LIBRARY_PATH"] = ":".join(kept)
    env.pop(_library.ENV_LIBRARY, None)
    env["PYTHONPATH"] = PACKAGE_ROOT
    env.update(overrides)
    return env


def _probe(env):
    done = subprocess.run([sys.executable, "-c", PROBE], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _soname_loadable(env):
    code = ("import ctypes\ntry:\n ctypes.CDLL('libtenferro_gpu.so.1'); print(1)\n"
            "except OSError:\n print(0)")
    done = subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip() == "1"


def test_this_process_loaded_the_soname_through_the_search_path():
    if os.environ.get(_library.ENV_LIBRARY):
        pytest.skip(f"{_library.ENV_LIBRARY} is set for this run")
    assert tg.library_path() == "libtenferro_gpu.so.1"
    assert tg.library_version() == support.header_version()
    assert tg.library_version_string() == "%d.%d.%d" % support.header_version()


def test_absolute_override_is_loaded_without_the_search_path():
    path = support.loaded_library_file()
    out = _probe(_child_env(TENFERRO_GPU_LIBRARY=path))
    assert out == f"loaded {path} " + "%d.%d.%d" % support.header_version()


def test_relative_override_is_refused():
    out = _probe(_child_env(TENFERRO_GPU_LIBRARY="lib/libtenferro_gpu.so.1"))
    assert out.startswith("LoadError")
    assert "is not an absolute path" in out


def test_override_that_does_not_load_is_an_error_not_a_fallback():
    out = _probe(_child_env(TENFERRO_GPU_LIBRARY="/nonexistent/libtenferro_gpu.so.1"))
    assert out.startswith("LoadError")
    assert "/nonexistent/libtenferro_gpu.so.1" in out


def test_pkg_config_libdir_is_used_when_the_loader_cannot_find_it(tmp_path):
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    env = _child_env(PKG_CONFIG_PATH=str(tmp_path), PKG_CONFIG_LIBDIR=str(tmp_path))
    if _soname_loadable(env):
        pytest.skip("libtenferro_gpu.so.1 is installed where the loader finds it")
    (tmp_path / "tenferro_gpu.pc").write_text(textwrap.dedent(f"""\
        libdir={_library_dir()}
        Name: tenferro_gpu
        Description: test
        Version: 1.0.0
        Libs: -L${{libdir}} -ltenferro_gpu
        """))
    out = _probe(env)
    assert out.startswith(f"loaded {_library_dir()}/libtenferro_gpu.so.1 ")


def test_nothing_found_names_every_place_tried_and_import_still_works(tmp_path):
    env = _child_env(PKG_CONFIG_PATH=str(tmp_path), PKG_CONFIG_LIBDIR=str(tmp_path))
    if _soname_loadable(env):
        pytest.skip("libtenferro_gpu.so.1 is installed where the loader finds it")
    out = _probe(env)
    assert out.startswith("LoadError cannot load libtenferro_gpu.so.1")
    assert "the loader's search path" in out
    assert "pkg-config" in out
    assert "TENFERRO_GPU_LIBRARY" in out


def test_a_library_of_another_major_version_is_refused():
    fake = types.SimpleNamespace(tf_version=lambda: 20304)
    with pytest.raises(tg.LoadError, match="is tenferro-gpu 2.3.4; this binding needs major version 1"):
        _library._check_version(fake, "fake.so")


NO_LIBRARY = textwrap.dedent("""
    import tenferro_gpu as tg
    print("gpu_available", tg.gpu_available())
    try:
        tg.Runtime(0)
    except tg.LoadError as e:
        print("LoadError")
""")


@pytest.mark.parametrize("override", ["/nonexistent/libtenferro_gpu.so.1", None])
def test_without_the_library_gpu_available_is_false_and_nothing_dies(tmp_path, override):
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT, LD_LIBRARY_PATH="",
               PKG_CONFIG_PATH=str(tmp_path), PKG_CONFIG_LIBDIR=str(tmp_path))
    env.pop(_library.ENV_LIBRARY, None)
    if override:
        env[_library.ENV_LIBRARY] = override
    elif _soname_loadable(env):
        pytest.skip("libtenferro_gpu.so.1 is installed where the loader finds it")
    done = subprocess.run([sys.executable, "-c", NO_LIBRARY], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["gpu_available", "False", "LoadError"]


def test_a_bundled_library_is_found_before_the_search_path(tmp_path):
    # A copy of the package with the library in tenferro_gpu/_lib/, as a
    # wheel from `make python-wheel` has it; the loader's path has none.
    package = tmp_path / "tenferro_gpu"
    shutil.copytree(os.path.join(PACKAGE_ROOT, "tenferro_gpu"), package,
                    ignore=shutil.ignore_patterns("__pycache__", "_lib"))
    (package / "_lib").mkdir()
    shutil.copy(support.loaded_library_file(), package / "_lib" / _library.SONAME)
    env = _child_env(PYTHONPATH=str(tmp_path))
    out = _probe(env)
    assert out.startswith(f"loaded {package / '_lib' / _library.SONAME} ")
    # an explicit override still wins
    out = _probe(_child_env(PYTHONPATH=str(tmp_path),
                            TENFERRO_GPU_LIBRARY=support.loaded_library_file()))
    assert out.startswith(f"loaded {support.loaded_library_file()} ")

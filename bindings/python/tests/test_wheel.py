# SPDX-License-Identifier: MIT OR Apache-2.0
"""The wheel of `make python-wheel`: installed into a target folder with
pip, it imports and runs against the driver double with no libtenferro_gpu
on the loader's path (it brings its own), and says its license."""

import glob
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

import support

WHEEL_DIR = os.environ.get("PY_WHEEL_DIR")

PROBE = textwrap.dedent("""
    import importlib.metadata, os, sys
    import tenferro_gpu as tg
    print(tg.library_path())
    print(tg.gpu_available(), tg.speedups_enabled())
    with tg.Runtime(0) as rt, rt.to_device(b"wheel!") as buf:
        print(bytes(buf.download()).decode())
    meta = importlib.metadata.metadata("tenferro-gpu")
    print(meta["License"])
""")


def _wheel():
    if not WHEEL_DIR:
        pytest.skip("PY_WHEEL_DIR is not set (make check-python builds the wheel and sets it)")
    wheels = glob.glob(os.path.join(WHEEL_DIR, "tenferro_gpu-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _double_driver():
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split(None, 5)[-1].strip()
            if os.path.basename(path) == "libcuda.so.1":
                return path
    raise AssertionError("no libcuda.so.1 mapped")


def test_the_wheel_installs_and_runs_with_its_own_library(double, tmp_path):
    wheel = _wheel()
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                           "--no-cache-dir", "--target", str(target), wheel],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("TENFERRO_GPU_LIBRARY",)}
    env.update(PYTHONPATH=str(target), LD_LIBRARY_PATH="", PYTHONNOUSERSITE="1",
               TENFERRO_GPU_CUDA_DRIVER=_double_driver())
    run = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == str(target / "tenferro_gpu" / "_lib" / "libtenferro_gpu.so.1")
    with zipfile.ZipFile(wheel) as z:
        has_extension = any("_speedups" in n for n in z.namelist())
    assert lines[1] == f"True {has_extension}"
    assert lines[2] == "wheel!"
    assert lines[3] == "MIT OR Apache-2.0"


def test_the_wheel_holds_the_licenses_and_a_valid_record():
    import base64
    import hashlib
    wheel = _wheel()
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        for name in ("LICENSE", "LICENSE-MIT", "LICENSE-APACHE"):
            with open(os.path.join(support.REPO, name), "rb") as f:
                assert z.read(f"{info}/{name}") == f.read()
        assert "tenferro_gpu/py.typed" in names
        for line in z.read(f"{info}/RECORD").decode().splitlines():
            path, digest, size = line.rsplit(",", 2)
            if path.endswith("RECORD"):
                continue
            data = z.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest == "sha256=" + expected.decode() and int(size) == len(data), path
        assert set(names) == {line.rsplit(",", 2)[0]
                              for line in z.read(f"{info}/RECORD").decode().splitlines()}

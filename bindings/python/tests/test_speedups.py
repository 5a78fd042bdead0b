# SPDX-License-Identifier: MIT OR Apache-2.0
"""The optional C extension (make python-speedups) and the ctypes path
behave the same; `make check-python` runs the hot-path tests once more
with TENFERRO_GPU_SPEEDUPS=0.  Here: the extension is used whenever it was
built for this interpreter, and the switch turns it off."""

import glob
import os
import subprocess
import sys
import sysconfig

import pytest

import tenferro_gpu as tg
from tenferro_gpu import _capi
import support

PACKAGE = os.path.join(support.REPO, "bindings", "python", "tenferro_gpu")
BUILT = os.path.exists(os.path.join(PACKAGE, "_speedups" + sysconfig.get_config_var("EXT_SUFFIX")))


def test_the_extension_is_used_when_built_unless_switched_off():
    switched_off = os.environ.get(_capi.ENV_SPEEDUPS) == "0"
    assert tg.speedups_enabled() == (BUILT and not switched_off)


@pytest.mark.parametrize("setting", ["0", "1"])
def test_the_switch_in_a_child(setting):
    env = dict(os.environ, TENFERRO_GPU_SPEEDUPS=setting,
               PYTHONPATH=os.path.join(support.REPO, "bindings", "python"))
    code = ("import tenferro_gpu as tg\n"
            "with tg.Runtime(0) as rt, rt.to_device(b'\\x07') as b:\n"
            "    print(tg.speedups_enabled(), rt.download_scalar(b, 'B'), rt.stream() > 0,\n"
            "          rt.with_context(lambda: 5))\n"
            "    rt.sync()\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(BUILT and setting == "1"), "7", "True", "5"]


def test_failures_raise_the_same_way(double, rt):
    with rt.alloc(4) as buf:
        double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
        with pytest.raises(tg.CudaError) as e:
            rt.download_scalar(buf, "f")
        assert (e.value.operation, e.value.call) == ("tf_download_scalar", "cuStreamSynchronize")
        rt.stream()
        double.inject("cuStreamSynchronize", 1, support.CUDA_ERROR_UNKNOWN)
        with pytest.raises(tg.CudaError) as e:
            rt.sync()
        assert e.value.operation == "tf_runtime_sync"
    with tg.Runtime(0) as fresh:
        double.inject("cuStreamCreate", 1, support.CUDA_ERROR_UNKNOWN)
        with pytest.raises(tg.CudaError) as e:
            fresh.stream()
        assert (e.value.operation, e.value.call) == ("tf_runtime_stream", "cuStreamCreate")

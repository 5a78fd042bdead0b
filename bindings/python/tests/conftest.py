# SPDX-License-Identifier: MIT OR Apache-2.0
"""pytest setup: the package from this source tree, the gpu marker, and the
`double` fixture for tests that inject faults through the driver double.

    TF_TEST_MODE=double   make check (LD_LIBRARY_PATH: the double's folder first)
    TF_TEST_MODE=gpu      on a GPU machine: tests marked gpu run too
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import tenferro_gpu as tg  # noqa: E402
import support  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a real GPU; runs only with TF_TEST_MODE=gpu")


def pytest_report_header(config):
    where = "the driver double" if support.DOUBLE else "the real driver"
    return (f"tenferro-gpu {tg.library_version_string()} from "
            f"{support.loaded_library_file()}; TF_TEST_MODE="
            f"{support.MODE or '(unset)'}; libcuda.so.1 is {where}")


def pytest_collection_modifyitems(config, items):
    if support.MODE == "gpu":
        return
    skip = pytest.mark.skip(reason="GPU test: runs only with TF_TEST_MODE=gpu")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _clean_state():
    if support.DOUBLE is not None:
        support.DOUBLE.reset()
        support.RAW.set_current(None)
    tg.set_log_callback(None)
    tg.clear_last_error()


@pytest.fixture(autouse=True)
def clean_state():
    """Every test starts and ends with no fault rule, the default log
    callback and no recorded error on this thread; the thread's current
    context is what it was before the test (none, against the double)."""
    _clean_state()
    before = support.RAW.current()
    yield
    support.RAW.set_current(before)
    _clean_state()


@pytest.fixture
def double():
    """The driver double's control interface; skips against a real driver."""
    if support.DOUBLE is None:
        pytest.skip("needs the CUDA driver double (fault injection)")
    return support.DOUBLE


@pytest.fixture
def raw():
    """The calling thread's current CUDA context, through the loaded driver."""
    return support.RAW


@pytest.fixture
def rt():
    with tg.Runtime(0) as runtime:
        yield runtime


# ---- GPU fixtures (tests marked gpu; TF_TEST_MODE=gpu on a GPU machine) ----
#
# Every GPU test file uses these: a runtime on device 0, PyTorch or CuPy
# checked to be usable, and the calling thread's slot stream wrapped for
# each.  Work a test puts on the wrapped stream is ordered with the
# library's own work on that slot.

@pytest.fixture
def torch_cuda():
    """The torch module, with a usable CUDA device."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.fail("TF_TEST_MODE=gpu but torch.cuda.is_available() is False")
    torch.zeros(1, device="cuda")        # initialise torch's CUDA state
    return torch


@pytest.fixture
def torch_slot_stream(rt, torch_cuda):
    """rt's slot stream for this thread as a torch.cuda.ExternalStream."""
    device = torch_cuda.device("cuda", rt.device.ordinal)
    return support.torch_external_stream(torch_cuda, rt.stream(), device)


@pytest.fixture
def cupy_cuda():
    """The cupy module, with a usable CUDA device."""
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 1:
        pytest.fail("TF_TEST_MODE=gpu but CuPy sees no device")
    return cupy


@pytest.fixture
def cupy_slot_stream(rt, cupy_cuda):
    """rt's slot stream for this thread as a cupy.cuda.ExternalStream."""
    return cupy_cuda.cuda.ExternalStream(rt.stream(), rt.device.ordinal)

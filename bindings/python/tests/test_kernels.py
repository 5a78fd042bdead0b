# SPDX-License-Identifier: MIT OR Apache-2.0
"""NVRTC programs, modules and kernel launches through the binding.  The
kernel is real CUDA C++; the driver double runs its built-in of the same
name, so the same checks hold against the double and on a GPU."""

import copy
import ctypes
import gc

import pytest

import tenferro_gpu as tg
import support

np = pytest.importorskip("numpy")


@pytest.fixture
def nvrtc(rt):
    if not rt.supports(tg.Capability.RUNTIME_COMPILATION):
        pytest.skip("NVRTC cannot be loaded here (add it to LD_LIBRARY_PATH)")
    return rt


def _add_kernel(rt):
    with rt.compile(support.ADD_SOURCE, name="add.cu") as program:
        assert isinstance(program.log, str)       # "" or NVRTC's warnings
        with rt.load_module(program) as module:
            return module.function("tfd_add_f32")


@pytest.mark.parametrize("n", [1, 1000, 4097])
def test_a_compiled_kernel_runs_on_the_slot_stream(nvrtc, n):
    rt = nvrtc
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 0.5, np.float32)
    with _add_kernel(rt) as add, rt.alloc(x.nbytes) as dx, \
            rt.alloc(y.nbytes) as dy, rt.alloc(x.nbytes) as out:
        dx.upload(x)
        dy.upload(y)
        rt.launch(add, grid=(n + 255) // 256, block=256,
                  args=(dx, ctypes.c_uint64(dy.ptr), out, np.uint32(n)))
        assert np.array_equal(out.download(np.empty(n, np.float32)), x + y)


def test_programs_give_image_and_options_reach_nvrtc(nvrtc):
    rt = nvrtc
    with rt.compile(support.ADD_SOURCE, options=["-default-device"], arch=80) as p:
        image = p.image
        assert b"tfd_add_f32" in image and image.endswith(b"\0")
        assert b"80" in image
    with pytest.raises(ValueError, match="closed"):
        p.image


def test_a_compile_error_carries_the_whole_log(nvrtc):
    with pytest.raises(tg.CompileError) as e:
        nvrtc.compile('extern "C" __global__ void k() {}\n#error boom from the source\n',
                      name="broken.cu")
    assert "boom from the source" in e.value.log and "broken.cu" in e.value.log
    assert e.value.operation == "tf_program_compile"
    assert e.value.code_domain == tg.CodeDomain.NVRTC
    if support.DOUBLE is not None:
        assert support.DOUBLE.live(support.TFD_NVRTC_PROGRAMS) == 0


def test_program_clones_share_the_image_until_the_last_close(nvrtc):
    from tenferro_gpu import _capi
    p = nvrtc.compile(support.ADD_SOURCE)
    h, image, log = p.handle, p.image, p.log
    q, r = p.clone(), copy.copy(p)
    assert q.handle == r.handle == h and isinstance(r, tg.Program)
    p.close()
    p.close()                                    # a second close is a no-op
    with pytest.raises(ValueError, match="closed"):
        p.clone()
    assert q.image == image
    q.close()
    with r:
        assert r.image == image and r.log == log
    # The last close released it: the library now refuses the handle.
    with pytest.raises(tg.InvalidHandleError, match="already released") as e:
        _capi.check(_capi.api().tf_program_retain(h))
    assert e.value.operation == "tf_program_retain"


def test_closing_a_program_reports_a_refused_release(nvrtc):
    from tenferro_gpu import _capi
    p = nvrtc.compile(support.ADD_SOURCE)
    _capi.api().tf_program_release(p.handle)     # released behind the binding's back
    with pytest.raises(tg.InvalidHandleError, match="already released") as e:
        p.close()
    assert e.value.operation == "tf_program_release_checked"
    assert p.closed
    p.close()                                    # never released twice


def test_a_1_0_library_refuses_only_program_clones(monkeypatch, nvrtc):
    from tenferro_gpu import _capi
    retain = _capi.api().tf_program_retain
    for name in ("tf_program_retain", "tf_program_release_checked"):
        monkeypatch.setattr(_capi.api(), name, _capi._Missing(name, "old"))
    p = nvrtc.compile(support.ADD_SOURCE)
    with pytest.raises(tg.MissingFunctionError, match="tf_program_retain"):
        p.clone()
    assert b"tfd_add_f32" in p.image
    h = p.handle
    p.close()                                    # through the 1.0 tf_program_release
    assert p.closed
    with pytest.raises(tg.InvalidHandleError, match="already released"):
        _capi.check(retain(h))


def test_lookups_and_bad_arguments(nvrtc):
    rt = nvrtc
    with rt.compile(support.ADD_SOURCE) as p, rt.load_module(p) as module:
        with pytest.raises(tg.CudaError) as e:
            module.function("no_such_kernel")
        assert e.value.operation == "tf_module_function"
        add = module.function("tfd_add_f32")
        with pytest.raises(TypeError, match="ctypes.c_uint32"):
            rt.launch(add, 1, 1, args=(3,))
        with pytest.raises(ValueError, match="1 to 3"):
            rt.launch(add, (1, 1, 1, 1), 1)
        with pytest.raises(tg.InvalidArgumentError) as e:
            rt.launch(add, 0, 1)
        assert e.value.operation == "tf_kernel_launch"
        add.close()
    with pytest.raises(tg.InvalidArgumentError):
        rt.load_module(b"")


def test_double_a_kernel_keeps_its_module_loaded(double, nvrtc):
    rt = nvrtc
    modules = double.live(support.TFD_MODULES)
    add = _add_kernel(rt)
    assert double.live(support.TFD_MODULES) == modules + 1
    add.set_attribute(8, 1024)     # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert double.func_attribute(add.function, 8) == 1024
    with rt.alloc(16) as buf:
        rt.launch(add, 1, 4, args=(buf, buf, buf, ctypes.c_uint32(4)))
    del add
    gc.collect()
    assert double.live(support.TFD_MODULES) == modules


def test_double_a_faulting_kernel_surfaces_as_device_fault(double):
    ptx = b".version 8.0\n.target sm_90\n.visible .entry tfd_illegal_address(\n)\n{\n\tret;\n}\n"
    rt = tg.Runtime(0)
    with rt.load_module(ptx) as module, module.function("tfd_illegal_address") as bad:
        rt.launch(bad, 1, 1)
        with pytest.raises(tg.DeviceFaultError):
            rt.sync()
    rt.close()

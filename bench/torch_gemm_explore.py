#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""torch.mm(a, b, out=c) on n x n float32, n = 64, 128, 256, timed as
bench/explore_gemm times cuBLAS (sustained: 2000 calls in a row; bursts of
200; drained between samples; medians), and what PyTorch does around it:
its version and settings, the cuBLAS it loaded, the workspace it keeps, and
the kernels and CUDA runtime calls of one torch.mm (torch.profiler).  With
the library's Python binding importable, tenferro_gpu.blas.matmul is timed
and profiled the same way in the same process, on PyTorch's cuBLAS.

  torch_gemm_explore.py --explore      the measurements (GPU machine)
  torch_gemm_explore.py --cublas-path  the libcublas and libcublasLt PyTorch
                                       loaded, one per line
  torch_gemm_explore.py                nothing: tools/gpu/run-bench runs every
                                       bench/torch_*.py; this one is run by
                                       tools/gpu/gpu-explore-gemm

Lines as explore_gemm's: EXPLORE|n|variant|sustained ns|burst ns|what and
INFO|key|value.
"""
import ctypes
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SIZES = (64, 128, 256)


def info(key, value):
    print(f"INFO|{key}|{value}", flush=True)


def loaded(prefix):
    """Paths of the mapped shared objects whose name starts with prefix."""
    paths = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if os.path.basename(path).startswith(prefix) and path not in paths:
                paths.append(path)
    return paths


def library_version(path):
    """cuBLAS's MAJOR.MINOR.PATCH, or cuBLASLt's cublasLtGetVersion()."""
    lib = ctypes.CDLL(path)
    if "cublasLt" in os.path.basename(path):
        lib.cublasLtGetVersion.restype = ctypes.c_size_t
        return str(lib.cublasLtGetVersion())
    parts = []
    for kind in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        value = ctypes.c_int(0)
        lib.cublasGetProperty(kind, ctypes.byref(value))
        parts.append(str(value.value))
    return ".".join(parts)


def medians(torch, call, iters, reps):
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            call()
        samples.append((time.perf_counter_ns() - t0) / iters)
        torch.cuda.synchronize()  # drain between samples, outside the timing
    samples.sort()
    return samples[len(samples) // 2]


def explore(torch, n, variant, what, call, check):
    for _ in range(100):
        call()
    torch.cuda.synchronize()
    if not check():
        info(f"skipped_n{n}_{variant}", "wrong product")
        return
    sustained = medians(torch, call, 2000, 15)
    burst = medians(torch, call, 200, 41)
    print(f"EXPLORE|{n}|{variant}|{sustained:.1f}|{burst:.1f}|{what}", flush=True)


def settings(torch):
    info("torch", torch.__version__)
    info("torch_cuda", torch.version.cuda)
    info("device", torch.cuda.get_device_name())
    matmul = torch.backends.cuda.matmul
    info("allow_tf32", matmul.allow_tf32)
    info("fp32_precision", getattr(matmul, "fp32_precision", "(none)"))
    info("float32_matmul_precision", torch.get_float32_matmul_precision())
    info("preferred_blas_library", torch.backends.cuda.preferred_blas_library())
    for env in ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE",
                "TORCH_CUBLAS_WORKSPACE_CACHE", "TORCH_BLAS_PREFER_CUBLASLT",
                "DISABLE_ADDMM_CUDA_LT", "CUDA_MODULE_LOADING"):
        info(f"env_{env}", os.environ.get(env, "(unset)"))


def first_mm_workspace(torch):
    """Bytes the caching allocator holds after the first torch.mm beyond its
    operands: the cuBLAS workspace PyTorch keeps per handle and stream, or 0
    when cuBLAS keeps its own."""
    a = torch.ones(64, 64, device="cuda")
    c = torch.empty(64, 64, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.mm(a, a, out=c)
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated() - before


def profile(torch, call, label, calls=50):
    """Kernels and CUDA runtime / driver calls per call of `call`."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    kernels, runtime = {}, {}
    for e in prof.events():
        name = e.name
        device = str(getattr(e, "device_type", ""))
        if device.endswith("CUDA"):
            kernels[name] = kernels.get(name, 0) + 1
        elif name.startswith(("cuda", "cu")) and name != "cudaDeviceSynchronize":
            runtime[name] = runtime.get(name, 0) + 1
    for table, key in ((kernels, "kernels"), (runtime, "runtime_calls")):
        ranked = sorted(table.items(), key=lambda kv: -kv[1])
        text = "; ".join(f"{k} x{v / calls:.2f}" for k, v in ranked)
        info(f"{label}_{key}", text or "(none)")


def torch_variants(torch, n):
    a = torch.randint(0, 4, (n, n), device="cuda").float()
    b = torch.randint(0, 4, (n, n), device="cuda").float()
    c = torch.empty(n, n, device="cuda")
    want = (a.double() @ b.double()).float()

    def check():
        return bool(torch.equal(c, want))

    def mm():
        torch.mm(a, b, out=c)

    explore(torch, n, "torch_mm", "torch.mm(a, b, out=c), default settings", mm, check)
    if n == SIZES[0]:
        profile(torch, mm, "torch_mm_n64")
    matmul = torch.backends.cuda.matmul
    tf32 = matmul.allow_tf32
    matmul.allow_tf32 = True
    explore(torch, n, "torch_mm_tf32", "torch.mm with allow_tf32 = True (other numerics)", mm,
            check)
    matmul.allow_tf32 = tf32
    backend = torch.backends.cuda.preferred_blas_library()
    try:
        torch.backends.cuda.preferred_blas_library("cublaslt")
        explore(torch, n, "torch_mm_cublaslt",
                "torch.mm with preferred_blas_library('cublaslt') (bgemm_internal_cublaslt: "
                "descriptors and heuristic made per call)", mm, check)
        if n == SIZES[0]:
            profile(torch, mm, "torch_mm_cublaslt_n64")
    finally:
        torch.backends.cuda.preferred_blas_library(backend)
    bias = torch.zeros(n, device="cuda")

    def addmm():
        torch.addmm(bias, a, b, out=c)

    explore(torch, n, "torch_addmm_bias",
            "torch.addmm(bias, a, b, out=c): the cuBLASLt gemm_and_bias path", addmm, check)


def library_variants(torch, n):
    """tenferro_gpu.blas.matmul in this process, on PyTorch's cuBLAS."""
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    built = os.path.join(ROOT, "build", "lib", "libtenferro_gpu.so.1")
    if "TENFERRO_GPU_LIBRARY" not in os.environ and os.path.exists(built):
        os.environ["TENFERRO_GPU_LIBRARY"] = built
    try:
        import tenferro_gpu as tg
        from tenferro_gpu import blas
    except Exception as e:  # the binding is optional here
        info("library_variants", f"skipped: {e}")
        return
    rt = tg.Runtime(0)
    stream = rt.bind_stream()
    ext = stream.torch_stream()
    info("python_binding", f"tenferro_gpu {tg.library_version_string()} from {tg.library_path()}, "
         f"C extension {'on' if tg.speedups_enabled() else 'off'}")
    a = torch.randint(0, 4, (n, n), device="cuda").float()
    b = torch.randint(0, 4, (n, n), device="cuda").float()
    c = torch.empty(n, n, device="cuda")
    want = (a.double() @ b.double()).float()
    torch.cuda.synchronize()
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()

    def check():
        stream.sync()
        return bool(torch.equal(c, want))

    def raw():
        blas.matmul(rt, pa, pb, pc, n, n, n)

    def foreign():
        blas.matmul(rt, a, b, c, n, n, n)

    with stream, torch.cuda.stream(ext):
        for variant, what, call in (
                ("py_matmul_addresses", "tenferro_gpu.blas.matmul on raw addresses", raw),
                ("py_matmul_torch_tensors", "tenferro_gpu.blas.matmul on torch tensors", foreign)):
            explore(torch, n, variant, what, call, check)
            if n == SIZES[0]:
                profile(torch, call, f"{variant}_n64")
    stream.sync()
    rt.close()


def main():
    if "--explore" not in sys.argv and "--cublas-path" not in sys.argv:
        return
    import torch
    workspace = first_mm_workspace(torch)  # the process's first GEMM: loads cuBLAS
    if "--cublas-path" in sys.argv:
        for prefix in ("libcublas.so", "libcublasLt.so"):
            print((loaded(prefix) or [""])[0])
        return
    settings(torch)
    info("first_mm_workspace_bytes", workspace)
    for prefix in ("libcublas.so", "libcublasLt.so"):
        for path in loaded(prefix):
            info(prefix.split(".")[0], f"{path} {library_version(path)}")
    for n in SIZES:
        torch_variants(torch, n)
    for n in SIZES:
        library_variants(torch, n)


if __name__ == "__main__":
    main()

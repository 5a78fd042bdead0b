# SPDX-License-Identifier: MIT OR Apache-2.0
"""
    TenferroGPU

Drive one CUDA device's runtime through tenferro-gpu's C library
(libtenferro_gpu.so.1): the device's primary context, its stream slots and
what hangs off them.

The library is found by its SONAME through the dynamic loader's search path
(LD_LIBRARY_PATH, ldconfig), or at the path in the environment variable
`TENFERRO_GPU_LIBRARY`.  Without it the package still loads:
[`gpu_available`](@ref) answers `false` and calls that need it throw a
`TenferroError` with `TF_ERROR_LIBRARY_NOT_FOUND`.  Failures throw
[`TenferroError`](@ref).  Device ordinals and stream slots are 0-based, as
in CUDA.

Work goes to a [`Stream`](@ref) (one stream slot, whatever thread the task
runs on).  A call given a `Runtime` uses the calling task's own stream of
that runtime ([`task_stream`](@ref)).  Blocking waits ([`sync_stream`](@ref),
downloads, [`sync_event`](@ref)) let the garbage collector run meanwhile
([`wait_mode`](@ref)).

Beyond the runtime: cuBLAS on the slot streams (`cublas_enqueue` with
`sgemm!`/`dgemm!`, which call the library's own cuBLAS), work of any library
(`stream_enqueue`), device memory and transfers of Julia arrays
(`DeviceBuffer`, `upload!`, `download!`, `download_scalar`), the device's
memory pool (`memory_stats`, `reset_peak_memory_stats`, `trim_memory`,
`record_use`; new in 1.2), page-locked
host memory and asynchronous copies (`host_alloc`, `host_register`,
`download_async!`, `upload_async!`; new in 1.1), events and
`slot_wait`, deferred release (`retire`), modules, kernels and NVRTC
(`KernelModule`, `KernelFunction`, `launch_kernel`, `compile`), graph
capture (`capture_graph`, `update_graph!`, `launch_graph`, `KernelGraph`;
new in 1.2).  With
CUDA.jl loaded, the extension TenferroGPUCUDAExt gives `CuStream` and
`CuArray` views of a `Stream` and a `DeviceBuffer`.

No name exported here is exported by CUDA.jl too, so `using CUDA,
TenferroGPU` leaves both usable; the older names `synchronize`, `stream`,
`device`, `launch` and `bind_slot` remain, unexported and deprecated.
"""
module TenferroGPU

using Libdl

include("LibTenferro.jl")
using .LibTenferro
const L = LibTenferro

export TenferroError, CublasError, Runtime, Stream, DeviceProperties, DevicePtr, DeviceBuffer, Event,
       KernelModule, KernelFunction, Program, CublasCall
export gpu_available, device_count, device_info, version, version_string, status_string
export retain, task_stream, runtime_identity, allocation_domain, supports, primary_context,
       slot_count, current_slot, raw_stream, slot_stream, sync_stream, with_context,
       set_log_callback
export cublas_enqueue, cublas_symbol, cublas_version, sgemm!, dgemm!, stream_enqueue, slot_wait
export record!, wait_event, sync_event, isdone, retire, poll_retirements, retirement_stats
export set_attribute!, launch_kernel, compile, image, program_log
export alloc, free, upload!, download!, download_scalar, device_copy!, peer_copy_available,
       peer_copy!
export host_alloc, record_use, Registration, host_register, unregister, download_async!,
       upload_async!, HostPoolStats, host_stats, host_trim
export MemoryStats, memory_stats, reset_peak_memory_stats, trim_memory
export KernelGraph, capture_graph, update_graph!, launch_graph

"Environment variable naming the library file to load instead of the SONAME."
const LIBRARY_ENV = "TENFERRO_GPU_LIBRARY"

include("library.jl")
include("errors.jl")
include("handles.jl")
include("devices.jl")
include("runtime.jl")
include("streams.jl")
include("callbacks.jl")
include("wait.jl")
include("host_ranges.jl")
include("failed_copy.jl")
include("memory.jl")
include("memory_pool.jl")
include("host.jl")
include("cublas.jl")
include("events.jl")
include("kernels.jl")
include("graphs.jl")
include("deprecated.jl")

function __init__()
    _init_error_buffers()
    _init_callback_depth()
    _find_library()
    _init_wait_mode()
end

"""
    version() -> VersionNumber

Version of the loaded library (`tf_version`).
"""
function version()
    _need_library("tf_version")
    v = L.tf_version()
    return VersionNumber(v ÷ 10000, (v ÷ 100) % 100, v % 100)
end

"The loaded library's version string, \"major.minor.patch\" (`tf_version_string`)."
version_string() = (_need_library("tf_version_string"); unsafe_string(L.tf_version_string()))

end # module

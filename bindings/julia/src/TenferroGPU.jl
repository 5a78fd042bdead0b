"""
    TenferroGPU

Drive one CUDA device's runtime through tenferro-gpu's C library
(libtenferro_gpu.so.1): the device's primary context, per-thread stream
slots and what hangs off them.

The library is found by its SONAME through the dynamic loader's search path
(LD_LIBRARY_PATH, ldconfig), or at the path in the environment variable
`TENFERRO_GPU_LIBRARY`.  Failures throw [`TenferroError`](@ref).  Device
ordinals and stream slots are 0-based, as in CUDA.

Beyond the runtime: cuBLAS on the slot streams (`cublas_enqueue` with
`sgemm!`/`dgemm!`, which call the library's own cuBLAS), work of any library
(`stream_enqueue`), device memory and transfers of Julia arrays
(`DeviceBuffer`, `upload!`, `download!`, `download_scalar`), events and
`slot_wait`, deferred release (`retire`), modules, kernels and NVRTC
(`KernelModule`, `KernelFunction`, `launch`, `compile`).
"""
module TenferroGPU

using Libdl

include("LibTenferro.jl")
using .LibTenferro
const L = LibTenferro

export TenferroError, CublasError, Runtime, DeviceProperties, DevicePtr, DeviceBuffer, Event,
       KernelModule, KernelFunction, Program, CublasCall
export gpu_available, device_count, device_info, version, version_string, status_string
export retain, bind_slot, runtime_identity, allocation_domain, device, supports,
       primary_context, slot_count, current_slot, stream, slot_stream, synchronize,
       with_context, set_log_callback
export cublas_enqueue, cublas_symbol, cublas_version, sgemm!, dgemm!, stream_enqueue, slot_wait
export record!, wait_event, isdone, retire, poll_retirements, retirement_stats
export set_attribute!, launch, compile, image, program_log
export alloc, free, upload!, download!, download_scalar, device_copy!, peer_copy_available,
       peer_copy!

"Environment variable naming the library file to load instead of the SONAME."
const LIBRARY_ENV = "TENFERRO_GPU_LIBRARY"

include("errors.jl")
include("handles.jl")
include("devices.jl")
include("runtime.jl")
include("callbacks.jl")
include("memory.jl")
include("cublas.jl")
include("events.jl")
include("kernels.jl")

function __init__()
    _init_error_buffers()
    path = get(ENV, LIBRARY_ENV, "")
    isempty(path) && return
    # Load the override first: the ccalls name the SONAME, which the dynamic
    # loader then resolves to this already loaded copy.
    Libdl.dlopen(path, Libdl.RTLD_NOW | Libdl.RTLD_GLOBAL)
    found = Libdl.dlpath(Libdl.dlopen(L.libtenferro))
    if realpath(found) != realpath(path)
        error("$LIBRARY_ENV=$path was loaded, but $(L.libtenferro) resolves to $found: " *
              "is the SONAME of $path $(L.libtenferro)?")
    end
end

"""
    version() -> VersionNumber

Version of the loaded library (`tf_version`).
"""
function version()
    v = L.tf_version()
    return VersionNumber(v ÷ 10000, (v ÷ 100) % 100, v % 100)
end

"The loaded library's version string, \"major.minor.patch\" (`tf_version_string`)."
version_string() = unsafe_string(L.tf_version_string())

end # module

"""
    LibTenferro

The C ABI of libtenferro_gpu.so.1, one Julia function per C function, with
the C names, types and constants of `include/tenferro_gpu.h`.  Nothing here
checks statuses or reads errors: that is the job of the `TenferroGPU` layer
above.  `make check` verifies every `ccall` here against the header's
prototypes (bindings/julia/checker).

To bind a new C function, add a `ccall` wrapper with the C name below; the
checker then insists its types match the header.
"""
module LibTenferro

# The library is called by its SONAME.  TenferroGPU.__init__ first loads the
# file named by TENFERRO_GPU_LIBRARY, when set, so that this name resolves to
# that copy (the dynamic loader matches an already loaded SONAME).
const libtenferro = "libtenferro_gpu.so.1"

# ---- constants of the header ------------------------------------------------

const TF_VERSION_MAJOR = 1
const TF_ERROR_NAME_CAPACITY = 64
const TF_ERROR_MESSAGE_CAPACITY = 512
const TF_DEVICE_NAME_CAPACITY = 256

const tf_status = Int32

const TF_OK = Int32(0)
const TF_ERROR_INVALID_ARGUMENT = Int32(1)
const TF_ERROR_INVALID_HANDLE = Int32(2)
const TF_ERROR_DRIVER_NOT_FOUND = Int32(3)
const TF_ERROR_DRIVER_STUB = Int32(4)
const TF_ERROR_NO_DEVICE = Int32(5)
const TF_ERROR_DEVICE_UNAVAILABLE = Int32(6)
const TF_ERROR_DRIVER_TOO_OLD = Int32(7)
const TF_ERROR_CUDA = Int32(8)
const TF_ERROR_NOT_SUPPORTED = Int32(9)
const TF_ERROR_LIBRARY_NOT_FOUND = Int32(10)
const TF_ERROR_PROVIDER = Int32(11)
const TF_ERROR_CALLBACK = Int32(12)
const TF_ERROR_OUT_OF_MEMORY = Int32(13)
const TF_ERROR_RUNTIME_STATE = Int32(14)
const TF_ERROR_DEVICE_FAULT = Int32(15)
const TF_ERROR_COMPILE = Int32(16)
const TF_ERROR_INTERNAL = Int32(17)

const TF_CODE_NONE = Int32(0)
const TF_CODE_CUDA = Int32(1)
const TF_CODE_CUBLAS = Int32(2)
const TF_CODE_NVRTC = Int32(3)
const TF_CODE_CALLBACK = Int32(4)
const TF_CODE_SYSTEM = Int32(5)

const TF_LOG_WARNING = Int32(2)
const TF_LOG_ERROR = Int32(3)

const TF_CAP_NATIVE_MODULES = Int32(1)
const TF_CAP_RUNTIME_COMPILATION = Int32(2)
const TF_CAP_RAW_STREAM = Int32(3)
const TF_CAP_SAME_DEVICE_COPY = Int32(4)
const TF_CAP_PEER_COPY = Int32(5)
const TF_CAP_CUBLAS = Int32(6)
const TF_CAP_STREAM_ORDERED_ALLOC = Int32(7)

# ---- structs (same fields, types and order as the header) -------------------

struct tf_error_info
    struct_size::UInt32
    status::Int32
    code_domain::Int32
    code::Int32
    operation::NTuple{64,UInt8}
    call::NTuple{64,UInt8}
    message::NTuple{512,UInt8}
end

struct tf_device_properties
    struct_size::UInt32
    ordinal::Int32
    name::NTuple{256,UInt8}
    uuid::NTuple{16,UInt8}
    compute_capability_major::Int32
    compute_capability_minor::Int32
    total_memory_bytes::UInt64
    multiprocessor_count::Int32
    pci_domain_id::Int32
    pci_bus_id::Int32
    pci_device_id::Int32
end

struct tf_runtime_options
    struct_size::UInt32
    stream_slots::UInt32
    cublas_workspace_bytes::UInt64
    retirement_capacity::UInt32
    flags::UInt32
end

"Opaque runtime handle; only ever used as `Ptr{tf_runtime}`."
mutable struct tf_runtime end

# ---- version ------------------------------------------------------------------

tf_version() = ccall((:tf_version, libtenferro), UInt32, ())
tf_version_string() = ccall((:tf_version_string, libtenferro), Cstring, ())

# ---- errors -------------------------------------------------------------------

tf_status_string(status) = ccall((:tf_status_string, libtenferro), Cstring, (Int32,), status)
tf_error_info_init(info) = ccall((:tf_error_info_init, libtenferro), Cvoid, (Ref{tf_error_info},), info)
tf_last_error(out) = ccall((:tf_last_error, libtenferro), Int32, (Ref{tf_error_info},), out)

# ---- logging ------------------------------------------------------------------

tf_set_log_callback(fn, user_data) =
    ccall((:tf_set_log_callback, libtenferro), Int32, (Ptr{Cvoid}, Ptr{Cvoid}), fn, user_data)

# ---- devices ------------------------------------------------------------------

tf_device_properties_init(info) =
    ccall((:tf_device_properties_init, libtenferro), Cvoid, (Ref{tf_device_properties},), info)
tf_gpu_available() = ccall((:tf_gpu_available, libtenferro), Int32, ())
tf_device_count(out_count) =
    ccall((:tf_device_count, libtenferro), Int32, (Ref{Int32},), out_count)
tf_device_info(ordinal, out) =
    ccall((:tf_device_info, libtenferro), Int32, (Int32, Ref{tf_device_properties}), ordinal, out)

# ---- runtime ------------------------------------------------------------------

tf_runtime_options_init(options) =
    ccall((:tf_runtime_options_init, libtenferro), Cvoid, (Ref{tf_runtime_options},), options)
tf_runtime_new(ordinal, out) =
    ccall((:tf_runtime_new, libtenferro), Int32, (Int32, Ref{Ptr{tf_runtime}}), ordinal, out)
tf_runtime_new_with_options(ordinal, options, out) =
    ccall((:tf_runtime_new_with_options, libtenferro), Int32,
          (Int32, Ref{tf_runtime_options}, Ref{Ptr{tf_runtime}}), ordinal, options, out)
tf_runtime_retain(rt) = ccall((:tf_runtime_retain, libtenferro), Int32, (Ptr{tf_runtime},), rt)
tf_runtime_release(rt) = ccall((:tf_runtime_release, libtenferro), Int32, (Ptr{tf_runtime},), rt)
tf_runtime_bind_slot(rt, slot, out) =
    ccall((:tf_runtime_bind_slot, libtenferro), Int32,
          (Ptr{tf_runtime}, Int32, Ref{Ptr{tf_runtime}}), rt, slot, out)
tf_runtime_identity(rt, out) =
    ccall((:tf_runtime_identity, libtenferro), Int32, (Ptr{tf_runtime}, Ref{UInt64}), rt, out)
tf_runtime_allocation_domain(rt, out) =
    ccall((:tf_runtime_allocation_domain, libtenferro), Int32, (Ptr{tf_runtime}, Ref{UInt64}), rt, out)
tf_runtime_device_info(rt, out) =
    ccall((:tf_runtime_device_info, libtenferro), Int32,
          (Ptr{tf_runtime}, Ref{tf_device_properties}), rt, out)
tf_runtime_supports(rt, capability, out_supported) =
    ccall((:tf_runtime_supports, libtenferro), Int32,
          (Ptr{tf_runtime}, Int32, Ref{Int32}), rt, capability, out_supported)
tf_runtime_primary_context(rt, out_context) =
    ccall((:tf_runtime_primary_context, libtenferro), Int32,
          (Ptr{tf_runtime}, Ref{Ptr{Cvoid}}), rt, out_context)
tf_runtime_slot_count(rt, out_count) =
    ccall((:tf_runtime_slot_count, libtenferro), Int32, (Ptr{tf_runtime}, Ref{Int32}), rt, out_count)
tf_runtime_current_slot(rt, out_slot) =
    ccall((:tf_runtime_current_slot, libtenferro), Int32, (Ptr{tf_runtime}, Ref{Int32}), rt, out_slot)
tf_runtime_stream(rt, out_stream) =
    ccall((:tf_runtime_stream, libtenferro), Int32, (Ptr{tf_runtime}, Ref{Ptr{Cvoid}}), rt, out_stream)
tf_runtime_slot_stream(rt, slot, out_stream) =
    ccall((:tf_runtime_slot_stream, libtenferro), Int32,
          (Ptr{tf_runtime}, Int32, Ref{Ptr{Cvoid}}), rt, slot, out_stream)
tf_with_context(rt, fn, user_data) =
    ccall((:tf_with_context, libtenferro), Int32,
          (Ptr{tf_runtime}, Ptr{Cvoid}, Ptr{Cvoid}), rt, fn, user_data)
tf_runtime_sync(rt) = ccall((:tf_runtime_sync, libtenferro), Int32, (Ptr{tf_runtime},), rt)

# ==== Work on the slot streams: cuBLAS, any library, kernels, retirement ====

# ==== Device memory and transfers ====

end # module

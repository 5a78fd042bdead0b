# SPDX-License-Identifier: MIT OR Apache-2.0
"""
    LibTenferro

The C ABI of libtenferro_gpu.so.1, one Julia function per C function, with
the C names, types and constants of `include/tenferro_gpu.h`.  Nothing here
checks statuses or reads errors: that is the job of the `TenferroGPU` layer
above.  `make check` verifies every `ccall` here against the header's
prototypes (bindings/julia/checker).

To bind a new C function, add a `ccall` wrapper with the C name below; the
checker then insists its types match the header.  A function that blocks
until the device is done also gets a `@ccall gc_safe=true` wrapper (see
"The blocking functions again" below).
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

const TF_DEFAULT_STREAM_SLOTS = 8
const TF_MAX_STREAM_SLOTS = 256
const TF_DEFAULT_CUBLAS_WORKSPACE_BYTES = 33554432
const TF_DEFAULT_RETIREMENT_CAPACITY = 1024
const TF_MAX_RETIREMENT_CAPACITY = 1048576
const TF_DEFAULT_DOWNLOAD_THREADS = 12
const TF_MAX_DOWNLOAD_THREADS = 64
const TF_DEFAULT_DOWNLOAD_CHUNK_BYTES = 8388608
const TF_MIN_DOWNLOAD_CHUNK_BYTES = 65536
const TF_MAX_DOWNLOAD_CHUNK_BYTES = 268435456
const TF_SCALAR_DOWNLOAD_MAX_BYTES = 16
const TF_DEFAULT_MEMORY_RELEASE_THRESHOLD = 0xffffffffffffffff
const TF_MIN_MEMORY_RESERVED_LIMIT = 33554432

const TF_CUBLAS_POINTER_MODE_HOST = Int32(0)
const TF_CUBLAS_POINTER_MODE_DEVICE = Int32(1)

const TF_COMPILE_PTX = Int32(0)
const TF_COMPILE_CUBIN = Int32(1)

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
    download_threads::UInt32
    download_chunk_bytes::UInt32
    memory_release_threshold::UInt64
    memory_reserved_limit::UInt64
end

struct tf_retirement_stats
    struct_size::UInt32
    capacity::UInt32
    deferred::UInt64
    released::UInt64
    barrier_fallbacks::UInt64
    leaked::UInt64
    in_flight::UInt64
    max_in_flight::UInt64
end

# 1.1
struct tf_host_pool_stats
    struct_size::UInt32
    reserved::UInt32
    bytes_in_use::UInt64
    bytes_cached::UInt64
    bytes_registered::UInt64
    blocks_in_use::UInt64
    blocks_cached::UInt64
    driver_allocations::UInt64
    pending_frees::UInt64
end

# 1.2
struct tf_memory_pool_stats
    struct_size::UInt32
    cached::UInt32
    reserved_bytes::UInt64
    reserved_peak::UInt64
    in_use_bytes::UInt64
    in_use_peak::UInt64
    allocations::UInt64
    frees::UInt64
    oom_retries::UInt64
    oom_failures::UInt64
    trims::UInt64
    release_threshold::UInt64
    reserved_limit::UInt64
end

struct tf_launch_config
    struct_size::UInt32
    grid_x::UInt32
    grid_y::UInt32
    grid_z::UInt32
    block_x::UInt32
    block_y::UInt32
    block_z::UInt32
    shared_memory_bytes::UInt32
end

struct tf_compile_options
    struct_size::UInt32
    target::Int32
    arch::Int32
    option_count::Int32
    options::Ptr{Ptr{UInt8}}
    name::Ptr{UInt8}
end

"Opaque runtime handle; only ever used as `Ptr{tf_runtime}`."
mutable struct tf_runtime end
"Opaque event handle; only ever used as `Ptr{tf_event}`."
mutable struct tf_event end
"Opaque module handle; only ever used as `Ptr{tf_module}`."
mutable struct tf_module end
"Opaque NVRTC program; only ever used as `Ptr{tf_program}`."
mutable struct tf_program end
"Opaque executable graph (1.2); only ever used as `Ptr{tf_graph}`."
mutable struct tf_graph end

# ---- version ------------------------------------------------------------------

tf_version() = ccall((:tf_version, libtenferro), UInt32, ())
tf_version_string() = ccall((:tf_version_string, libtenferro), Cstring, ())

# ---- errors -------------------------------------------------------------------

tf_status_string(status) = ccall((:tf_status_string, libtenferro), Cstring, (Int32,), status)
# Every *_init takes the sizeof the caller's struct: the library writes no
# more than that (a newer library never overruns this older struct).
tf_error_info_init(info) =
    ccall((:tf_error_info_init, libtenferro), Cvoid, (Ref{tf_error_info}, Csize_t),
          info, sizeof(tf_error_info))
tf_last_error(out) = ccall((:tf_last_error, libtenferro), Int32, (Ref{tf_error_info},), out)

# ---- logging ------------------------------------------------------------------

tf_set_log_callback(fn, user_data) =
    ccall((:tf_set_log_callback, libtenferro), Int32, (Ptr{Cvoid}, Ptr{Cvoid}), fn, user_data)

# ---- devices ------------------------------------------------------------------

tf_device_properties_init(info) =
    ccall((:tf_device_properties_init, libtenferro), Cvoid, (Ref{tf_device_properties}, Csize_t),
          info, sizeof(tf_device_properties))
tf_gpu_available() = ccall((:tf_gpu_available, libtenferro), Int32, ())
tf_device_count(out_count) =
    ccall((:tf_device_count, libtenferro), Int32, (Ref{Int32},), out_count)
tf_device_info(ordinal, out) =
    ccall((:tf_device_info, libtenferro), Int32, (Int32, Ref{tf_device_properties}), ordinal, out)

# ---- runtime ------------------------------------------------------------------

tf_runtime_options_init(options) =
    ccall((:tf_runtime_options_init, libtenferro), Cvoid, (Ref{tf_runtime_options}, Csize_t),
          options, sizeof(tf_runtime_options))
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

tf_cublas_enqueue(rt, pointer_mode, fn, user_data) =
    ccall((:tf_cublas_enqueue, libtenferro), Int32,
          (Ptr{tf_runtime}, Int32, Ptr{Cvoid}, Ptr{Cvoid}), rt, pointer_mode, fn, user_data)
tf_cublas_symbol(name, out_function) =
    ccall((:tf_cublas_symbol, libtenferro), Int32, (Cstring, Ref{Ptr{Cvoid}}), name, out_function)
tf_cublas_version(out_version) =
    ccall((:tf_cublas_version, libtenferro), Int32, (Ref{Int32},), out_version)
tf_stream_enqueue(rt, fn, user_data) =
    ccall((:tf_stream_enqueue, libtenferro), Int32,
          (Ptr{tf_runtime}, Ptr{Cvoid}, Ptr{Cvoid}), rt, fn, user_data)
tf_slot_wait(rt, other_slot) =
    ccall((:tf_slot_wait, libtenferro), Int32, (Ptr{tf_runtime}, Int32), rt, other_slot)

tf_event_new(rt, out) =
    ccall((:tf_event_new, libtenferro), Int32, (Ptr{tf_runtime}, Ref{Ptr{tf_event}}), rt, out)
tf_event_retain(event) = ccall((:tf_event_retain, libtenferro), Int32, (Ptr{tf_event},), event)
tf_event_release(event) = ccall((:tf_event_release, libtenferro), Int32, (Ptr{tf_event},), event)
tf_event_record(rt, event) =
    ccall((:tf_event_record, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{tf_event}), rt, event)
tf_event_wait(rt, event) =
    ccall((:tf_event_wait, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{tf_event}), rt, event)
tf_event_synchronize(event) =
    ccall((:tf_event_synchronize, libtenferro), Int32, (Ptr{tf_event},), event)
tf_event_query(event, out_done) =
    ccall((:tf_event_query, libtenferro), Int32, (Ptr{tf_event}, Ref{Int32}), event, out_done)

tf_workspace_retire(rt, resource, release, user_data) =
    ccall((:tf_workspace_retire, libtenferro), Int32,
          (Ptr{tf_runtime}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}), rt, resource, release, user_data)
tf_workspace_poll(rt) = ccall((:tf_workspace_poll, libtenferro), Int32, (Ptr{tf_runtime},), rt)
tf_retirement_stats_init(stats) =
    ccall((:tf_retirement_stats_init, libtenferro), Cvoid, (Ref{tf_retirement_stats}, Csize_t),
          stats, sizeof(tf_retirement_stats))
tf_workspace_stats(rt, out) =
    ccall((:tf_workspace_stats, libtenferro), Int32,
          (Ptr{tf_runtime}, Ref{tf_retirement_stats}), rt, out)

tf_module_load(rt, image, size, out) =
    ccall((:tf_module_load, libtenferro), Int32,
          (Ptr{tf_runtime}, Ptr{Cvoid}, Csize_t, Ref{Ptr{tf_module}}), rt, image, size, out)
tf_module_retain(mod) = ccall((:tf_module_retain, libtenferro), Int32, (Ptr{tf_module},), mod)
tf_module_release(mod) = ccall((:tf_module_release, libtenferro), Int32, (Ptr{tf_module},), mod)
tf_module_function(mod, name, out_function) =
    ccall((:tf_module_function, libtenferro), Int32,
          (Ptr{tf_module}, Cstring, Ref{Ptr{Cvoid}}), mod, name, out_function)
tf_function_set_attribute(mod, fn, attribute, value) =
    ccall((:tf_function_set_attribute, libtenferro), Int32,
          (Ptr{tf_module}, Ptr{Cvoid}, Int32, Int32), mod, fn, attribute, value)
tf_launch_config_init(config) =
    ccall((:tf_launch_config_init, libtenferro), Cvoid, (Ref{tf_launch_config}, Csize_t),
          config, sizeof(tf_launch_config))
tf_kernel_launch(rt, fn, config, args) =
    ccall((:tf_kernel_launch, libtenferro), Int32,
          (Ptr{tf_runtime}, Ptr{Cvoid}, Ref{tf_launch_config}, Ptr{Ptr{Cvoid}}), rt, fn, config, args)

tf_compile_options_init(options) =
    ccall((:tf_compile_options_init, libtenferro), Cvoid, (Ref{tf_compile_options}, Csize_t),
          options, sizeof(tf_compile_options))
tf_program_compile(rt, source, options, out) =
    ccall((:tf_program_compile, libtenferro), Int32,
          (Ptr{tf_runtime}, Cstring, Ref{tf_compile_options}, Ref{Ptr{tf_program}}),
          rt, source, options, out)
tf_program_image(program, out_image, out_size) =
    ccall((:tf_program_image, libtenferro), Int32,
          (Ptr{tf_program}, Ref{Ptr{Cvoid}}, Ref{Csize_t}), program, out_image, out_size)
tf_program_log(program, out_log) =
    ccall((:tf_program_log, libtenferro), Int32, (Ptr{tf_program}, Ref{Ptr{UInt8}}), program, out_log)
tf_program_release(program) =
    ccall((:tf_program_release, libtenferro), Cvoid, (Ptr{tf_program},), program)

# ==== Device memory and transfers ====

tf_alloc(rt, bytes, out_ptr) =
    ccall((:tf_alloc, libtenferro), Int32, (Ptr{tf_runtime}, Csize_t, Ref{UInt64}), rt, bytes, out_ptr)
tf_free(rt, ptr) = ccall((:tf_free, libtenferro), Int32, (Ptr{tf_runtime}, UInt64), rt, ptr)
tf_upload(rt, src, dst, len) =
    ccall((:tf_upload, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{Cvoid}, UInt64, Csize_t),
          rt, src, dst, len)
tf_copy(rt, src, dst, len) =
    ccall((:tf_copy, libtenferro), Int32, (Ptr{tf_runtime}, UInt64, UInt64, Csize_t), rt, src, dst, len)
tf_peer_copy_available(src_rt, dst_rt, out_available) =
    ccall((:tf_peer_copy_available, libtenferro), Int32,
          (Ptr{tf_runtime}, Ptr{tf_runtime}, Ref{Int32}), src_rt, dst_rt, out_available)
tf_peer_copy(src_rt, src, dst_rt, dst, len) =
    ccall((:tf_peer_copy, libtenferro), Int32,
          (Ptr{tf_runtime}, UInt64, Ptr{tf_runtime}, UInt64, Csize_t), src_rt, src, dst_rt, dst, len)
tf_download_scalar(rt, src, out, len) =
    ccall((:tf_download_scalar, libtenferro), Int32, (Ptr{tf_runtime}, UInt64, Ptr{Cvoid}, Csize_t),
          rt, src, out, len)
tf_download(rt, src, dst, len) =
    ccall((:tf_download, libtenferro), Int32, (Ptr{tf_runtime}, UInt64, Ptr{Cvoid}, Csize_t),
          rt, src, dst, len)

# ==== 1.1: page-locked host memory and asynchronous copies ====
#
# A 1.0 library lacks these: TenferroGPU checks for them first
# (_need_function) rather than let the ccall fail to find the symbol.

tf_host_alloc(rt, bytes, out_ptr) =
    ccall((:tf_host_alloc, libtenferro), Int32, (Ptr{tf_runtime}, Csize_t, Ref{Ptr{Cvoid}}),
          rt, bytes, out_ptr)
tf_host_free(rt, ptr) = ccall((:tf_host_free, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{Cvoid}), rt, ptr)
tf_host_record_use(rt, ptr) =
    ccall((:tf_host_record_use, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{Cvoid}), rt, ptr)
tf_host_register(rt, ptr, bytes) =
    ccall((:tf_host_register, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{Cvoid}, Csize_t), rt, ptr, bytes)
tf_host_unregister(rt, ptr) =
    ccall((:tf_host_unregister, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{Cvoid}), rt, ptr)
tf_host_pool_stats_init(stats) =
    ccall((:tf_host_pool_stats_init, libtenferro), Cvoid, (Ref{tf_host_pool_stats}, Csize_t),
          stats, sizeof(tf_host_pool_stats))
tf_host_stats(rt, out) =
    ccall((:tf_host_stats, libtenferro), Int32, (Ptr{tf_runtime}, Ref{tf_host_pool_stats}), rt, out)
tf_host_trim(rt) = ccall((:tf_host_trim, libtenferro), Int32, (Ptr{tf_runtime},), rt)
tf_download_async(rt, src, dst, len) =
    ccall((:tf_download_async, libtenferro), Int32, (Ptr{tf_runtime}, UInt64, Ptr{Cvoid}, Csize_t),
          rt, src, dst, len)
tf_upload_async(rt, src, dst, len) =
    ccall((:tf_upload_async, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{Cvoid}, UInt64, Csize_t),
          rt, src, dst, len)

# ==== 1.1: program references ====
#
# As above: TenferroGPU checks for them first (_need_function, _has_function).

tf_program_retain(program) =
    ccall((:tf_program_retain, libtenferro), Int32, (Ptr{tf_program},), program)
tf_program_release_checked(program) =
    ccall((:tf_program_release_checked, libtenferro), Int32, (Ptr{tf_program},), program)

# ==== 1.2: the device memory pool ====
#
# As above: TenferroGPU checks for them first (_need_function, _has_function).

tf_memory_pool_stats_init(stats) =
    ccall((:tf_memory_pool_stats_init, libtenferro), Cvoid, (Ref{tf_memory_pool_stats}, Csize_t),
          stats, sizeof(tf_memory_pool_stats))
tf_memory_stats(rt, out) =
    ccall((:tf_memory_stats, libtenferro), Int32, (Ptr{tf_runtime}, Ref{tf_memory_pool_stats}), rt, out)
tf_memory_reset_peak(rt) = ccall((:tf_memory_reset_peak, libtenferro), Int32, (Ptr{tf_runtime},), rt)
tf_memory_trim(rt, keep_bytes) =
    ccall((:tf_memory_trim, libtenferro), Int32, (Ptr{tf_runtime}, UInt64), rt, keep_bytes)
tf_memory_record_use(rt, ptr) =
    ccall((:tf_memory_record_use, libtenferro), Int32, (Ptr{tf_runtime}, UInt64), rt, ptr)

# ==== 1.2: graph capture ====
#
# As above: TenferroGPU checks for them first (_need_function).

tf_graph_capture_begin(rt) = ccall((:tf_graph_capture_begin, libtenferro), Int32, (Ptr{tf_runtime},), rt)
tf_graph_capture_end(rt, out) =
    ccall((:tf_graph_capture_end, libtenferro), Int32, (Ptr{tf_runtime}, Ref{Ptr{tf_graph}}), rt, out)
tf_graph_capture_update(rt, graph, out_updated_in_place) =
    ccall((:tf_graph_capture_update, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{tf_graph}, Ref{Int32}),
          rt, graph, out_updated_in_place)
tf_graph_capture_abort(rt) = ccall((:tf_graph_capture_abort, libtenferro), Int32, (Ptr{tf_runtime},), rt)
tf_graph_launch(rt, graph) =
    ccall((:tf_graph_launch, libtenferro), Int32, (Ptr{tf_runtime}, Ptr{tf_graph}), rt, graph)
tf_graph_retain(graph) = ccall((:tf_graph_retain, libtenferro), Int32, (Ptr{tf_graph},), graph)
tf_graph_release(graph) = ccall((:tf_graph_release, libtenferro), Int32, (Ptr{tf_graph},), graph)

# ==== The blocking functions again, for waits that let the GC run ====
#
# tf_runtime_sync, tf_event_synchronize, tf_download, tf_download_scalar,
# tf_host_unregister and tf_memory_trim block the calling thread until the
# device is done.  Called with a plain
# ccall, the thread stays in Julia's GC-unsafe state meanwhile, so a
# collection another thread starts waits for them.  @ccall's gc_safe
# option (Julia 1.12) lets the collector run while they block; older Julia
# refuses the option when this file is loaded, hence @static.  TenferroGPU
# chooses between these and the ccalls above (wait.jl).  The checker
# verifies these like the ccalls, and insists that every blocking function
# has one.

@static if VERSION >= v"1.12"
    tf_runtime_sync_gc_safe(rt) =
        @ccall gc_safe=true libtenferro.tf_runtime_sync(rt::Ptr{tf_runtime})::Int32
    tf_event_synchronize_gc_safe(event) =
        @ccall gc_safe=true libtenferro.tf_event_synchronize(event::Ptr{tf_event})::Int32
    tf_download_gc_safe(rt, src, dst, len) =
        @ccall gc_safe=true libtenferro.tf_download(rt::Ptr{tf_runtime}, src::UInt64, dst::Ptr{Cvoid},
                                                    len::Csize_t)::Int32
    tf_download_scalar_gc_safe(rt, src, out, len) =
        @ccall gc_safe=true libtenferro.tf_download_scalar(rt::Ptr{tf_runtime}, src::UInt64, out::Ptr{Cvoid},
                                                           len::Csize_t)::Int32
    tf_host_unregister_gc_safe(rt, ptr) =
        @ccall gc_safe=true libtenferro.tf_host_unregister(rt::Ptr{tf_runtime}, ptr::Ptr{Cvoid})::Int32
    tf_memory_trim_gc_safe(rt, keep_bytes) =
        @ccall gc_safe=true libtenferro.tf_memory_trim(rt::Ptr{tf_runtime}, keep_bytes::UInt64)::Int32
end

# ==== cuBLAS functions called through tf_cublas_symbol's addresses ====
#
# The checker verifies these against cuBLAS's own header (cublas_api.h):
# each function is named after the cuBLAS function whose address `fn` is.
# Device operands cross as typed pointers made from device addresses;
# alpha and beta point to host memory or, in device pointer mode, to
# device memory.

cublasSgemm_v2(fn, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) =
    ccall(fn, Int32,
          (Ptr{Cvoid}, Int32, Int32, Cint, Cint, Cint, Ptr{Float32}, Ptr{Float32}, Cint,
           Ptr{Float32}, Cint, Ptr{Float32}, Ptr{Float32}, Cint),
          handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
cublasDgemm_v2(fn, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) =
    ccall(fn, Int32,
          (Ptr{Cvoid}, Int32, Int32, Cint, Cint, Cint, Ptr{Float64}, Ptr{Float64}, Cint,
           Ptr{Float64}, Cint, Ptr{Float64}, Ptr{Float64}, Cint),
          handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)

end # module

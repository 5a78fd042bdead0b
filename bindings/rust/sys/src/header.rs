// SPDX-License-Identifier: MIT OR Apache-2.0
//! The declarations of `include/tenferro_gpu.h`, one for one: constants,
//! types and `#[repr(C)]` structs in the header's order, then every function
//! (once, in `declare_functions!`).
//!
//! Constants keep the header's names and values; structs its field names,
//! order and C types.  The crate's tests compare all of them with the header
//! and with the measured layout in abi/layout.c.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
use std::os::raw::{c_char, c_void};

// ---- Version ---------------------------------------------------------------

pub const TF_VERSION_MAJOR: u32 = 1;
pub const TF_VERSION_MINOR: u32 = 2;
pub const TF_VERSION_PATCH: u32 = 0;
pub const TF_VERSION_NUMBER: u32 =
    TF_VERSION_MAJOR * 10000 + TF_VERSION_MINOR * 100 + TF_VERSION_PATCH;
pub const TF_VERSION_STRING: &str = "1.2.0";

/// Largest struct_size the library accepts in a versioned struct.
pub const TF_MAX_STRUCT_SIZE: u32 = 65536;

// ---- Statuses and errors ---------------------------------------------------

pub type tf_status = i32;

pub const TF_OK: tf_status = 0;
pub const TF_ERROR_INVALID_ARGUMENT: tf_status = 1;
pub const TF_ERROR_INVALID_HANDLE: tf_status = 2;
pub const TF_ERROR_DRIVER_NOT_FOUND: tf_status = 3;
pub const TF_ERROR_DRIVER_STUB: tf_status = 4;
pub const TF_ERROR_NO_DEVICE: tf_status = 5;
pub const TF_ERROR_DEVICE_UNAVAILABLE: tf_status = 6;
pub const TF_ERROR_DRIVER_TOO_OLD: tf_status = 7;
pub const TF_ERROR_CUDA: tf_status = 8;
pub const TF_ERROR_NOT_SUPPORTED: tf_status = 9;
pub const TF_ERROR_LIBRARY_NOT_FOUND: tf_status = 10;
pub const TF_ERROR_PROVIDER: tf_status = 11;
pub const TF_ERROR_CALLBACK: tf_status = 12;
pub const TF_ERROR_OUT_OF_MEMORY: tf_status = 13;
pub const TF_ERROR_RUNTIME_STATE: tf_status = 14;
pub const TF_ERROR_DEVICE_FAULT: tf_status = 15;
pub const TF_ERROR_COMPILE: tf_status = 16;
pub const TF_ERROR_INTERNAL: tf_status = 17;

pub const TF_CODE_NONE: i32 = 0;
pub const TF_CODE_CUDA: i32 = 1;
pub const TF_CODE_CUBLAS: i32 = 2;
pub const TF_CODE_NVRTC: i32 = 3;
pub const TF_CODE_CALLBACK: i32 = 4;
pub const TF_CODE_SYSTEM: i32 = 5;

pub const TF_ERROR_NAME_CAPACITY: usize = 64;
pub const TF_ERROR_MESSAGE_CAPACITY: usize = 512;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tf_error_info {
    pub struct_size: u32,
    pub status: tf_status,
    pub code_domain: i32,
    pub code: i32,
    pub operation: [c_char; TF_ERROR_NAME_CAPACITY],
    pub call: [c_char; TF_ERROR_NAME_CAPACITY],
    pub message: [c_char; TF_ERROR_MESSAGE_CAPACITY],
}

// ---- Logging ---------------------------------------------------------------

pub const TF_LOG_WARNING: i32 = 2;
pub const TF_LOG_ERROR: i32 = 3;

pub type tf_log_fn =
    Option<unsafe extern "C" fn(level: i32, message: *const c_char, user_data: *mut c_void)>;

// ---- Devices ---------------------------------------------------------------

pub const TF_DEVICE_NAME_CAPACITY: usize = 256;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tf_device_properties {
    pub struct_size: u32,
    pub ordinal: i32,
    pub name: [c_char; TF_DEVICE_NAME_CAPACITY],
    pub uuid: [u8; 16],
    pub compute_capability_major: i32,
    pub compute_capability_minor: i32,
    pub total_memory_bytes: u64,
    pub multiprocessor_count: i32,
    pub pci_domain_id: i32,
    pub pci_bus_id: i32,
    pub pci_device_id: i32,
}

// ---- Runtime ---------------------------------------------------------------

/// Opaque, reference-counted runtime handle.
#[repr(C)]
pub struct tf_runtime {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Default number of stream slots.
pub const TF_DEFAULT_STREAM_SLOTS: u32 = 8;
/// Largest accepted number of stream slots.
pub const TF_MAX_STREAM_SLOTS: u32 = 256;
/// Default cuBLAS workspace per slot: 32 MiB.
pub const TF_DEFAULT_CUBLAS_WORKSPACE_BYTES: u64 = 32 << 20;
/// Default bound of the workspace retirement queue.
pub const TF_DEFAULT_RETIREMENT_CAPACITY: u32 = 1024;
/// Largest accepted retirement queue bound.
pub const TF_MAX_RETIREMENT_CAPACITY: u32 = 1048576;
/// Default of tf_runtime_options::download_threads (0 selects it).
pub const TF_DEFAULT_DOWNLOAD_THREADS: u32 = 12;
/// Largest accepted tf_runtime_options::download_threads.
pub const TF_MAX_DOWNLOAD_THREADS: u32 = 64;
/// Default of tf_runtime_options::download_chunk_bytes (0 selects it).
pub const TF_DEFAULT_DOWNLOAD_CHUNK_BYTES: u32 = 8 << 20;
/// Smallest accepted tf_runtime_options::download_chunk_bytes.
pub const TF_MIN_DOWNLOAD_CHUNK_BYTES: u32 = 64 << 10;
/// Largest accepted tf_runtime_options::download_chunk_bytes.
pub const TF_MAX_DOWNLOAD_CHUNK_BYTES: u32 = 256 << 20;
/// Default of tf_runtime_options::memory_release_threshold (0 selects it):
/// the device's pool keeps all unused memory (1.2).
pub const TF_DEFAULT_MEMORY_RELEASE_THRESHOLD: u64 = 0xFFFF_FFFF_FFFF_FFFF;
/// Smallest nonzero tf_runtime_options::memory_reserved_limit (1.2).
pub const TF_MIN_MEMORY_RESERVED_LIMIT: u64 = 32 << 20;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tf_runtime_options {
    pub struct_size: u32,
    pub stream_slots: u32,
    pub cublas_workspace_bytes: u64,
    pub retirement_capacity: u32,
    pub flags: u32,
    pub download_threads: u32,
    pub download_chunk_bytes: u32,
    /// 1.2
    pub memory_release_threshold: u64,
    /// 1.2
    pub memory_reserved_limit: u64,
}

pub const TF_CAP_NATIVE_MODULES: i32 = 1;
pub const TF_CAP_RUNTIME_COMPILATION: i32 = 2;
pub const TF_CAP_RAW_STREAM: i32 = 3;
pub const TF_CAP_SAME_DEVICE_COPY: i32 = 4;
pub const TF_CAP_PEER_COPY: i32 = 5;
pub const TF_CAP_CUBLAS: i32 = 6;
pub const TF_CAP_STREAM_ORDERED_ALLOC: i32 = 7;

/// `int32_t (*fn)(void *user_data)` of tf_with_context.
pub type tf_context_fn = Option<unsafe extern "C" fn(user_data: *mut c_void) -> i32>;

// ---- Work on the slot streams ----------------------------------------------

pub const TF_CUBLAS_POINTER_MODE_HOST: i32 = 0;
pub const TF_CUBLAS_POINTER_MODE_DEVICE: i32 = 1;

/// `int32_t (*fn)(void *cublas_handle, void *stream, void *user_data)`.
pub type tf_cublas_fn = Option<
    unsafe extern "C" fn(
        cublas_handle: *mut c_void,
        stream: *mut c_void,
        user_data: *mut c_void,
    ) -> i32,
>;
/// `int32_t (*fn)(void *lt_handle, void *stream, uint64_t workspace,
/// uint64_t workspace_bytes, void *user_data)` of tf_cublaslt_enqueue (1.2).
pub type tf_cublaslt_fn = Option<
    unsafe extern "C" fn(
        lt_handle: *mut c_void,
        stream: *mut c_void,
        workspace: u64,
        workspace_bytes: u64,
        user_data: *mut c_void,
    ) -> i32,
>;
/// `int32_t (*fn)(void *stream, void *user_data)` of tf_stream_enqueue.
pub type tf_stream_fn =
    Option<unsafe extern "C" fn(stream: *mut c_void, user_data: *mut c_void) -> i32>;
/// `void (*release)(void *resource, void *user_data)` of tf_workspace_retire.
pub type tf_release_fn =
    Option<unsafe extern "C" fn(resource: *mut c_void, user_data: *mut c_void)>;

/// Opaque, reference-counted CUDA event of one runtime.
#[repr(C)]
pub struct tf_event {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Opaque, reference-counted executable graph of one runtime (1.2).
#[repr(C)]
pub struct tf_graph {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tf_retirement_stats {
    pub struct_size: u32,
    pub capacity: u32,
    pub deferred: u64,
    pub released: u64,
    pub barrier_fallbacks: u64,
    pub leaked: u64,
    pub in_flight: u64,
    pub max_in_flight: u64,
}

/// Page-locked host memory counters (1.1).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct tf_host_pool_stats {
    pub struct_size: u32,
    pub reserved: u32,
    pub bytes_in_use: u64,
    pub bytes_cached: u64,
    pub bytes_registered: u64,
    pub blocks_in_use: u64,
    pub blocks_cached: u64,
    pub driver_allocations: u64,
    pub pending_frees: u64,
}

/// Counters of a device's memory pool (1.2).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct tf_memory_pool_stats {
    pub struct_size: u32,
    pub cached: u32,
    pub reserved_bytes: u64,
    pub reserved_peak: u64,
    pub in_use_bytes: u64,
    pub in_use_peak: u64,
    pub allocations: u64,
    pub frees: u64,
    pub oom_retries: u64,
    pub oom_failures: u64,
    pub trims: u64,
    pub release_threshold: u64,
    pub reserved_limit: u64,
}

/// Opaque, reference-counted loaded module.
#[repr(C)]
pub struct tf_module {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tf_launch_config {
    pub struct_size: u32,
    pub grid_x: u32,
    pub grid_y: u32,
    pub grid_z: u32,
    pub block_x: u32,
    pub block_y: u32,
    pub block_z: u32,
    pub shared_memory_bytes: u32,
}

pub const TF_COMPILE_PTX: i32 = 0;
pub const TF_COMPILE_CUBIN: i32 = 1;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tf_compile_options {
    pub struct_size: u32,
    pub target: i32,
    pub arch: i32,
    pub option_count: i32,
    pub options: *const *const c_char,
    pub name: *const c_char,
}

/// Opaque result of tf_program_compile().
#[repr(C)]
pub struct tf_program {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

// ---- Device memory and transfers --------------------------------------------

/// Largest length tf_download_scalar() accepts.
pub const TF_SCALAR_DOWNLOAD_MAX_BYTES: usize = 16;

declare_functions! {
    // Version
    fn tf_version() -> u32;
    fn tf_version_string() -> *const c_char;

    // Statuses and errors
    fn tf_status_string(status: tf_status) -> *const c_char;
    fn tf_last_error_message() -> *const c_char;
    fn tf_last_error_operation() -> *const c_char;
    fn tf_last_error_call() -> *const c_char;
    fn tf_last_error_code() -> i32;
    fn tf_last_error_code_domain() -> i32;
    fn tf_last_error_status() -> tf_status;
    fn tf_clear_last_error();
    fn tf_error_info_init(info: *mut tf_error_info, struct_size: usize);
    fn tf_last_error(out: *mut tf_error_info) -> tf_status;

    // Logging
    fn tf_set_log_callback(f: tf_log_fn, user_data: *mut c_void) -> tf_status;

    // Devices
    fn tf_device_properties_init(info: *mut tf_device_properties, struct_size: usize);
    fn tf_gpu_available() -> i32;
    fn tf_device_count(out_count: *mut i32) -> tf_status;
    fn tf_device_info(ordinal: i32, out: *mut tf_device_properties) -> tf_status;

    // Runtime
    fn tf_runtime_options_init(options: *mut tf_runtime_options, struct_size: usize);
    fn tf_runtime_new(ordinal: i32, out: *mut *mut tf_runtime) -> tf_status;
    fn tf_runtime_new_with_options(
        ordinal: i32,
        options: *const tf_runtime_options,
        out: *mut *mut tf_runtime,
    ) -> tf_status;
    fn tf_runtime_retain(rt: *mut tf_runtime) -> tf_status;
    fn tf_runtime_release(rt: *mut tf_runtime) -> tf_status;
    fn tf_runtime_bind_slot(
        rt: *mut tf_runtime,
        slot: i32,
        out: *mut *mut tf_runtime,
    ) -> tf_status;
    fn tf_runtime_identity(rt: *const tf_runtime, out: *mut u64) -> tf_status;
    fn tf_runtime_allocation_domain(rt: *const tf_runtime, out: *mut u64) -> tf_status;
    fn tf_runtime_device_info(
        rt: *const tf_runtime,
        out: *mut tf_device_properties,
    ) -> tf_status;
    fn tf_runtime_supports(
        rt: *const tf_runtime,
        capability: i32,
        out_supported: *mut i32,
    ) -> tf_status;
    fn tf_runtime_primary_context(
        rt: *const tf_runtime,
        out_context: *mut *mut c_void,
    ) -> tf_status;
    fn tf_runtime_slot_count(rt: *const tf_runtime, out_count: *mut i32) -> tf_status;
    fn tf_runtime_current_slot(rt: *const tf_runtime, out_slot: *mut i32) -> tf_status;
    fn tf_runtime_stream(rt: *mut tf_runtime, out_stream: *mut *mut c_void) -> tf_status;
    fn tf_runtime_slot_stream(
        rt: *mut tf_runtime,
        slot: i32,
        out_stream: *mut *mut c_void,
    ) -> tf_status;
    fn tf_with_context(
        rt: *mut tf_runtime,
        f: tf_context_fn,
        user_data: *mut c_void,
    ) -> tf_status;
    fn tf_runtime_sync(rt: *mut tf_runtime) -> tf_status;

    // Work on the slot streams: cuBLAS, any library, kernels, retirement
    fn tf_cublas_enqueue(
        rt: *mut tf_runtime,
        pointer_mode: i32,
        f: tf_cublas_fn,
        user_data: *mut c_void,
    ) -> tf_status;
    fn tf_cublas_symbol(name: *const c_char, out_function: *mut *mut c_void) -> tf_status;
    fn tf_cublas_version(out_version: *mut i32) -> tf_status;
    [1.2] fn tf_cublaslt_enqueue(rt: *mut tf_runtime, f: tf_cublaslt_fn, user_data: *mut c_void)
        -> tf_status;
    [1.2] fn tf_cublaslt_symbol(name: *const c_char, out_function: *mut *mut c_void) -> tf_status;
    fn tf_stream_enqueue(rt: *mut tf_runtime, f: tf_stream_fn, user_data: *mut c_void)
        -> tf_status;
    fn tf_slot_wait(rt: *mut tf_runtime, other_slot: i32) -> tf_status;
    fn tf_event_new(rt: *mut tf_runtime, out: *mut *mut tf_event) -> tf_status;
    fn tf_event_retain(event: *mut tf_event) -> tf_status;
    fn tf_event_release(event: *mut tf_event) -> tf_status;
    fn tf_event_record(rt: *mut tf_runtime, event: *mut tf_event) -> tf_status;
    fn tf_event_wait(rt: *mut tf_runtime, event: *mut tf_event) -> tf_status;
    fn tf_event_synchronize(event: *mut tf_event) -> tf_status;
    fn tf_event_query(event: *mut tf_event, out_done: *mut i32) -> tf_status;
    fn tf_workspace_retire(
        rt: *mut tf_runtime,
        resource: *mut c_void,
        release: tf_release_fn,
        user_data: *mut c_void,
    ) -> tf_status;
    fn tf_workspace_poll(rt: *mut tf_runtime) -> tf_status;
    fn tf_retirement_stats_init(stats: *mut tf_retirement_stats, struct_size: usize);
    fn tf_workspace_stats(rt: *const tf_runtime, out: *mut tf_retirement_stats)
        -> tf_status;
    fn tf_module_load(
        rt: *mut tf_runtime,
        image: *const c_void,
        size: usize,
        out: *mut *mut tf_module,
    ) -> tf_status;
    fn tf_module_retain(module: *mut tf_module) -> tf_status;
    fn tf_module_release(module: *mut tf_module) -> tf_status;
    fn tf_module_function(
        module: *mut tf_module,
        name: *const c_char,
        out_function: *mut *mut c_void,
    ) -> tf_status;
    fn tf_function_set_attribute(
        module: *mut tf_module,
        function: *mut c_void,
        attribute: i32,
        value: i32,
    ) -> tf_status;
    fn tf_launch_config_init(config: *mut tf_launch_config, struct_size: usize);
    fn tf_kernel_launch(
        rt: *mut tf_runtime,
        function: *mut c_void,
        config: *const tf_launch_config,
        args: *mut *mut c_void,
    ) -> tf_status;
    fn tf_compile_options_init(options: *mut tf_compile_options, struct_size: usize);
    fn tf_program_compile(
        rt: *mut tf_runtime,
        source: *const c_char,
        options: *const tf_compile_options,
        out: *mut *mut tf_program,
    ) -> tf_status;
    fn tf_program_image(
        program: *const tf_program,
        out_image: *mut *const c_void,
        out_size: *mut usize,
    ) -> tf_status;
    fn tf_program_log(program: *const tf_program, out_log: *mut *const c_char) -> tf_status;
    fn tf_program_release(program: *mut tf_program);
    [1.1] fn tf_program_retain(program: *mut tf_program) -> tf_status;
    [1.1] fn tf_program_release_checked(program: *mut tf_program) -> tf_status;

    // Device memory and transfers
    fn tf_alloc(rt: *mut tf_runtime, bytes: usize, out_ptr: *mut u64) -> tf_status;
    fn tf_free(rt: *mut tf_runtime, ptr: u64) -> tf_status;
    fn tf_upload(rt: *mut tf_runtime, src: *const c_void, dst: u64, len: usize) -> tf_status;
    fn tf_copy(rt: *mut tf_runtime, src: u64, dst: u64, len: usize) -> tf_status;
    fn tf_peer_copy_available(
        src_rt: *mut tf_runtime,
        dst_rt: *mut tf_runtime,
        out_available: *mut i32,
    ) -> tf_status;
    fn tf_peer_copy(
        src_rt: *mut tf_runtime,
        src: u64,
        dst_rt: *mut tf_runtime,
        dst: u64,
        len: usize,
    ) -> tf_status;
    fn tf_download_scalar(rt: *mut tf_runtime, src: u64, out: *mut c_void, len: usize)
        -> tf_status;
    fn tf_download(rt: *mut tf_runtime, src: u64, dst: *mut c_void, len: usize) -> tf_status;

    // Page-locked host memory and asynchronous copies (1.1: optional)
    [1.1] fn tf_host_alloc(rt: *mut tf_runtime, bytes: usize, out_ptr: *mut *mut c_void)
        -> tf_status;
    [1.1] fn tf_host_free(rt: *mut tf_runtime, ptr: *mut c_void) -> tf_status;
    [1.1] fn tf_host_record_use(rt: *mut tf_runtime, ptr: *mut c_void) -> tf_status;
    [1.1] fn tf_host_register(rt: *mut tf_runtime, ptr: *mut c_void, bytes: usize) -> tf_status;
    [1.1] fn tf_host_unregister(rt: *mut tf_runtime, ptr: *mut c_void) -> tf_status;
    [1.1] fn tf_host_pool_stats_init(stats: *mut tf_host_pool_stats, struct_size: usize);
    [1.1] fn tf_host_stats(rt: *const tf_runtime, out: *mut tf_host_pool_stats) -> tf_status;
    [1.1] fn tf_host_trim(rt: *mut tf_runtime) -> tf_status;
    [1.1] fn tf_download_async(rt: *mut tf_runtime, src: u64, dst: *mut c_void, len: usize)
        -> tf_status;
    [1.1] fn tf_upload_async(rt: *mut tf_runtime, src: *const c_void, dst: u64, len: usize)
        -> tf_status;
    [1.2] fn tf_graph_capture_begin(rt: *mut tf_runtime) -> tf_status;
    [1.2] fn tf_graph_capture_end(rt: *mut tf_runtime, out: *mut *mut tf_graph) -> tf_status;
    [1.2] fn tf_graph_capture_update(rt: *mut tf_runtime, graph: *mut tf_graph,
        out_updated_in_place: *mut i32) -> tf_status;
    [1.2] fn tf_graph_capture_abort(rt: *mut tf_runtime) -> tf_status;
    [1.2] fn tf_graph_launch(rt: *mut tf_runtime, graph: *mut tf_graph) -> tf_status;
    [1.2] fn tf_graph_retain(graph: *mut tf_graph) -> tf_status;
    [1.2] fn tf_graph_release(graph: *mut tf_graph) -> tf_status;

    // The device memory pool (1.2: optional)
    [1.2] fn tf_memory_pool_stats_init(stats: *mut tf_memory_pool_stats, struct_size: usize);
    [1.2] fn tf_memory_stats(rt: *const tf_runtime, out: *mut tf_memory_pool_stats) -> tf_status;
    [1.2] fn tf_memory_reset_peak(rt: *mut tf_runtime) -> tf_status;
    [1.2] fn tf_memory_trim(rt: *mut tf_runtime, keep_bytes: u64) -> tf_status;
    [1.2] fn tf_memory_record_use(rt: *mut tf_runtime, ptr: u64) -> tf_status;
}

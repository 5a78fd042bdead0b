//! Raw declarations of `include/tenferro_gpu.h`, one for one.
//!
//! Everything here is `unsafe` to call and follows the C contract exactly
//! (the header is the manual).  The safe API of this crate is built on it;
//! use these directly only for what the safe API does not cover.  Structs
//! must be initialised with their `*_init` function before use.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
use std::os::raw::{c_char, c_void};

// ---- Version ---------------------------------------------------------------

pub const TF_VERSION_MAJOR: u32 = 1;
pub const TF_VERSION_MINOR: u32 = 0;
pub const TF_VERSION_PATCH: u32 = 0;
pub const TF_VERSION_NUMBER: u32 =
    TF_VERSION_MAJOR * 10000 + TF_VERSION_MINOR * 100 + TF_VERSION_PATCH;

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

pub const TF_DEFAULT_STREAM_SLOTS: u32 = 8;
pub const TF_MAX_STREAM_SLOTS: u32 = 256;
pub const TF_DEFAULT_CUBLAS_WORKSPACE_BYTES: u64 = 32 << 20;
pub const TF_DEFAULT_RETIREMENT_CAPACITY: u32 = 1024;
pub const TF_MAX_RETIREMENT_CAPACITY: u32 = 1_048_576;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tf_runtime_options {
    pub struct_size: u32,
    pub stream_slots: u32,
    pub cublas_workspace_bytes: u64,
    pub retirement_capacity: u32,
    pub flags: u32,
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

extern "C" {
    // Version
    pub fn tf_version() -> u32;
    pub fn tf_version_string() -> *const c_char;

    // Statuses and errors
    pub fn tf_status_string(status: tf_status) -> *const c_char;
    pub fn tf_last_error_message() -> *const c_char;
    pub fn tf_last_error_operation() -> *const c_char;
    pub fn tf_last_error_call() -> *const c_char;
    pub fn tf_last_error_code() -> i32;
    pub fn tf_last_error_code_domain() -> i32;
    pub fn tf_last_error_status() -> tf_status;
    pub fn tf_clear_last_error();
    pub fn tf_error_info_init(info: *mut tf_error_info);
    pub fn tf_last_error(out: *mut tf_error_info) -> tf_status;

    // Logging
    pub fn tf_set_log_callback(f: tf_log_fn, user_data: *mut c_void) -> tf_status;

    // Devices
    pub fn tf_device_properties_init(info: *mut tf_device_properties);
    pub fn tf_gpu_available() -> i32;
    pub fn tf_device_count(out_count: *mut i32) -> tf_status;
    pub fn tf_device_info(ordinal: i32, out: *mut tf_device_properties) -> tf_status;

    // Runtime
    pub fn tf_runtime_options_init(options: *mut tf_runtime_options);
    pub fn tf_runtime_new(ordinal: i32, out: *mut *mut tf_runtime) -> tf_status;
    pub fn tf_runtime_new_with_options(
        ordinal: i32,
        options: *const tf_runtime_options,
        out: *mut *mut tf_runtime,
    ) -> tf_status;
    pub fn tf_runtime_retain(rt: *mut tf_runtime) -> tf_status;
    pub fn tf_runtime_release(rt: *mut tf_runtime) -> tf_status;
    pub fn tf_runtime_bind_slot(
        rt: *mut tf_runtime,
        slot: i32,
        out: *mut *mut tf_runtime,
    ) -> tf_status;
    pub fn tf_runtime_identity(rt: *const tf_runtime, out: *mut u64) -> tf_status;
    pub fn tf_runtime_allocation_domain(rt: *const tf_runtime, out: *mut u64) -> tf_status;
    pub fn tf_runtime_device_info(
        rt: *const tf_runtime,
        out: *mut tf_device_properties,
    ) -> tf_status;
    pub fn tf_runtime_supports(
        rt: *const tf_runtime,
        capability: i32,
        out_supported: *mut i32,
    ) -> tf_status;
    pub fn tf_runtime_primary_context(
        rt: *const tf_runtime,
        out_context: *mut *mut c_void,
    ) -> tf_status;
    pub fn tf_runtime_slot_count(rt: *const tf_runtime, out_count: *mut i32) -> tf_status;
    pub fn tf_runtime_current_slot(rt: *const tf_runtime, out_slot: *mut i32) -> tf_status;
    pub fn tf_runtime_stream(rt: *mut tf_runtime, out_stream: *mut *mut c_void) -> tf_status;
    pub fn tf_runtime_slot_stream(
        rt: *mut tf_runtime,
        slot: i32,
        out_stream: *mut *mut c_void,
    ) -> tf_status;
    pub fn tf_with_context(
        rt: *mut tf_runtime,
        f: tf_context_fn,
        user_data: *mut c_void,
    ) -> tf_status;
    pub fn tf_runtime_sync(rt: *mut tf_runtime) -> tf_status;

    // Work on the slot streams: cuBLAS, any library, kernels, retirement

    // Device memory and transfers
}

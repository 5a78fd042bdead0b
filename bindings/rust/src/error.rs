// SPDX-License-Identifier: MIT OR Apache-2.0
//! Statuses and the error every fallible call returns.

use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;

use crate::sys;

/// A failure status of the library (`enum tf_status_code` without `TF_OK`).
/// Values are never renumbered; a status newer than this crate is `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    InvalidArgument,
    InvalidHandle,
    DriverNotFound,
    DriverStub,
    NoDevice,
    DeviceUnavailable,
    DriverTooOld,
    Cuda,
    NotSupported,
    /// cuBLAS or NVRTC could not be loaded; from this crate also
    /// libtenferro_gpu.so.1 itself (operation `"dlopen"`, see [`crate::load`]).
    LibraryNotFound,
    Provider,
    Callback,
    OutOfMemory,
    RuntimeState,
    DeviceFault,
    Compile,
    Internal,
    /// A status this crate does not know (from a newer library).
    Other(i32),
}

/// Each status, its value, and its text (`tf_status_string`'s, so that
/// `Display` needs no library; the suite compares the two).
const STATUSES: [(Status, sys::tf_status, &str); 17] = [
    (Status::InvalidArgument, sys::TF_ERROR_INVALID_ARGUMENT, "invalid argument"),
    (Status::InvalidHandle, sys::TF_ERROR_INVALID_HANDLE, "invalid or released handle"),
    (Status::DriverNotFound, sys::TF_ERROR_DRIVER_NOT_FOUND, "CUDA driver not found"),
    (Status::DriverStub, sys::TF_ERROR_DRIVER_STUB, "CUDA driver is the toolkit stub"),
    (Status::NoDevice, sys::TF_ERROR_NO_DEVICE, "no CUDA device"),
    (Status::DeviceUnavailable, sys::TF_ERROR_DEVICE_UNAVAILABLE, "CUDA device unavailable"),
    (Status::DriverTooOld, sys::TF_ERROR_DRIVER_TOO_OLD, "CUDA driver too old"),
    (Status::Cuda, sys::TF_ERROR_CUDA, "CUDA driver call failed"),
    (Status::NotSupported, sys::TF_ERROR_NOT_SUPPORTED, "not supported"),
    (Status::LibraryNotFound, sys::TF_ERROR_LIBRARY_NOT_FOUND, "library not found"),
    (Status::Provider, sys::TF_ERROR_PROVIDER, "vendor library call failed"),
    (Status::Callback, sys::TF_ERROR_CALLBACK, "callback failed"),
    (Status::OutOfMemory, sys::TF_ERROR_OUT_OF_MEMORY, "out of memory"),
    (Status::RuntimeState, sys::TF_ERROR_RUNTIME_STATE, "runtime state forbids the call"),
    (Status::DeviceFault, sys::TF_ERROR_DEVICE_FAULT, "device fault: context unusable"),
    (Status::Compile, sys::TF_ERROR_COMPILE, "compilation failed"),
    (Status::Internal, sys::TF_ERROR_INTERNAL, "internal error"),
];

impl Status {
    /// Every status this crate knows, in numeric order.
    pub fn all() -> impl Iterator<Item = Status> {
        STATUSES.iter().map(|&(s, _, _)| s)
    }

    /// The status for a raw `tf_status`; `None` for `TF_OK`.
    pub fn from_raw(raw: sys::tf_status) -> Option<Status> {
        if raw == sys::TF_OK {
            return None;
        }
        let known = STATUSES.iter().find(|&&(_, r, _)| r == raw);
        Some(known.map_or(Status::Other(raw), |&(s, _, _)| s))
    }

    /// The raw `tf_status` value.
    pub fn raw(self) -> sys::tf_status {
        match self {
            Status::Other(raw) => raw,
            known => STATUSES.iter().find(|&&(s, _, _)| s == known).map_or(-1, |&(_, r, _)| r),
        }
    }

    /// The library's static description ("invalid argument"), from the
    /// loaded library (`tf_status_string`); "unknown status" without it.
    /// `Display` writes the same text without asking the library.
    pub fn description(self) -> &'static str {
        status_string(self.raw())
    }
}

/// The status's text, as `tf_status_string` gives it ("invalid
/// argument"), known to this crate: it needs no library.  A status newer
/// than the crate is "unknown status N".
///
/// `Status` is the kind of an [`Error`], as `std::io::ErrorKind` is of an
/// `io::Error`, and like it implements `Display` but not
/// `std::error::Error`: the error to return is the [`Error`], which carries
/// the failing call's record.
impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match STATUSES.iter().find(|&&(s, _, _)| s == *self) {
            Some(&(_, _, text)) => f.write_str(text),
            None => write!(f, "unknown status {}", self.raw()),
        }
    }
}

/// The library's description of a raw status (`tf_status_string`): never
/// fails; an unknown value gives "unknown status", and so does every value
/// when libtenferro_gpu.so.1 is not loaded.
pub fn status_string(raw: sys::tf_status) -> &'static str {
    let Ok(lib) = sys::library() else { return "unknown status" };
    // SAFETY: the library returns a static, NUL-terminated string.
    unsafe { CStr::from_ptr(lib.tf_status_string(raw)) }.to_str().unwrap_or("unknown status")
}

/// What [`Error::code`] means (`enum tf_code_domain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CodeDomain {
    /// No numeric code: the library itself refused.
    None,
    /// A CUresult of the CUDA driver.
    Cuda,
    /// A cublasStatus_t.
    Cublas,
    /// An nvrtcResult.
    Nvrtc,
    /// The nonzero value a callback returned (-1 for a closure that panicked).
    Callback,
    /// An errno value.
    System,
    /// A domain this crate does not know (from a newer library).
    Other(i32),
}

impl CodeDomain {
    pub fn from_raw(raw: i32) -> CodeDomain {
        match raw {
            sys::TF_CODE_NONE => CodeDomain::None,
            sys::TF_CODE_CUDA => CodeDomain::Cuda,
            sys::TF_CODE_CUBLAS => CodeDomain::Cublas,
            sys::TF_CODE_NVRTC => CodeDomain::Nvrtc,
            sys::TF_CODE_CALLBACK => CodeDomain::Callback,
            sys::TF_CODE_SYSTEM => CodeDomain::System,
            other => CodeDomain::Other(other),
        }
    }
}

/// A failure the library reported: its status and the record the failing
/// call left (`tf_error_info`), copied on the failing thread right after
/// the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    operation: String,
    call: String,
    code: i32,
    code_domain: CodeDomain,
    message: String,
    compile_log: Option<String>,
}

pub type Result<T> = std::result::Result<T, Error>;

fn text(field: &[c_char]) -> String {
    let bytes: Vec<u8> = field.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The calling thread's whole record, copied in one call; `None` without
/// the library (which then has recorded nothing).
fn record() -> Option<sys::tf_error_info> {
    let lib = sys::library().ok()?;
    // SAFETY: tf_error_info_init sets struct_size before tf_last_error
    // fills the struct.
    unsafe {
        let mut info = sys::initialised(lib.tf_error_info_init);
        lib.tf_last_error(&mut info);
        Some(info)
    }
}

impl Error {
    fn from_record(status: Status, info: Option<&sys::tf_error_info>) -> Error {
        let Some(info) = info.filter(|info| info.status == status.raw()) else {
            // Cannot happen by the library's contract; keep the status.
            return Error {
                status,
                operation: String::new(),
                call: String::new(),
                code: 0,
                code_domain: CodeDomain::None,
                message: format!("status {} without an error record on this thread", status.raw()),
                compile_log: None,
            };
        };
        Error {
            status,
            operation: text(&info.operation),
            call: text(&info.call),
            code: info.code,
            code_domain: CodeDomain::from_raw(info.code_domain),
            message: text(&info.message),
            compile_log: None,
        }
    }

    fn binding(status: Status, operation: &str, detail: &str) -> Error {
        Error {
            status,
            operation: operation.to_string(),
            call: String::new(),
            code: 0,
            code_domain: CodeDomain::None,
            message: format!("{operation}: {detail}"),
            compile_log: None,
        }
    }

    /// libtenferro_gpu.so.1 could not be loaded (or lacks a function).
    pub(crate) fn library_absent(cause: &sys::LoadError) -> Error {
        Error {
            status: Status::LibraryNotFound,
            operation: "dlopen".to_string(),
            call: "dlopen".to_string(),
            code: 0,
            code_domain: CodeDomain::None,
            message: cause.message().to_string(),
            compile_log: None,
        }
    }

    /// A function newer than the loaded library (status NotSupported,
    /// operation the function, call "dlsym").
    pub(crate) fn missing_function(missing: &sys::MissingFunction) -> Error {
        Error {
            status: Status::NotSupported,
            operation: missing.name().to_string(),
            call: "dlsym".to_string(),
            code: 0,
            code_domain: CodeDomain::None,
            message: format!("tenferro-gpu: {missing}"),
            compile_log: None,
        }
    }

    /// An error the binding itself detects (a broken library contract).
    pub(crate) fn internal(operation: &str, detail: &str) -> Error {
        Error::binding(Status::Internal, operation, detail)
    }

    /// A bad argument the binding refuses before calling the library
    /// (`operation` names the Rust function).
    pub(crate) fn invalid_argument(operation: &str, detail: &str) -> Error {
        Error::binding(Status::InvalidArgument, operation, detail)
    }

    /// A call the binding refuses in the present state (`operation` names
    /// the Rust function).
    pub(crate) fn runtime_state(operation: &str, detail: &str) -> Error {
        Error::binding(Status::RuntimeState, operation, detail)
    }

    pub(crate) fn with_compile_log(mut self, log: String) -> Error {
        self.compile_log = Some(log);
        self
    }

    /// NVRTC's whole log, for a Compile error of [`crate::Runtime::compile`]
    /// (the message has only its start).
    pub fn compile_log(&self) -> Option<&str> {
        self.compile_log.as_deref()
    }

    /// The status of the failure.
    pub fn status(&self) -> Status {
        self.status
    }
    /// The public function that failed ("tf_runtime_sync").
    pub fn operation(&self) -> &str {
        &self.operation
    }
    /// The call inside it that failed ("cuStreamSynchronize", "callback"),
    /// or "" when the library itself refused.
    pub fn call(&self) -> &str {
        &self.call
    }
    /// The numeric CUDA, cuBLAS or NVRTC result, callback value or errno,
    /// per [`Error::code_domain`]; 0 if none.
    pub fn code(&self) -> i32 {
        self.code
    }
    /// What [`Error::code`] means.
    pub fn code_domain(&self) -> CodeDomain {
        self.code_domain
    }
    /// The library's full message, starting with the operation.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The library's full message, starting with the operation.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A leaf: the message is complete (a missing library's loader message
/// included), so `source()` is `None` and error reports print it once.
impl std::error::Error for Error {}

/// `Err` with the calling thread's record for a failed status.  Call it
/// right after the failing call, on the same thread, before anything else
/// calls the library.
pub(crate) fn check(raw: sys::tf_status) -> Result<()> {
    match Status::from_raw(raw) {
        None => Ok(()),
        Some(status) => Err(Error::from_record(status, record().as_ref())),
    }
}

/// Calls `call` with a pointer to a zeroed `T` and returns the `T` it wrote
/// on TF_OK.  For out parameters of integer or pointer type (all-zero is a
/// valid value of both).
pub(crate) fn out_param<T: Copy>(call: impl FnOnce(*mut T) -> sys::tf_status) -> Result<T> {
    let mut value = std::mem::MaybeUninit::<T>::zeroed();
    check(call(value.as_mut_ptr()))?;
    // SAFETY: zeroed integers and pointers are initialised values.
    Ok(unsafe { value.assume_init() })
}

/// The calling thread's last library error, or `None` (also without the
/// library).  Every failure is returned as an `Err` anyway; this is for
/// code that mixes in `sys` calls.
pub fn last_error() -> Option<Error> {
    let info = record()?;
    Status::from_raw(info.status).map(|status| Error::from_record(status, Some(&info)))
}

/// Forget the calling thread's last library error (nothing to forget
/// without the library).
pub fn clear_last_error() {
    if let Ok(lib) = sys::library() {
        // SAFETY: no arguments; thread-local state only.
        unsafe { lib.tf_clear_last_error() }
    }
}

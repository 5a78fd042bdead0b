// SPDX-License-Identifier: MIT OR Apache-2.0
//! Where the [`Library`] table comes from.
//!
//! `linked`: the linker resolved every function; the table is a static.
//!
//! `dynamic-loading`: the first call of [`library()`] opens
//! libtenferro_gpu.so.1 with `dlopen` (the path in `TENFERRO_GPU_LIBRARY`
//! instead, when that is set and not empty) and resolves every function of
//! the list with `dlsym`.  The outcome, table or error, is kept for the
//! life of the process: the library is never closed, a failure is not
//! retried.  Later calls cost one atomic load.

use std::fmt;

use crate::Library;

/// The SONAME this crate opens (and, with `linked`, links).
pub const LIBRARY_SONAME: &str = "libtenferro_gpu.so.1";

/// The environment variable naming another file to open instead of
/// [`LIBRARY_SONAME`] (feature `dynamic-loading`).
pub const LIBRARY_PATH_VARIABLE: &str = "TENFERRO_GPU_LIBRARY";

/// Why libtenferro_gpu.so.1 is not available: the loader's message, or the
/// first function the file lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    message: String,
}

impl LoadError {
    /// The whole explanation, naming the file and what to do.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LoadError {}

/// The process's table of the library's functions, or why there is none.
///
/// With `linked` it always succeeds.  With `dynamic-loading` the first call
/// opens the library; every later call returns the same answer.
#[inline]
pub fn library() -> Result<&'static Library, &'static LoadError> {
    imp::library()
}

/// The table, for the free functions: they panic without the library.
#[inline]
pub(crate) fn table() -> &'static Library {
    match imp::library() {
        Ok(library) => library,
        Err(e) => panic!("{e}"),
    }
}

/// A function newer than 1.0 that the loaded library lacks (it is of an
/// older minor version): what calling it through [`Library`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingFunction {
    name: &'static str,
    since: &'static str,
}

impl MissingFunction {
    #[doc(hidden)]
    pub const fn new(name: &'static str, since: &'static str) -> MissingFunction {
        MissingFunction { name, since }
    }

    /// The function's name (`"tf_host_alloc"`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The version that added it (`"1.1"`).
    pub fn since(&self) -> &'static str {
        self.since
    }
}

impl fmt::Display for MissingFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: the loaded {LIBRARY_SONAME} is too old: it lacks this function, new in {}; \
             install tenferro-gpu {} or newer",
            self.name, self.since, self.since
        )
    }
}

impl std::error::Error for MissingFunction {}

#[cfg(feature = "linked")]
mod imp {
    use super::*;

    #[inline]
    pub(super) fn library() -> Result<&'static Library, &'static LoadError> {
        Ok(&crate::header::linked::LIBRARY)
    }
}

#[cfg(not(feature = "linked"))]
mod imp {
    use super::*;
    use std::ffi::{CStr, CString};
    use std::os::raw::{c_char, c_int, c_void};
    use std::os::unix::ffi::OsStrExt;
    use std::sync::OnceLock;

    // libdl's entry points (part of libc since glibc 2.34; libdl.so still
    // provides them for older systems and the link).
    #[link(name = "dl")]
    extern "C" {
        fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
        fn dlerror() -> *mut c_char;
    }
    const RTLD_NOW: c_int = 2;

    static LOADED: OnceLock<Result<Library, LoadError>> = OnceLock::new();

    #[inline]
    pub(super) fn library() -> Result<&'static Library, &'static LoadError> {
        LOADED.get_or_init(load).as_ref()
    }

    fn failure(what: &str) -> LoadError {
        LoadError {
            message: format!(
                "tenferro-gpu: {what}; install tenferro-gpu, or add the folder holding \
                 {LIBRARY_SONAME} to LD_LIBRARY_PATH, or set {LIBRARY_PATH_VARIABLE} to its path"
            ),
        }
    }

    /// dlerror's message for the call that just failed on this thread.
    fn last_dl_error() -> String {
        // SAFETY: dlerror returns NULL or a NUL-terminated thread-local
        // string, valid until the next dl call on this thread.
        let text = unsafe { dlerror() };
        if text.is_null() {
            return "no message from the loader".to_string();
        }
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    }

    fn load() -> Result<Library, LoadError> {
        let file = match std::env::var_os(LIBRARY_PATH_VARIABLE) {
            Some(path) if !path.is_empty() => path.as_bytes().to_vec(),
            _ => LIBRARY_SONAME.as_bytes().to_vec(),
        };
        let shown = String::from_utf8_lossy(&file).into_owned();
        let name = CString::new(file)
            .map_err(|_| failure(&format!("{LIBRARY_PATH_VARIABLE} holds a NUL byte")))?;
        // SAFETY: a NUL-terminated name.  The handle is never closed, so
        // the resolved functions stay valid for the life of the process.
        let handle = unsafe { dlopen(name.as_ptr(), RTLD_NOW) };
        if handle.is_null() {
            return Err(failure(&format!("cannot load {shown} ({})", last_dl_error())));
        }
        // SAFETY: every name is NUL-terminated; `resolve` gives each address
        // the type the header declares for that name.
        let resolved =
            unsafe { Library::resolve(|symbol| dlsym(handle, symbol.as_ptr().cast::<c_char>())) };
        resolved.map_err(|missing| {
            failure(&format!("{shown} lacks {missing}, which this crate needs (an older library?)"))
        })
    }
}

#[cfg(all(test, not(feature = "linked")))]
mod tests {
    use crate::Library;

    /// A lookup that finds every name but those in `absent` (at an address
    /// never called).
    fn resolve(absent: &[&str]) -> Result<Library, &'static str> {
        let mut dummy = 0u8;
        let address = std::ptr::addr_of_mut!(dummy).cast::<std::os::raw::c_void>();
        // SAFETY: the table is only inspected, never called.
        unsafe {
            Library::resolve(|name| {
                let name = std::str::from_utf8(&name[..name.len() - 1]).unwrap();
                if absent.contains(&name) {
                    std::ptr::null_mut()
                } else {
                    address
                }
            })
        }
    }

    #[test]
    fn a_library_without_the_1_1_functions_still_loads() {
        let old = resolve(&["tf_host_alloc", "tf_upload_async"]).unwrap();
        assert!(old.tf_host_alloc.is_none() && old.tf_upload_async.is_none());
        assert!(old.tf_host_free.is_some());
        // SAFETY: a missing function is never called.
        let missing = unsafe { old.tf_upload_async(std::ptr::null_mut(), std::ptr::null(), 0, 0) };
        assert_eq!(missing.unwrap_err().name(), "tf_upload_async");
    }

    #[test]
    fn a_library_without_a_1_0_function_does_not_load() {
        assert_eq!(resolve(&["tf_download"]).err(), Some("tf_download"));
    }
}

// SPDX-License-Identifier: MIT OR Apache-2.0
//! What the tests need besides the crate: the CUDA driver double's control
//! interface (tests/cuda_double/tfd_control.h) and the raw driver, both
//! reached with dlsym through the libcuda.so.1 the library loaded.
//!
//! Tests that need the double are named `double_*`.  Against the real
//! driver they fail, never pass silently: run the suite there with
//! `--skip double_`.  Tests that read the repository's sources are named
//! `source_*` (skip them where the sources are not).  libtest's `--skip`
//! matches any part of the full name (`memory::double_...`), so
//! `--skip double_ --skip source_` leaves out exactly those two kinds; every
//! other test runs against the double and a real GPU alike.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CString};
use std::process::{Command, ExitStatus};
use std::ptr;
use std::sync::{Mutex, MutexGuard, OnceLock};

#[link(name = "dl")]
extern "C" {
    fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}
const RTLD_NOW: c_int = 2;
const RTLD_NOLOAD: c_int = 4;

// CUresult values the tests inject.
pub const CUDA_ERROR_OUT_OF_MEMORY: i32 = 2;
pub const CUDA_ERROR_ILLEGAL_ADDRESS: i32 = 700;
pub const CUDA_ERROR_UNKNOWN: i32 = 999;
pub const CU_STREAM_NON_BLOCKING: u32 = 1;
pub const TFD_STREAMS: i32 = 0;
pub const TFD_DEVICE_ALLOCS: i32 = 2;
pub const TFD_MODULES: i32 = 4;
pub const TFD_GRAPHS: i32 = 8;
pub const TFD_GRAPH_EXECS: i32 = 9;
pub const CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: i32 = 115;

/// A kernel for NVRTC.  On a GPU it runs as written; the driver double
/// knows the name tfd_add_f32 as a built-in that does the same.
pub const ADD_SOURCE: &str = r#"extern "C" __global__ void tfd_add_f32(const float *x, const float *y,
                                       float *out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
"#;

fn driver() -> *mut c_void {
    // Make the library load its driver first, then find that same one.
    let _ = tenferro_gpu::device_count();
    let name = CString::new("libcuda.so.1").unwrap();
    unsafe {
        let h = dlopen(name.as_ptr(), RTLD_NOW | RTLD_NOLOAD);
        if h.is_null() {
            dlopen(name.as_ptr(), RTLD_NOW)
        } else {
            h
        }
    }
}

fn symbol(lib: *mut c_void, name: &str) -> *mut c_void {
    if lib.is_null() {
        return ptr::null_mut();
    }
    let c = CString::new(name).unwrap();
    unsafe { dlsym(lib, c.as_ptr()) }
}

macro_rules! double_api {
    ($($field:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The driver double's tfd_* functions.
        pub struct Double { $(pub $field: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)* }
        impl Double {
            fn load(lib: *mut c_void) -> Option<Double> {
                $(let $field = symbol(lib, concat!("tfd_", stringify!($field)));
                  if $field.is_null() { return None; })*
                // SAFETY: each symbol is the double's function of that type.
                unsafe {
                    Some(Double { $($field: std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>($field),)* })
                }
            }
        }
    };
}

double_api! {
    reset: fn();
    set_devices: fn(c_int);
    fail: fn(*const c_char, c_ulong, c_int, c_ulong);
    calls: fn(*const c_char) -> u64;
    live: fn(c_int) -> i64;
    primary_refcount: fn(c_int) -> c_int;
    primary_context: fn(c_int) -> *mut c_void;
    current_context: fn() -> *mut c_void;
    set_current: fn(*mut c_void);
    create_context: fn(c_int) -> *mut c_void;
    destroy_context: fn(*mut c_void);
    poison_context: fn(*mut c_void, c_int);
    stream_flags: fn(*mut c_void) -> c_uint;
    stream_context: fn(*mut c_void) -> *mut c_void;
    log_clear: fn();
    log_format: fn(*mut c_char, usize, usize) -> usize;
    set_async_pending: fn(c_int);
    func_attribute: fn(*mut c_void, c_int) -> c_int;
    cublas_stream: fn(*mut c_void) -> *mut c_void;
    set_attribute: fn(c_int, c_int, c_int);
    capture_nodes: fn(*mut c_void) -> c_ulong;
}

impl Double {
    pub fn inject(&self, entry: &str, nth: u64, code: i32, times: u64) {
        let e = CString::new(entry).unwrap();
        unsafe { (self.fail)(e.as_ptr(), nth as c_ulong, code, times as c_ulong) }
    }
    pub fn call_count(&self, entry: &str) -> u64 {
        let e = CString::new(entry).unwrap();
        unsafe { (self.calls)(e.as_ptr()) }
    }
    pub fn call_log(&self) -> String {
        let mut buf = vec![0 as c_char; 4096];
        unsafe { (self.log_format)(buf.as_mut_ptr(), buf.len(), 0) };
        let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8(bytes).unwrap()
    }
    pub fn refcount(&self) -> i32 {
        unsafe { (self.primary_refcount)(0) }
    }
    pub fn streams(&self) -> i64 {
        unsafe { (self.live)(TFD_STREAMS) }
    }
    pub fn count(&self, kind: i32) -> i64 {
        unsafe { (self.live)(kind) }
    }
}

type GetCurrent = unsafe extern "C" fn(*mut *mut c_void) -> c_int;
type SetCurrent = unsafe extern "C" fn(*mut c_void) -> c_int;
type CreateContext = unsafe extern "C" fn(*mut *mut c_void, *mut c_void, c_uint, c_int) -> c_int;
type GetProcAddress =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> c_int;

/// The real driver's context calls (unused against the double).
struct Raw {
    get: GetCurrent,
    set: SetCurrent,
    create: CreateContext,
    destroy: SetCurrent,
}

impl Raw {
    fn load(lib: *mut c_void) -> Option<Raw> {
        let gpa = symbol(lib, "cuGetProcAddress_v2");
        if gpa.is_null() {
            return None;
        }
        let gpa = unsafe { std::mem::transmute::<*mut c_void, GetProcAddress>(gpa) };
        let entry = |name: &str, version: c_int| -> *mut c_void {
            let c = CString::new(name).unwrap();
            let mut f = ptr::null_mut();
            let r = unsafe { gpa(c.as_ptr(), &mut f, version, 1, ptr::null_mut()) };
            assert!(r == 0 && !f.is_null(), "cuGetProcAddress({name}) failed: {r}");
            f
        };
        unsafe {
            Some(Raw {
                get: std::mem::transmute::<*mut c_void, GetCurrent>(entry("cuCtxGetCurrent", 4000)),
                set: std::mem::transmute::<*mut c_void, SetCurrent>(entry("cuCtxSetCurrent", 4000)),
                create: std::mem::transmute::<*mut c_void, CreateContext>(entry(
                    "cuCtxCreate",
                    12050,
                )),
                destroy: std::mem::transmute::<*mut c_void, SetCurrent>(entry(
                    "cuCtxDestroy",
                    4000,
                )),
            })
        }
    }
}

struct Driver {
    double: Option<Double>,
    raw: Option<Raw>,
}

// SAFETY: function pointers only.
unsafe impl Send for Driver {}
unsafe impl Sync for Driver {}

fn loaded() -> &'static Driver {
    static DRIVER: OnceLock<Driver> = OnceLock::new();
    DRIVER.get_or_init(|| {
        let lib = driver();
        let double = Double::load(lib);
        let raw = if double.is_none() { Raw::load(lib) } else { None };
        Driver { double, raw }
    })
}

/// The driver double, or a panic that says how to leave the test out.
pub fn double() -> &'static Double {
    loaded().double.as_ref().unwrap_or_else(|| {
        panic!(
            "this test needs the CUDA driver double; against a real driver run with --skip double_"
        )
    })
}

pub fn is_double() -> bool {
    loaded().double.is_some()
}

/// The calling thread's current CUDA context.
pub fn current_context() -> *mut c_void {
    let d = loaded();
    if let Some(double) = &d.double {
        return unsafe { (double.current_context)() };
    }
    let mut ctx = ptr::null_mut();
    let raw = d.raw.as_ref().expect("no CUDA driver");
    assert_eq!(unsafe { (raw.get)(&mut ctx) }, 0);
    ctx
}

pub fn set_current_context(ctx: *mut c_void) {
    let d = loaded();
    if let Some(double) = &d.double {
        return unsafe { (double.set_current)(ctx) };
    }
    assert_eq!(unsafe { (d.raw.as_ref().expect("no CUDA driver").set)(ctx) }, 0);
}

/// A non-primary context on device 0, not left current.
pub fn create_context() -> *mut c_void {
    let d = loaded();
    if let Some(double) = &d.double {
        return unsafe { (double.create_context)(0) };
    }
    let raw = d.raw.as_ref().expect("no CUDA driver");
    let before = current_context();
    let mut ctx = ptr::null_mut();
    assert_eq!(unsafe { (raw.create)(&mut ctx, ptr::null_mut(), 0, 0) }, 0);
    set_current_context(before);
    ctx
}

pub fn destroy_context(ctx: *mut c_void) {
    let d = loaded();
    if let Some(double) = &d.double {
        return unsafe { (double.destroy_context)(ctx) };
    }
    assert_eq!(unsafe { (d.raw.as_ref().expect("no CUDA driver").destroy)(ctx) }, 0);
}

/// Held by every test: the double's fault rules and counters, the log
/// callback and the thread numbering are process-wide, so tests run one at
/// a time whatever --test-threads says.  Each starts and ends clean.
pub struct Serial {
    _guard: MutexGuard<'static, ()>,
    context: *mut c_void,
}

fn clean() {
    if let Some(double) = &loaded().double {
        unsafe { (double.reset)() };
        set_current_context(ptr::null_mut());
    }
    tenferro_gpu::reset_log_callback().unwrap();
    tenferro_gpu::clear_last_error();
}

pub fn serial() -> Serial {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    clean();
    Serial { _guard: guard, context: current_context() }
}

impl Drop for Serial {
    fn drop(&mut self) {
        set_current_context(self.context);
        clean();
    }
}

/// Runs `f` with the panic hook silenced (for tests that panic on purpose).
pub fn quietly<R>(f: impl FnOnce() -> R) -> R {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = f();
    std::panic::set_hook(hook);
    r
}

/// The message of a panic payload.
pub fn panic_text(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// This test binary, run again with `args` and the environment changed by
/// `setup`; how it ended and its output.
pub fn run_child(args: &[&str], setup: impl FnOnce(&mut Command)) -> (ExitStatus, String) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(args);
    setup(&mut command);
    let out = command.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status, text)
}

/// Runs the ignored test `name` (its full path, `module::test`) alone in a
/// child process; how it ended and its output.  For tests that leak on
/// purpose (`std::mem::forget`) or end the process.
pub fn run_ignored_child(name: &str) -> (ExitStatus, String) {
    run_child(&["--exact", name, "--ignored", "--nocapture", "--test-threads=1"], |_| {})
}

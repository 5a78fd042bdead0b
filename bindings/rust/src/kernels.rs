// SPDX-License-Identifier: MIT OR Apache-2.0
//! NVRTC [`Program`]s, loaded [`Module`]s, their [`Function`]s and kernel
//! launches (include/tenferro_gpu.h, tf_program_*, tf_module_*,
//! tf_kernel_launch).
//!
//! ```no_run
//! # use tenferro_gpu::{Runtime, CompileOptions, LaunchConfig};
//! # let rt = Runtime::new(0)?;
//! let stream = rt.stream(0)?;
//! # let (x, y, mut out) = (stream.alloc::<f32>(4)?, stream.alloc::<f32>(4)?, stream.alloc::<f32>(4)?);
//! let program = rt.compile(r#"extern "C" __global__ void add(const float *x,
//!     const float *y, float *out, unsigned n) { ... }"#, &CompileOptions::new())?;
//! let module = rt.load_module(program.image()?)?;
//! let add = module.function("add")?;
//! let n = 4u32;
//! // SAFETY: the arguments match add's parameters.
//! unsafe { stream.launch(&add, &LaunchConfig::linear(n, 256), &[&x, &y, &out, &n])? };
//! # Ok::<(), tenferro_gpu::Error>(())
//! ```

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};

use crate::error::{check, out_param, Error, Result};
use crate::host::since;
use crate::library::{api, defaults};
use crate::memory::{AddressField, DeviceBuffer, DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::recorded_use::DeviceUse;
use crate::runtime::Runtime;
use crate::sys;

/// `n` as the `int32_t` count C takes, or an InvalidArgument.
fn count_i32(n: usize, operation: &str, what: &str) -> Result<i32> {
    i32::try_from(n)
        .map_err(|_| Error::invalid_argument(operation, &format!("{n} {what} are over i32::MAX")))
}

fn c_string(text: &str, what: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::invalid_argument(what, "the text contains a NUL byte"))
}

/// What [`Runtime::compile`] produces (`enum tf_compile_target`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompileTarget {
    /// PTX text for compute_XY, JIT-compiled at load.
    Ptx,
    /// A CUBIN for sm_XY, loaded without JIT.
    Cubin,
}

/// Options of [`Runtime::compile`].
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    target: Option<CompileTarget>,
    arch: i32,
    options: Vec<String>,
    name: Option<String>,
}

impl CompileOptions {
    /// PTX for the runtime's device, no further options.
    pub fn new() -> Self {
        Self::default()
    }
    pub fn target(mut self, target: CompileTarget) -> Self {
        self.target = Some(target);
        self
    }
    /// The architecture as 10 * major + minor (90); 0 for the device's.
    pub fn arch(mut self, arch: i32) -> Self {
        self.arch = arch;
        self
    }
    /// A further NVRTC option ("-std=c++17", "-I/path").
    pub fn option(mut self, option: &str) -> Self {
        self.options.push(option.to_string());
        self
    }
    /// The program's name in the log ("kernels.cu").
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }
}

/// NVRTC's result (`tf_program *`): the compiled image and the log.
/// `Clone` (or [`try_clone`](Program::try_clone)) adds a reference, `Drop`
/// or [`close`](Program::close) releases one; the image and log stay
/// until the last.
pub struct Program {
    raw: NonNull<sys::tf_program>,
}

// SAFETY: Send + Sync.  A compiled program is immutable: the header lets
// threads read one at once (image, log) and retain it (atomically), and
// this reference is released only in Drop or close, which need ownership.
unsafe impl Send for Program {}
unsafe impl Sync for Program {}

impl Program {
    /// The `tf_program *`, valid while `self` lives.
    pub fn as_raw(&self) -> *mut sys::tf_program {
        self.raw.as_ptr()
    }

    /// Another reference to the same program (`tf_program_retain`, new in
    /// 1.1).  Errors: NotSupported when the loaded library is 1.0 (too old).
    pub fn try_clone(&self) -> Result<Program> {
        let lib = api()?;
        // SAFETY: a live program: this reference is ours until dropped.
        check(since(unsafe { lib.tf_program_retain(self.as_raw()) })?)?;
        Ok(Program { raw: self.raw })
    }

    /// Releases this reference now and says whether the library accepted
    /// it (`tf_program_release_checked`, new in 1.1; a 1.0 library's
    /// `tf_program_release` reports nothing, so `Ok`).  Errors:
    /// InvalidHandle when the program was already released behind this
    /// value's back (through the raw pointer); it is never released again.
    /// Dropping instead releases the same way and ignores the status.
    pub fn close(self) -> Result<()> {
        let lib = api()?;
        let raw = std::mem::ManuallyDrop::new(self).as_raw();
        // SAFETY: this reference is ours, released once: Drop will not run.
        match unsafe { lib.tf_program_release_checked(raw) } {
            Ok(status) => check(status),
            Err(_too_old) => {
                // SAFETY: as above.
                unsafe { lib.tf_program_release(raw) };
                Ok(())
            }
        }
    }

    /// The compiled image (PTX with its NUL byte, or a CUBIN), borrowed.
    pub fn image(&self) -> Result<&[u8]> {
        let lib = api()?;
        let mut data: *const c_void = ptr::null();
        let mut size = 0usize;
        // SAFETY: a live program and valid out pointers.
        check(unsafe { lib.tf_program_image(self.raw.as_ptr(), &mut data, &mut size) })?;
        // SAFETY: valid until the program is released, which `&self` prevents.
        Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) })
    }

    /// NVRTC's log ("" when it wrote none).
    pub fn log(&self) -> Result<String> {
        let lib = api()?;
        let mut log: *const c_char = ptr::null();
        // SAFETY: a live program and a valid out pointer.
        check(unsafe { lib.tf_program_log(self.raw.as_ptr(), &mut log) })?;
        // SAFETY: NUL-terminated, valid while the program lives.
        Ok(unsafe { CStr::from_ptr(log) }.to_string_lossy().into_owned())
    }
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program").field("handle", &self.raw.as_ptr()).finish()
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("handle", &self.raw.as_ptr()).finish()
    }
}

impl Clone for Program {
    /// Adds a reference (`tf_program_retain`).  Panics when the loaded
    /// library is 1.0, which lacks it ([`Program::try_clone`] returns that
    /// as an error), or if the library refuses a live program, a bug in it.
    fn clone(&self) -> Program {
        self.try_clone().unwrap_or_else(|e| panic!("tenferro-gpu: {e}"))
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if let Ok(lib) = api() {
            // SAFETY: ours, released once.
            unsafe { lib.tf_program_release(self.raw.as_ptr()) }
        }
    }
}

/// A loaded module (`tf_module *`).  `Clone` adds a reference, `Drop`
/// releases one; the module keeps its runtime alive.
pub struct Module {
    raw: NonNull<sys::tf_module>,
}

// SAFETY: Send + Sync.  The header lets any thread look up a module's
// functions and retain or release it (atomically); the last release is in
// Drop, which needs ownership, and every Function holds a reference.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Module {
    pub fn as_raw(&self) -> *mut sys::tf_module {
        self.raw.as_ptr()
    }

    /// The kernel `name` (the plain name of an extern "C" kernel).  Errors:
    /// Cuda (CUDA_ERROR_NOT_FOUND) when the image has no such kernel.
    pub fn function(&self, name: &str) -> Result<Function> {
        let c = c_string(name, "Module::function")?;
        let lib = api()?;
        // SAFETY: a live module and a valid out pointer.
        let raw = out_param(|out| unsafe { lib.tf_module_function(self.as_raw(), c.as_ptr(), out) })?;
        Ok(Function { module: self.clone(), raw, name: name.to_string() })
    }
}

impl Clone for Module {
    fn clone(&self) -> Module {
        // SAFETY: a live module.
        api()
            .and_then(|lib| check(unsafe { lib.tf_module_retain(self.as_raw()) }))
            .unwrap_or_else(|e| panic!("tenferro-gpu: {e}"));
        Module { raw: self.raw }
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if let Ok(lib) = api() {
            // SAFETY: this reference is ours.
            unsafe { lib.tf_module_release(self.raw.as_ptr()) };
        }
    }
}

/// A kernel (`CUfunction`) of a [`Module`]; it holds a reference to the
/// module, so it stays valid however long it lives.
#[derive(Clone)]
pub struct Function {
    module: Module,
    raw: *mut c_void,
    name: String,
}

// SAFETY: Send + Sync.  A CUfunction is a handle the driver lets any
// thread use; the Function keeps its module (so the handle) alive.  Setting
// an attribute concurrently with launches is not ordered by the library
// (the header says so), but races no memory of this process.
unsafe impl Send for Function {}
unsafe impl Sync for Function {}

impl Function {
    /// The CUfunction, valid while `self` lives.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn module(&self) -> &Module {
        &self.module
    }
    /// cuFuncSetAttribute (`tf_function_set_attribute`), e.g. attribute 8,
    /// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
    pub fn set_attribute(&self, attribute: i32, value: i32) -> Result<()> {
        let lib = api()?;
        // SAFETY: the function belongs to the module.
        check(unsafe {
            lib.tf_function_set_attribute(self.module.as_raw(), self.raw, attribute, value)
        })
    }
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function").field("name", &self.name).field("raw", &self.raw).finish()
    }
}

/// Shape of a launch (`tf_launch_config`), one block of one thread by
/// default.
#[derive(Clone, Copy)]
pub struct LaunchConfig {
    raw: sys::tf_launch_config,
}

impl LaunchConfig {
    /// One block of one thread (`tf_launch_config_init`).  Without
    /// libtenferro_gpu.so.1 every field but the size is zero; launching
    /// fails then anyway.
    pub fn new() -> Self {
        LaunchConfig { raw: defaults(|lib| lib.tf_launch_config_init) }
    }
    /// Enough blocks of `block` threads in x for `n` threads.
    pub fn linear(n: u32, block: u32) -> Self {
        let blocks = if block == 0 { 0 } else { ((n as u64 + block as u64 - 1) / block as u64).max(1) as u32 };
        Self::new().grid(blocks, 1, 1).block(block, 1, 1)
    }
    pub fn grid(mut self, x: u32, y: u32, z: u32) -> Self {
        (self.raw.grid_x, self.raw.grid_y, self.raw.grid_z) = (x, y, z);
        self
    }
    pub fn block(mut self, x: u32, y: u32, z: u32) -> Self {
        (self.raw.block_x, self.raw.block_y, self.raw.block_z) = (x, y, z);
        self
    }
    pub fn shared_memory_bytes(mut self, bytes: u32) -> Self {
        self.raw.shared_memory_bytes = bytes;
        self
    }
    pub fn as_raw(&self) -> &sys::tf_launch_config {
        &self.raw
    }
}

impl Default for LaunchConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// A value passed as one kernel parameter: a [`DeviceRepr`] value by value,
/// or device memory ([`DeviceBuffer`], [`DeviceSlice`], [`DeviceSliceMut`])
/// as its device address.
///
/// # Safety
/// `arg_ptr` must point at the parameter's bytes while `self` lives.
pub unsafe trait KernelArg {
    fn arg_ptr(&self) -> *const c_void;
    /// The buffer memory the parameter names, whose use on another slot a
    /// launch records (docs/rust.md, "Lifetime rules"): buffers and views
    /// of buffers give it; the default, for plain values, is `None`.  A
    /// wrapper of a buffer may return the buffer's.
    fn device_use(&self) -> Option<DeviceUse<'_>> {
        None
    }
}

// SAFETY (all four): the pointer is to the value, or to the address field
// of the memory, which live as long as `self`.
unsafe impl<T: DeviceRepr> KernelArg for T {
    fn arg_ptr(&self) -> *const c_void {
        (self as *const T).cast()
    }
}

unsafe impl<T: DeviceRepr> KernelArg for DeviceBuffer<T> {
    fn arg_ptr(&self) -> *const c_void {
        (self.address_field() as *const u64).cast()
    }
    fn device_use(&self) -> Option<DeviceUse<'_>> {
        self.as_slice().device_use()
    }
}

unsafe impl<T: DeviceRepr> KernelArg for DeviceSlice<'_, T> {
    fn arg_ptr(&self) -> *const c_void {
        (self.address_field() as *const u64).cast()
    }
    fn device_use(&self) -> Option<DeviceUse<'_>> {
        DeviceSlice::device_use(self)
    }
}

unsafe impl<T: DeviceRepr> KernelArg for DeviceSliceMut<'_, T> {
    fn arg_ptr(&self) -> *const c_void {
        (self.address_field() as *const u64).cast()
    }
    fn device_use(&self) -> Option<DeviceUse<'_>> {
        DeviceSliceMut::device_use(self)
    }
}

impl Runtime {
    /// Compiles CUDA C++ `source` with NVRTC (`tf_program_compile`).
    /// Kernels to be found by their plain name must be extern "C".  On a
    /// Compile error, [`Error::compile_log`] has NVRTC's whole log.  Errors
    /// also: LibraryNotFound (no NVRTC), NotSupported, Provider,
    /// InvalidArgument.
    pub fn compile(&self, source: &str, options: &CompileOptions) -> Result<Program> {
        let source = c_string(source, "Runtime::compile")?;
        let strings = options
            .options
            .iter()
            .map(|o| c_string(o, "Runtime::compile"))
            .collect::<Result<Vec<_>>>()?;
        let pointers: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        let name = options.name.as_deref().map(|n| c_string(n, "Runtime::compile")).transpose()?;
        let lib = api()?;
        // SAFETY: the struct's own init.
        let mut raw = unsafe { sys::initialised(lib.tf_compile_options_init) };
        raw.target = match options.target.unwrap_or(CompileTarget::Ptx) {
            CompileTarget::Ptx => sys::TF_COMPILE_PTX,
            CompileTarget::Cubin => sys::TF_COMPILE_CUBIN,
        };
        raw.arch = options.arch;
        raw.option_count = count_i32(pointers.len(), "Runtime::compile", "options")?;
        raw.options = if pointers.is_empty() { ptr::null() } else { pointers.as_ptr() };
        raw.name = name.as_ref().map_or(ptr::null(), |n| n.as_ptr());
        let mut out: *mut sys::tf_program = ptr::null_mut();
        // SAFETY: every pointer lives until the call returns.
        let status = unsafe { lib.tf_program_compile(self.as_raw(), source.as_ptr(), &raw, &mut out) };
        if status == sys::TF_ERROR_COMPILE {
            let error = check(status).unwrap_err();
            let program = Program { raw: NonNull::new(out).expect("a failed program is returned") };
            return Err(error.with_compile_log(program.log().unwrap_or_default()));
        }
        check(status)?;
        Ok(Program { raw: NonNull::new(out).expect("tf_program_compile gave NULL") })
    }

    /// Loads a module image (PTX, CUBIN or fatbin) into the runtime's
    /// primary context (`tf_module_load`).
    pub fn load_module(&self, image: &[u8]) -> Result<Module> {
        let lib = api()?;
        // SAFETY: image is readable for its length during the call.
        let raw = out_param(|out| unsafe {
            lib.tf_module_load(self.as_raw(), image.as_ptr().cast(), image.len(), out)
        })?;
        Ok(Module { raw: NonNull::new(raw).expect("tf_module_load gave NULL") })
    }

    /// Queues `function` on this handle's slot stream (the calling
    /// thread's; [`crate::Stream::launch`] for a fixed one)
    /// (`tf_kernel_launch`).
    /// Returns once queued; a fault in the kernel shows up in later calls as
    /// DeviceFault.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number, order and type
    /// (the driver reads as many bytes per parameter as the kernel
    /// declares), and the kernel must only touch memory it may.
    pub unsafe fn launch(
        &self,
        function: &Function,
        config: &LaunchConfig,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        let lib = api()?;
        let mut pointers: Vec<*mut c_void> = args.iter().map(|a| a.arg_ptr() as *mut c_void).collect();
        let params = if pointers.is_empty() { ptr::null_mut() } else { pointers.as_mut_ptr() };
        check(lib.tf_kernel_launch(self.as_raw(), function.as_raw(), config.as_raw(), params))?;
        self.record_uses(args.iter().map(|a| a.device_use()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_over_i32_is_an_invalid_argument() {
        assert_eq!(count_i32(3, "Runtime::compile", "options").unwrap(), 3);
        assert_eq!(count_i32(i32::MAX as usize, "op", "options").unwrap(), i32::MAX);
        let e = count_i32(i32::MAX as usize + 1, "Runtime::compile", "options").unwrap_err();
        assert_eq!((e.status(), e.operation()), (crate::Status::InvalidArgument, "Runtime::compile"));
        assert!(e.message().contains("2147483648 options are over i32::MAX"), "{e}");
    }
}

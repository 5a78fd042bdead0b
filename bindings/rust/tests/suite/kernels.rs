// SPDX-License-Identifier: MIT OR Apache-2.0
//! NVRTC programs, modules and launches.  The kernel is real CUDA C++; the
//! driver double runs its built-in of the same name, so the same checks
//! hold against the double and on a GPU.

use tenferro_gpu::{
    sys, Capability, CodeDomain, CompileOptions, LaunchConfig, Program, Runtime, Status,
};

use crate::support::{self, serial};

fn nvrtc(rt: &Runtime) -> bool {
    let yes = rt.supports(Capability::RuntimeCompilation).unwrap();
    if !yes {
        eprintln!("NVRTC cannot be loaded here (add it to LD_LIBRARY_PATH); test skipped");
    }
    yes
}

#[test]
fn a_compiled_kernel_runs_on_the_slot_stream() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    if !nvrtc(&rt) {
        return;
    }
    let program = rt.compile(support::ADD_SOURCE, &CompileOptions::new().name("add.cu")).unwrap();
    let image = program.image().unwrap();
    assert!(image.ends_with(b"\0") && image.windows(11).any(|w| w == b"tfd_add_f32"));
    let module = rt.load_module(image).unwrap();
    drop(program);
    let add = module.function("tfd_add_f32").unwrap();
    drop(module); // the function keeps it loaded
    let stream = rt.stream(0).unwrap();
    for n in [1u32, 1000, 4097] {
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let y = vec![0.5f32; n as usize];
        let dx = stream.alloc_from(&x).unwrap();
        let dy = stream.alloc_from(&y).unwrap();
        let out = stream.alloc::<f32>(n as usize).unwrap();
        // SAFETY: (const float *, const float *, float *, unsigned).
        unsafe { stream.launch(&add, &LaunchConfig::linear(n, 256), &[&dx, &dy, &out, &n]).unwrap() };
        let want: Vec<f32> = x.iter().map(|v| v + 0.5).collect();
        assert_eq!(out.to_vec().unwrap(), want);
    }
    // views pass their own address: add the upper halves into a window
    let x = stream.alloc_from(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let mut out = stream.alloc_from(&[0.0f32; 4]).unwrap();
    let (hi, two) = (x.slice(2..), 2u32);
    let window = out.slice_mut(1..3);
    unsafe { stream.launch(&add, &LaunchConfig::linear(2, 32), &[&hi, &hi, &window, &two]).unwrap() };
    assert_eq!(out.to_vec().unwrap(), [0.0, 6.0, 8.0, 0.0]);
}

#[test]
fn a_compile_error_carries_the_whole_log() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    if !nvrtc(&rt) {
        return;
    }
    let src = "extern \"C\" __global__ void k() {}\n#error boom from the source\n";
    let e = rt.compile(src, &CompileOptions::new().name("broken.cu")).unwrap_err();
    assert_eq!((e.status(), e.code_domain()), (Status::Compile, CodeDomain::Nvrtc));
    let log = e.compile_log().unwrap();
    assert!(log.contains("boom from the source") && log.contains("broken.cu"), "{log}");
    let ok = rt.compile(support::ADD_SOURCE, &CompileOptions::new().arch(80).option("-default-device"));
    assert!(ok.unwrap().log().is_ok());
}

#[test]
fn lookups_and_bad_launches_are_errors() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    if !nvrtc(&rt) {
        return;
    }
    let program = rt.compile(support::ADD_SOURCE, &CompileOptions::new()).unwrap();
    let module = rt.load_module(program.image().unwrap()).unwrap();
    let e = module.function("no_such_kernel").unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::Cuda, "tf_module_function"));
    let add = module.function("tfd_add_f32").unwrap();
    let e = unsafe { rt.launch(&add, &LaunchConfig::new().grid(0, 1, 1), &[]) }.unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_kernel_launch"));
    assert_eq!(rt.load_module(&[]).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(rt.compile("a\0b", &CompileOptions::new()).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn double_functions_hold_their_module_and_set_attributes() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    let modules = d.count(support::TFD_MODULES);
    let program = rt.compile(support::ADD_SOURCE, &CompileOptions::new()).unwrap();
    let add = rt.load_module(program.image().unwrap()).unwrap().function("tfd_add_f32").unwrap();
    assert_eq!(d.count(support::TFD_MODULES), modules + 1);
    add.set_attribute(8, 1024).unwrap();
    assert_eq!(unsafe { (d.func_attribute)(add.as_raw(), 8) }, 1024);
    let twin = add.clone();
    drop(add);
    assert_eq!(d.count(support::TFD_MODULES), modules + 1);
    drop(twin);
    assert_eq!(d.count(support::TFD_MODULES), modules);
}

#[test]
fn double_a_faulting_kernel_surfaces_as_device_fault() {
    let _s = serial();
    let _ = support::double();
    let rt = Runtime::new(0).unwrap();
    let ptx = b".version 8.0\n.target sm_90\n.visible .entry tfd_illegal_address(\n)\n{\n\tret;\n}\n";
    let bad = rt.load_module(ptx).unwrap().function("tfd_illegal_address").unwrap();
    unsafe { rt.launch(&bad, &LaunchConfig::new(), &[]).unwrap() };
    assert_eq!(rt.sync().unwrap_err().status(), Status::DeviceFault);
}

#[test]
fn program_clones_share_the_image_until_the_last_release() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    if !nvrtc(&rt) {
        return;
    }
    let program = rt.compile(support::ADD_SOURCE, &CompileOptions::new()).unwrap();
    let (raw, image) = (program.as_raw(), program.image().unwrap().to_vec());
    let twin = program.clone();
    let third = twin.try_clone().unwrap();
    assert_eq!((twin.as_raw(), third.as_raw()), (raw, raw));
    drop(program);
    program_on_another_thread(twin, &image);
    assert_eq!(third.image().unwrap(), &image[..]);
    third.close().unwrap();
    // The last release freed it: the library now refuses the handle.
    let st = unsafe { sys::tf_program_retain(raw) }.unwrap();
    assert_eq!(st, sys::TF_ERROR_INVALID_HANDLE);
}

/// A clone is an owner of its own: read and closed on another thread.
fn program_on_another_thread(program: Program, image: &[u8]) {
    let image = image.to_vec();
    std::thread::spawn(move || {
        assert_eq!(program.image().unwrap(), &image[..]);
        program.close().unwrap();
    })
    .join()
    .unwrap();
}

#[test]
fn closing_a_program_reports_a_refused_release() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    if !nvrtc(&rt) {
        return;
    }
    let program = rt.compile(support::ADD_SOURCE, &CompileOptions::new()).unwrap();
    let twin = program.clone();
    // Both references released behind the binding's back.
    unsafe { sys::tf_program_release(program.as_raw()) };
    unsafe { sys::tf_program_release(program.as_raw()) };
    for p in [program, twin] {
        let e = p.close().unwrap_err();
        assert_eq!(
            (e.status(), e.operation()),
            (Status::InvalidHandle, "tf_program_release_checked")
        );
        assert!(e.message().contains("already released"), "{e}");
    }
}

#[test]
fn a_1_0_library_lacks_the_program_reference_functions() {
    let Ok(lib) = sys::library() else { return };
    let mut old = *lib;
    old.tf_program_retain = None;
    old.tf_program_release_checked = None;
    let raw = std::ptr::null_mut();
    let missing = unsafe { old.tf_program_retain(raw) }.unwrap_err();
    assert_eq!((missing.name(), missing.since()), ("tf_program_retain", "1.1"));
    let missing = unsafe { old.tf_program_release_checked(raw) }.unwrap_err();
    assert_eq!((missing.name(), missing.since()), ("tf_program_release_checked", "1.1"));
    assert!(missing.to_string().contains("too old"), "{missing}");
    assert!(lib.tf_program_retain.is_some() && lib.tf_program_release_checked.is_some());
}

#[test]
fn a_linear_launch_never_overflows_its_block_count() {
    let config = LaunchConfig::linear(u32::MAX, 256);
    let raw = config.as_raw();
    assert_eq!((raw.grid_x, raw.block_x), (16_777_216, 256)); // ceil((2^32 - 1) / 256)
    assert_eq!(LaunchConfig::linear(u32::MAX, u32::MAX).as_raw().grid_x, 1);
    assert_eq!(LaunchConfig::linear(u32::MAX, 1).as_raw().grid_x, u32::MAX);
    assert_eq!(LaunchConfig::linear(0, 32).as_raw().grid_x, 1);
}

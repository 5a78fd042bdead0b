//! The first program to run (docs/rust.md shows it whole): list the
//! devices, create a runtime on device 0, multiply two matrices with the
//! library's own cuBLAS on device buffers, call cuBLAS with the slot's
//! handle, run a closure with the primary context current, synchronize.
//! Without a usable GPU it says so and exits with status 1.

use std::os::raw::{c_int, c_void};
use std::process::ExitCode;
use std::thread;

use tenferro_gpu::{self as tg, PointerMode, Runtime, RuntimeOptions, Status};

fn run() -> tg::Result<()> {
    for d in tg::devices()? {
        println!("device {}: {} ({})", d.ordinal, d.name, d.uuid_string());
    }
    let rt = Runtime::with_options(0, &RuntimeOptions::new().stream_slots(4))?;

    // Device memory the buffers own; C = A B (row-major) with the
    // library's own cuBLAS, then downloaded.
    let (m, n, k) = (2, 2, 3);
    let mut a = rt.alloc::<f64>(m * k)?;
    let mut b = rt.alloc::<f64>(k * n)?;
    let mut c = rt.alloc::<f64>(m * n)?;
    a.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    b.upload(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0])?;
    rt.matmul(&a, &b, &mut c, m, n, k)?;
    println!("A B = {:?} (cuBLAS {:?})", c.to_vec()?, tg::cublas::version()?);

    // Any cuBLAS call with the slot's handle, resolved from that cuBLAS.
    type GetVersion = unsafe extern "C" fn(*mut c_void, *mut c_int) -> c_int;
    // SAFETY: the symbol is cublasGetVersion_v2, of this type.
    let get_version: GetVersion =
        unsafe { std::mem::transmute(tg::cublas::symbol("cublasGetVersion_v2")?) };
    let mut version = 0;
    rt.cublas_enqueue(PointerMode::Host, |handle, _stream| unsafe {
        get_version(handle, &mut version)
    })?;
    println!("cublasGetVersion_v2 with the slot's handle: {version}");

    // The primary context is current inside; the caller's comes back after.
    let (slot, stream) = rt.with_context(|| (rt.current_slot(), rt.stream()))?;
    println!("slot {}, stream {:?}", slot?, stream?);

    // Another thread gets its own slot; a bound handle keeps one slot.
    let worker = thread::scope(|s| s.spawn(|| rt.current_slot()).join().unwrap())?;
    let bound = rt.bind_slot(3)?;
    println!("worker slot {worker}; bound slot {}", bound.current_slot()?);

    match rt.slot_stream(99) {
        Err(e) if e.status() == Status::InvalidArgument => println!("{}", e.message()),
        other => panic!("slot 99 should be refused, got {other:?}"),
    }
    rt.sync()
}

fn main() -> ExitCode {
    if !tg::gpu_available() {
        eprintln!("no usable CUDA device");
        return ExitCode::FAILURE;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

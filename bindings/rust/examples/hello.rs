// SPDX-License-Identifier: MIT OR Apache-2.0
//! The first program to run (docs/rust.md shows it whole): list the
//! devices, take a stream of a runtime on device 0, multiply two matrices
//! with the library's own cuBLAS on device buffers, hand the work to
//! another thread, call cuBLAS with the stream's handle, run a closure with
//! the primary context current, synchronize.  Without libtenferro_gpu.so.1
//! or a usable GPU it says so and exits with status 1.

use std::os::raw::{c_int, c_void};
use std::process::ExitCode;
use std::thread;

use tenferro_gpu::{self as tg, PointerMode, Runtime, RuntimeOptions, Status};

fn run() -> tg::Result<()> {
    for d in tg::devices()? {
        println!("device {}: {} ({})", d.ordinal, d.name, d.uuid_string());
    }
    let rt = Runtime::with_options(0, &RuntimeOptions::new().stream_slots(4))?;
    let stream = rt.stream(1)?; // slot 1, whichever thread uses it

    // Device memory owned by buffers, freed on their stream; C = A B
    // (row-major) with the library's own cuBLAS.
    let (m, n, k) = (2, 2, 3);
    let a = stream.alloc_from(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    let b = stream.alloc_from(&[1.0f64, 0.0, 0.0, 1.0, 1.0, 1.0])?;
    let mut c = stream.alloc::<f64>(m * n)?;
    stream.matmul(&a, &b, &mut c, m, n, k)?;

    // Another thread downloads: same stream, so after the product.
    let worker = stream.clone();
    let row = thread::spawn(move || worker.to_vec(&c.slice(n..))).join().unwrap()?;
    println!("A B, second row = {row:?} (cuBLAS {:?})", tg::cublas::version()?);

    // Any cuBLAS call with the stream's handle, resolved from that cuBLAS.
    type GetVersion = unsafe extern "C" fn(*mut c_void, *mut c_int) -> c_int;
    // SAFETY: the symbol is cublasGetVersion_v2, of this type.
    let get_version: GetVersion =
        unsafe { std::mem::transmute(tg::cublas::symbol("cublasGetVersion_v2")?) };
    let mut version = 0;
    stream.cublas_enqueue(PointerMode::Host, |handle, _stream| unsafe {
        get_version(handle, &mut version)
    })?;
    println!("cublasGetVersion_v2 with the stream's handle: {version}");

    // The primary context is current inside; the caller's comes back after.
    let raw = stream.with_context(|| stream.cu_stream())??;
    println!("slot {}, CUstream {raw:?}", stream.slot());

    match rt.stream(99) {
        Err(e) if e.status() == Status::InvalidArgument => println!("{}", e.message()),
        other => panic!("slot 99 should be refused, got {other:?}"),
    }
    stream.sync()
}

fn main() -> ExitCode {
    if !tg::gpu_available() {
        // Why, in the library's words: no libtenferro_gpu.so.1, no CUDA
        // driver (libcuda.so.1), no device, ...
        match tg::device_count().and_then(|_| Runtime::new(0)) {
            Err(e) => eprintln!("no GPU: {e}"),
            Ok(_) => eprintln!("no GPU: no usable CUDA device"),
        }
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

//! The first program to run (docs/rust.md shows it whole): list the
//! devices, create a runtime on device 0, run a closure with its primary
//! context current, synchronize.  Without a usable GPU it says so and exits
//! with status 1.
//!
//!     cargo run --example hello

use std::process::ExitCode;
use std::thread;

use tenferro_gpu::{self as tg, Runtime, RuntimeOptions, Status};

fn run() -> tg::Result<()> {
    for d in tg::devices()? {
        println!("device {}: {} ({})", d.ordinal, d.name, d.uuid_string());
    }
    let rt = Runtime::with_options(0, &RuntimeOptions::new().stream_slots(4))?;

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

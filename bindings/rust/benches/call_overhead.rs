// SPDX-License-Identifier: MIT OR Apache-2.0
//! Per-call cost of the binding, informational (`make rust-bench` runs it
//! built with `dynamic-loading` and with `linked`): the raw call through
//! `sys`, the safe API's cheapest calls, and a table-less baseline.
//!
//! Needs libtenferro_gpu.so.1 and a driver (the double is fine: none of
//! the timed calls reaches the driver).

use std::hint::black_box;
use std::time::Instant;

use tenferro_gpu::{self as tg, sys, Runtime};

const CALLS: u32 = 2_000_000;
const RUNS: u32 = 11;

fn time(what: &str, mut f: impl FnMut()) {
    for _ in 0..CALLS / 10 {
        f(); // warm up
    }
    let mut best = f64::MAX;
    for _ in 0..RUNS {
        let start = Instant::now();
        for _ in 0..CALLS {
            f();
        }
        best = best.min(start.elapsed().as_secs_f64() * 1e9 / f64::from(CALLS));
    }
    println!("{what:<58} {best:6.2} ns/call");
}

fn main() {
    let mode = if cfg!(feature = "linked") { "linked" } else { "dynamic-loading" };
    println!("tenferro-gpu call overhead, feature {mode} (best of {RUNS} runs of {CALLS} calls)");
    let rt = Runtime::new(0).expect("a runtime (run against the double or a GPU)");
    let stream = rt.stream(0).unwrap();
    // SAFETY: tf_version takes nothing and reads no state.
    time("sys::tf_version() (free function)", || {
        black_box(unsafe { sys::tf_version() });
    });
    let lib = sys::library().unwrap();
    // SAFETY: as above.
    time("sys::library()?.tf_version() (table, looked up each call)", || {
        black_box(unsafe { sys::library().unwrap().tf_version() });
    });
    time("lib.tf_version() (table held)", || {
        black_box(unsafe { lib.tf_version() });
    });
    let raw = stream.as_raw();
    let mut slot = 0i32;
    // SAFETY: a live handle and a valid out pointer.
    time("sys::tf_runtime_current_slot(bound, &mut slot)", || {
        black_box(unsafe { sys::tf_runtime_current_slot(raw, &mut slot) });
    });
    time("stream.runtime().current_slot() (safe: table, status check)", || {
        black_box(stream.runtime().current_slot().unwrap());
    });
    time("tg::version() (safe)", || {
        black_box(tg::version().unwrap());
    });
    // A use on another slot, recorded before: what every later record of
    // it costs (no driver call), raw and through the crate.
    let other = rt.stream(1).unwrap();
    let buf = stream.alloc::<u8>(4096).unwrap();
    buf.record_use(&other).unwrap();
    let (other_raw, address) = (other.as_raw(), buf.as_raw());
    // SAFETY: a live handle and an address inside a live allocation.
    time("sys::tf_memory_record_use(bound, address) (again)", || {
        black_box(unsafe { sys::tf_memory_record_use(other_raw, address) }.unwrap());
    });
    time("buf.record_use(&other_stream) (safe, again)", || {
        buf.record_use(&other).unwrap();
    });
    // The C call enters the primary context: three driver calls from a
    // thread with none current, one with it current.
    stream
        .with_context(|| {
            time("buf.record_use(&other_stream) (primary context current)", || {
                buf.record_use(&other).unwrap();
            });
        })
        .unwrap();
}

// SPDX-License-Identifier: MIT OR Apache-2.0
//! A program that can use a GPU starts where libtenferro_gpu.so.1 is
//! absent and reports it (feature `dynamic-loading`); linked, the loader
//! refuses to start it.  The parent test runs this test binary again, as a
//! child, with the library out of reach.

use crate::support::run_child;

#[cfg(not(feature = "linked"))]
use tenferro_gpu::{self as tg, sys, LaunchConfig, Runtime, RuntimeOptions, Status};

#[cfg(not(feature = "linked"))]
const CHILD: &str = "absent::child_without_the_library";
#[cfg(not(feature = "linked"))]
const MISSING: &str = "/nonexistent/tenferro/libtenferro_gpu.so.1";

#[cfg(not(feature = "linked"))]
#[test]
fn a_program_starts_without_the_library_and_reports_no_gpu() {
    let (status, text) =
        run_child(&["--exact", CHILD, "--ignored", "--nocapture", "--test-threads=1"], |c| {
            c.env(sys::LIBRARY_PATH_VARIABLE, MISSING);
        });
    assert_eq!(status.code(), Some(0), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert!(text.contains("no GPU: tenferro-gpu: cannot load /nonexistent/tenferro/"), "{text}");
}

#[cfg(not(feature = "linked"))]
#[test]
#[ignore = "a child of a_program_starts_without_the_library_and_reports_no_gpu"]
fn child_without_the_library() {
    assert_eq!(std::env::var(sys::LIBRARY_PATH_VARIABLE).as_deref(), Ok(MISSING));
    assert!(!tg::gpu_available());
    let e = tg::load().unwrap_err();
    assert_eq!(
        (e.status(), e.operation(), e.call()),
        (Status::LibraryNotFound, "dlopen", "dlopen")
    );
    assert!(e.message().contains(MISSING) && e.message().contains("LD_LIBRARY_PATH"), "{e}");
    assert_eq!(Runtime::new(0).unwrap_err(), e);
    assert_eq!(tg::device_count().unwrap_err(), e);
    assert_eq!(tg::version().unwrap_err(), e);
    assert_eq!(tg::set_log_callback(|_, _| ()).unwrap_err(), e);
    assert_eq!(tg::cublas::version().unwrap_err(), e);
    assert!(sys::library().is_err());
    assert_eq!(tg::last_error(), None);
    tg::clear_last_error();
    assert_eq!(Status::InvalidArgument.description(), "unknown status");
    assert_eq!(RuntimeOptions::new().as_raw().stream_slots, 0);
    assert_eq!(LaunchConfig::new().as_raw().grid_x, 0);
    println!("no GPU: {e}");
}

#[cfg(feature = "linked")]
#[test]
fn a_linked_program_does_not_start_without_the_library() {
    let (status, text) = run_child(&["--list"], |c| {
        c.env_remove("LD_LIBRARY_PATH");
    });
    let code = status.code();
    if code == Some(0) {
        eprintln!("libtenferro_gpu.so.1 is installed where the loader looks: nothing to show here");
        return;
    }
    assert_eq!(code, Some(127), "{text}");
    assert!(text.contains("libtenferro_gpu.so.1"), "{text}");
}

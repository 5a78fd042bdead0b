// SPDX-License-Identifier: MIT OR Apache-2.0
//! Log messages reach Rust closures.

use std::sync::{Arc, Mutex};

use tenferro_gpu::{self as tg, LogLevel, Runtime, Status};

use crate::support::{self, serial};

/// A with_context whose restore fails: logged, not returned.
fn restore_failure(rt: &Runtime) {
    support::double().inject("cuCtxSetCurrent", 2, support::CUDA_ERROR_UNKNOWN, 1);
    rt.with_context(|| ()).unwrap();
    support::set_current_context(std::ptr::null_mut());
}

fn collect() -> Arc<Mutex<Vec<(LogLevel, String)>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    tg::set_log_callback(move |level, message| {
        sink.lock().unwrap().push((level, message.to_string()))
    })
    .unwrap();
    got
}

#[test]
fn double_a_callback_receives_level_and_message() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let got = collect();
    restore_failure(&rt);
    tg::reset_log_callback().unwrap();
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, LogLevel::Warning);
    assert!(got[0].1.contains("tf_with_context: failed to restore the caller's CUDA context"));
    assert!(got[0].1.contains("CUDA_ERROR_UNKNOWN (999)"));
}

#[test]
fn double_after_reset_the_callback_is_never_called_again() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let got = collect();
    tg::reset_log_callback().unwrap();
    restore_failure(&rt); // to stderr
    assert!(got.lock().unwrap().is_empty());
    assert_eq!(Arc::strong_count(&got), 1, "the library's callback was dropped");
}

#[test]
fn double_a_panicking_callback_is_contained() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    tg::set_log_callback(|_, _| panic!("logger is broken")).unwrap();
    support::quietly(|| restore_failure(&rt));
    rt.sync().unwrap();
}

#[test]
fn double_teardown_warnings_are_logged() {
    let _s = serial();
    let got = collect();
    let rt = Runtime::new(0).unwrap();
    rt.cu_stream().unwrap();
    support::double().inject("cuStreamSynchronize", 1, support::CUDA_ERROR_UNKNOWN, 1);
    drop(rt);
    tg::reset_log_callback().unwrap();
    let got = got.lock().unwrap();
    assert!(got.iter().any(|(_, m)| m.contains("leaking") && m.contains("(999)")), "{got:?}");
}

#[test]
fn double_setting_the_callback_from_inside_a_callback_is_refused() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let outcome = Arc::new(Mutex::new(Vec::new()));
    let sink = outcome.clone();
    tg::set_log_callback(move |_, _| {
        let e = tg::reset_log_callback().unwrap_err();
        sink.lock().unwrap().push((e.status(), e.operation().to_string()));
    })
    .unwrap();
    restore_failure(&rt);
    tg::reset_log_callback().unwrap();
    assert_eq!(
        *outcome.lock().unwrap(),
        vec![(Status::RuntimeState, "tf_set_log_callback".to_string())]
    );
}

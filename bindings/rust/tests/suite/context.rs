// SPDX-License-Identifier: MIT OR Apache-2.0
//! with_context: closures run with the primary context current; the
//! caller's context comes back; panics are caught before the C ABI and
//! resumed after the call.

use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::{Arc, Barrier};
use std::thread;

use tenferro_gpu::{self as tg, CodeDomain, Runtime, Status, CALLBACK_PANICKED};

use crate::support::{self, current_context, serial, set_current_context};

#[test]
fn runs_the_closure_in_the_primary_context_and_restores_none() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    set_current_context(ptr::null_mut());
    let inside = rt.with_context(current_context).unwrap();
    assert_eq!(inside, rt.primary_context().unwrap());
    assert!(current_context().is_null());
}

#[test]
fn restores_another_context() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let other = support::create_context();
    set_current_context(other);
    assert_eq!(rt.with_context(current_context).unwrap(), rt.primary_context().unwrap());
    assert_eq!(current_context(), other);
    set_current_context(ptr::null_mut());
    support::destroy_context(other);
}

#[test]
fn returns_the_result_and_moves_captures() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let owned = vec![1, 2, 3];
    let mut counter = 0;
    let sum: i32 = rt
        .with_context(|| {
            counter += 1;
            owned.into_iter().sum()
        })
        .unwrap();
    assert_eq!((sum, counter), (6, 1));
    let nested: Result<u8, String> = rt.with_context(|| Err("closure's own error".into())).unwrap();
    assert_eq!(nested, Err("closure's own error".to_string()));
}

#[test]
fn a_panic_is_resumed_after_the_call_with_its_payload() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let other = support::create_context();
    set_current_context(other);
    let caught = support::quietly(|| {
        panic::catch_unwind(AssertUnwindSafe(|| {
            rt.with_context(|| -> u32 { panic!("boom {}", std::hint::black_box(7)) })
        }))
    });
    assert_eq!(support::panic_text(&caught.unwrap_err()), "boom 7");
    assert_eq!(current_context(), other);
    // The library saw the callback fail with the crate's code.
    let seen = tg::last_error().unwrap();
    assert_eq!(seen.status(), Status::Callback);
    assert_eq!((seen.operation(), seen.call()), ("tf_with_context", "callback"));
    assert_eq!((seen.code(), seen.code_domain()), (CALLBACK_PANICKED, CodeDomain::Callback));
    set_current_context(ptr::null_mut());
    support::destroy_context(other);
    rt.sync().unwrap(); // the runtime is fine afterwards
}

#[test]
fn nested_calls_restore_each_level_and_propagate_panics() {
    let _s = serial();
    let outer = Runtime::new(0).unwrap();
    let inner = Runtime::new(0).unwrap();
    set_current_context(ptr::null_mut());
    let seen = outer
        .with_context(|| (inner.with_context(current_context).unwrap(), current_context()))
        .unwrap();
    let primary = outer.primary_context().unwrap();
    assert_eq!(seen, (primary, primary));
    assert!(current_context().is_null());
    let caught = support::quietly(|| {
        panic::catch_unwind(AssertUnwindSafe(|| {
            outer.with_context(|| inner.with_context(|| panic!("inner")))
        }))
    });
    assert_eq!(support::panic_text(&caught.unwrap_err()), "inner");
    assert!(current_context().is_null());
}

#[test]
fn the_closure_may_use_the_runtime() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let s = rt
        .with_context(|| {
            let s = rt.cu_stream().unwrap();
            rt.sync().unwrap();
            s as usize
        })
        .unwrap();
    assert_eq!(s, rt.cu_stream().unwrap() as usize);
}

#[test]
fn double_a_failure_before_the_closure_returns_it_and_skips_the_closure() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    d.inject("cuCtxGetCurrent", 1, support::CUDA_ERROR_UNKNOWN, 1);
    let mut called = false;
    let e = rt.with_context(|| called = true).unwrap_err();
    assert_eq!((e.status(), e.call()), (Status::Cuda, "cuCtxGetCurrent"));
    assert!(!called);
    assert!(current_context().is_null());
}

#[test]
fn double_exactly_three_driver_calls_from_no_context() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    unsafe { (d.log_clear)() };
    rt.with_context(|| ()).unwrap();
    assert_eq!(d.call_log(), "cuCtxGetCurrent,cuCtxSetCurrent,cuCtxSetCurrent");
}

#[test]
fn threads_call_concurrently_and_panics_stay_in_their_thread() {
    let _s = serial();
    let rt = Arc::new(Runtime::new(0).unwrap());
    let primary = rt.primary_context().unwrap() as usize;
    let start = Arc::new(Barrier::new(8));
    support::quietly(|| {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (rt, start) = (rt.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    for n in 0..300u32 {
                        if n % 7 == 0 {
                            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                                rt.with_context(|| panic!("n={n}"))
                            }));
                            assert!(r.is_err());
                        } else {
                            let inside = rt.with_context(|| current_context() as usize).unwrap();
                            assert_eq!(inside, primary);
                            assert_eq!(rt.with_context(|| n * 2).unwrap(), n * 2);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    });
}

// SPDX-License-Identifier: MIT OR Apache-2.0
//! Work on the slot streams: closures for cuBLAS and any library, slot
//! ordering, events and retirement.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use tenferro_gpu::{self as tg, CodeDomain, PointerMode, Runtime, RuntimeOptions, Status};

use crate::support::{self, quietly, serial};

#[test]
fn cublas_enqueue_gives_the_slots_handle_and_stream() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let before = support::current_context();
    let mut seen = Vec::new();
    for mode in [PointerMode::Host, PointerMode::Device] {
        rt.cublas_enqueue(mode, |h, s| {
            seen.push((h as usize, s as usize, support::current_context() as usize));
            0
        })
        .unwrap();
    }
    let stream = rt.cu_stream().unwrap() as usize;
    let ctx = rt.primary_context().unwrap() as usize;
    assert_eq!(seen[0], seen[1]);
    assert_eq!((seen[0].1, seen[0].2), (stream, ctx));
    assert_ne!(seen[0].0, 0);
    assert_eq!(support::current_context(), before);
    if support::is_double() {
        let d = support::double();
        assert_eq!(unsafe { (d.cublas_stream)(seen[0].0 as *mut _) } as usize, stream);
    }
}

#[test]
fn a_cublas_status_is_a_provider_error_and_a_panic_is_resumed() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let e = rt.cublas_enqueue(PointerMode::Host, |_, _| 7).unwrap_err();
    assert_eq!((e.status(), e.code(), e.code_domain()), (Status::Provider, 7, CodeDomain::Cublas));
    assert_eq!(e.operation(), "tf_cublas_enqueue");
    let caught = quietly(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.cublas_enqueue(PointerMode::Host, |_, _| panic!("inside cublas"))
        }))
    });
    assert_eq!(support::panic_text(&caught.unwrap_err()), "inside cublas");
    rt.cublas_enqueue(PointerMode::Host, |_, _| 0).unwrap();
}

#[test]
fn stream_enqueue_returns_the_closures_value_and_refuses_reentry() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream_enqueue(|s| s as usize).unwrap();
    assert_eq!(stream, rt.cu_stream().unwrap() as usize);
    let inner = rt.cublas_enqueue(PointerMode::Host, |_, _| {
        let e = rt.stream_enqueue(|_| ()).unwrap_err();
        assert_eq!(e.status(), Status::RuntimeState);
        rt.slot_wait(0).unwrap(); // no slot lock: fine from inside
        0
    });
    inner.unwrap();
    let caught = quietly(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.stream_enqueue(|_| -> () { panic!("inside stream") })
        }))
    });
    assert_eq!(support::panic_text(&caught.unwrap_err()), "inside stream");
}

#[test]
fn cublas_symbols_and_version_come_from_the_librarys_cublas() {
    let _s = serial();
    let f = tg::cublas::symbol("cublasSgemm_v2").unwrap();
    assert!(!f.is_null());
    assert!(tg::cublas::version().unwrap() >= (12, 0, 0));
    assert_eq!(tg::cublas::symbol("cuMemAlloc").unwrap_err().status(), Status::InvalidArgument);
    let e = tg::cublas::symbol("cublasNoSuchFunction").unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::NotSupported, "tf_cublas_symbol"));
}

#[test]
fn events_order_slots_and_the_host() {
    let _s = serial();
    let rt = Runtime::with_options(0, &RuntimeOptions::new().stream_slots(2)).unwrap();
    let (a, b) = (rt.bind_slot(0).unwrap(), rt.bind_slot(1).unwrap());
    let ev = a.event().unwrap();
    assert!(ev.query().unwrap());
    a.record_event(&ev).unwrap();
    b.wait_event(&ev).unwrap();
    b.record_event(&ev).unwrap();
    ev.synchronize().unwrap();
    assert!(ev.query().unwrap());
    let twin = ev.clone();
    drop(ev);
    a.wait_event(&twin).unwrap();
    b.slot_wait(0).unwrap();
    assert_eq!(b.slot_wait(2).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn double_an_event_keeps_its_runtime_alive() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    let ev = rt.event().unwrap();
    rt.cu_stream().unwrap();
    unsafe { (d.set_async_pending)(1) };
    rt.record_event(&ev).unwrap();
    drop(rt);
    assert_eq!(d.refcount(), 1);
    assert!(!ev.query().unwrap());
    ev.synchronize().unwrap();
    assert!(ev.query().unwrap());
    drop(ev);
    assert_eq!(d.refcount(), 0);
}

#[test]
fn retire_runs_the_release_once_after_the_device_passed() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = runs.clone();
    rt.retire(move || {
        seen.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    rt.sync().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    rt.sync().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let stats = rt.retirement_stats().unwrap();
    assert_eq!(stats.capacity, 1024);
    assert_eq!(stats.barrier_fallbacks, 0);
    assert_eq!(stats.released + stats.leaked + stats.in_flight, stats.deferred);
    // a panicking release is caught and dropped; the runtime goes on
    quietly(|| {
        rt.retire(|| panic!("in a release")).unwrap();
        rt.sync().unwrap();
    });
    rt.sync().unwrap();
}

#[test]
fn double_a_release_waits_for_the_device() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    rt.cu_stream().unwrap();
    unsafe { (d.set_async_pending)(1) };
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    rt.retire(move || l.lock().unwrap().push("released")).unwrap();
    rt.poll_retirements().unwrap();
    assert!(log.lock().unwrap().is_empty());
    rt.sync().unwrap();
    assert_eq!(*log.lock().unwrap(), vec!["released"]);
}

#[test]
fn double_a_failed_retirement_leaks_what_the_release_owns() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    rt.cu_stream().unwrap();
    let owned = Arc::new(());
    let held = owned.clone();
    unsafe { (d.poison_context)((d.primary_context)(0), support::CUDA_ERROR_ILLEGAL_ADDRESS) };
    let e = rt.retire(move || drop(held)).unwrap_err();
    assert_eq!(e.status(), Status::DeviceFault);
    assert_eq!(Arc::strong_count(&owned), 2, "the device may still use it: leaked, not dropped");
    unsafe { (d.poison_context)((d.primary_context)(0), 0) };
}

#[test]
fn threads_enqueue_on_their_own_slots() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let got: Vec<(usize, usize)> = thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let mut s = 0usize;
                    rt.cublas_enqueue(PointerMode::Host, |_, stream| {
                        s = stream as usize;
                        0
                    })
                    .unwrap();
                    (s, rt.cu_stream().unwrap() as usize)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(got.iter().all(|(a, b)| a == b));
    let mut distinct: Vec<_> = got.iter().map(|g| g.0).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4);
}

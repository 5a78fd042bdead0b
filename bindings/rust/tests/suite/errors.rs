// SPDX-License-Identifier: MIT OR Apache-2.0
//! Statuses become `Error`s carrying the record of the failing call, read
//! on the failing thread right after the call.

use std::fmt;
use std::sync::{Arc, Barrier};
use std::thread;

use tenferro_gpu::{self as tg, CodeDomain, Runtime, RuntimeOptions, Status};

use crate::support::{self, serial};

#[test]
fn status_values_round_trip_and_have_descriptions() {
    let _s = serial();
    let all: Vec<Status> = Status::all().collect();
    assert_eq!(all.len(), 17);
    for (i, status) in all.iter().enumerate() {
        assert_eq!(status.raw(), i as i32 + 1);
        assert_eq!(Status::from_raw(status.raw()), Some(*status));
        assert!(!status.description().is_empty());
        assert_ne!(status.description(), "unknown status");
    }
    assert_eq!(Status::from_raw(0), None);
    assert_eq!(Status::from_raw(99), Some(Status::Other(99)));
    assert_eq!(Status::Other(99).raw(), 99);
    assert_eq!(tg::status_string(0), "success");
    assert_eq!(tg::status_string(1000), "unknown status");
    assert_eq!(CodeDomain::from_raw(4), CodeDomain::Callback);
    assert_eq!(CodeDomain::from_raw(42), CodeDomain::Other(42));
}

#[test]
fn statuses_display_the_librarys_text_without_the_library() {
    let _s = serial();
    for status in Status::all() {
        // the crate's own text is the library's (tf_status_string)
        assert_eq!(status.to_string(), status.description(), "{status:?}");
    }
    assert_eq!(Status::InvalidArgument.to_string(), "invalid argument");
    assert_eq!(format!("{}", Status::Other(99)), "unknown status 99");
}

fn assert_error<E: std::error::Error + fmt::Debug + fmt::Display + Send + Sync + 'static>() {}

#[test]
fn every_public_error_type_is_a_well_behaved_error() {
    assert_error::<tg::Error>();
    assert_error::<tg::RegisterError<f32>>();
    assert_error::<tg::UnregisterError<u8>>();
    assert_error::<tg::sys::LoadError>();
    assert_error::<tg::sys::MissingFunction>();
    fn display_debug_send_sync<T: fmt::Display + fmt::Debug + Send + Sync + Copy + Eq>() {}
    display_debug_send_sync::<Status>();
    let _s = serial();
    let e = Runtime::new(0).unwrap().bind_slot(-1).unwrap_err();
    assert!(std::error::Error::source(&e).is_none(), "a leaf: the message is complete");
    let boxed: Box<dyn std::error::Error + Send + Sync> = e.clone().into();
    assert_eq!(boxed.to_string(), e.message());
}

#[test]
fn a_refusal_by_the_library_has_no_call_and_no_code() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let n = rt.slot_count().unwrap();
    let e = rt.bind_slot(n).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert_eq!(e.operation(), "tf_runtime_bind_slot");
    assert_eq!(e.call(), "");
    assert_eq!((e.code(), e.code_domain()), (0, CodeDomain::None));
    assert_eq!(e.message(), format!("tf_runtime_bind_slot: slot {n} is outside 0..{}", n - 1));
    assert_eq!(e.to_string(), e.message());
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
    assert!(boxed.to_string().contains("is outside"));
}

#[test]
fn double_a_driver_failure_carries_operation_call_and_cuda_code() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    d.inject("cuStreamCreate", 1, support::CUDA_ERROR_OUT_OF_MEMORY, 1);
    let e = rt.cu_stream().unwrap_err();
    assert_eq!(e.status(), Status::OutOfMemory);
    assert_eq!((e.operation(), e.call()), ("tf_runtime_stream", "cuStreamCreate"));
    assert_eq!((e.code(), e.code_domain()), (support::CUDA_ERROR_OUT_OF_MEMORY, CodeDomain::Cuda));
    assert!(e.message().contains("CUDA_ERROR_OUT_OF_MEMORY (2)"), "{e}");
    assert!(!rt.cu_stream().unwrap().is_null()); // a failed creation is retried
}

#[test]
fn an_unavailable_device_lists_the_devices_found() {
    let _s = serial();
    let count = tg::device_count().unwrap();
    let e = tg::device_info(count + 3).unwrap_err();
    assert_eq!(e.status(), Status::DeviceUnavailable);
    assert_eq!(e.operation(), "tf_device_info");
    assert!(e.message().contains("found"), "{e}");
    assert_eq!(Runtime::new(count).unwrap_err().status(), Status::DeviceUnavailable);
    assert_eq!(tg::device_info(-1).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn double_a_sticky_fault_is_a_device_fault() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    rt.cu_stream().unwrap();
    unsafe {
        (d.poison_context)(rt.primary_context().unwrap(), support::CUDA_ERROR_ILLEGAL_ADDRESS)
    };
    let e = rt.sync().unwrap_err();
    assert_eq!(e.status(), Status::DeviceFault);
    assert_eq!((e.call(), e.code()), ("cuStreamSynchronize", support::CUDA_ERROR_ILLEGAL_ADDRESS));
    assert_eq!(rt.with_context(|| ()).unwrap_err().status(), Status::DeviceFault);
    drop(rt); // leaks quietly
    assert_eq!(d.refcount(), 0);
}

#[test]
fn each_thread_gets_its_own_record() {
    let _s = serial();
    let rt = Arc::new(Runtime::with_options(0, &RuntimeOptions::new().stream_slots(2)).unwrap());
    let start = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|index: i32| {
            let (rt, start) = (rt.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for i in 0..200 {
                    let bad = 10 + index * 1000 + i;
                    if index % 2 == 1 {
                        let e = rt.cu_slot_stream(bad).unwrap_err();
                        assert_eq!(e.operation(), "tf_runtime_slot_stream");
                        assert!(e.message().contains(&format!("slot {bad} is outside")), "{e}");
                    } else {
                        let e = tg::device_info(-bad).unwrap_err();
                        assert_eq!(e.operation(), "tf_device_info");
                        assert!(e.message().contains(&(-bad).to_string()), "{e}");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn last_error_mirrors_the_returned_error_until_cleared() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    assert_eq!(tg::last_error(), None);
    let e = rt.cu_slot_stream(-1).unwrap_err();
    assert_eq!(tg::last_error().as_ref(), Some(&e));
    rt.sync().unwrap(); // success leaves the record alone
    assert_eq!(tg::last_error(), Some(e));
    tg::clear_last_error();
    assert_eq!(tg::last_error(), None);
}

#[test]
fn double_a_driver_that_lost_its_devices_is_reported() {
    let _s = serial();
    let d = support::double();
    unsafe { (d.set_devices)(0) };
    assert_eq!(tg::device_count().unwrap(), 0);
    assert!(!tg::gpu_available());
    let e = Runtime::new(0).unwrap_err();
    assert_eq!(e.status(), Status::DeviceUnavailable);
    assert!(e.message().contains("found no devices"), "{e}");
}

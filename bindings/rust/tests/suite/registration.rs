// SPDX-License-Identifier: MIT OR Apache-2.0
//! Registered memory: a Vec owned while registered (host_register), a slice
//! lent for a closure (with_host_registered), and what `std::mem::forget`
//! of a guard or a Transfer can and cannot do.  Tests that forget on
//! purpose leak a runtime reference, so they run alone in a child process
//! (support::run_ignored_child).

use std::panic::{self, AssertUnwindSafe};

use tenferro_gpu::{
    DeviceBuffer, RegisterError, Registered, RegisteredSlice, Runtime, Status, Stream, Transfer,
    UnregisterError,
};

use crate::support::{self, quietly, run_ignored_child, serial, CUDA_ERROR_UNKNOWN};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn registration_types_are_send_and_sync() {
    assert_send_sync::<Registered<u8>>();
    assert_send_sync::<RegisteredSlice<'static, f32>>();
    assert_send_sync::<Transfer<'static, Registered<u16>>>();
    assert_send_sync::<Transfer<'static, RegisteredSlice<'static, u16>>>();
    assert_send_sync::<RegisterError<u8>>();
    assert_send_sync::<UnregisterError<u8>>();
}

/// A stream and a device buffer of `n` bytes holding 0xcd, uploaded.
fn device_of_cd(rt: &Runtime, n: usize) -> (Stream, DeviceBuffer<u8>) {
    let stream = rt.stream(0).unwrap();
    let dev = stream.alloc_from(&vec![0xcdu8; n]).unwrap();
    stream.sync().unwrap();
    (stream, dev)
}

#[test]
fn a_registered_vec_takes_async_copies_and_comes_back() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    let data: Vec<u16> = (0..4096).collect();
    let mut buf = stream.alloc::<u16>(4096).unwrap();
    let reg = rt.host_register(data.clone()).unwrap();
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 8192);
    let reg = stream.upload_async(reg, &mut buf).unwrap().wait().unwrap();
    reg.record_use(&stream).unwrap();
    let back = rt.host_register(vec![0u16; 4096]).unwrap();
    let back = stream.download_async(&buf, back).unwrap().wait().unwrap();
    assert_eq!(back[4095], 4095);
    let out = back.unregister().unwrap();
    assert_eq!(out, data);
    drop(reg); // unregisters and frees the Vec
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 0);
}

#[test]
fn a_refused_registration_gives_the_vec_back() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let e = rt.host_register(Vec::<u8>::new()).unwrap_err();
    assert_eq!(
        (e.error().status(), e.error().operation()),
        (Status::InvalidArgument, "tf_host_register")
    );
    assert!(e.to_string().contains("bytes is 0"), "{e}");
    assert!(e.into_inner().is_empty());
    if support::is_double() {
        let d = support::double();
        d.inject("cuMemHostRegister", 1, CUDA_ERROR_UNKNOWN, 1);
        let e = rt.host_register(vec![7u8; 4096]).unwrap_err();
        assert_eq!((e.error().status(), e.error().call()), (Status::Cuda, "cuMemHostRegister"));
        assert!(format!("{e:?}").starts_with("RegisterError { error: Error {"), "{e:?}");
        assert_eq!(e.into_inner(), vec![7u8; 4096]);
    }
    // `?` in a function returning the crate's Result keeps the error
    let f = || -> tenferro_gpu::Result<Registered<u8>> { Ok(rt.host_register(Vec::new())?) };
    assert_eq!(f().unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn double_a_failed_unregistration_keeps_the_registration_for_another_try() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    let reg = rt.host_register(vec![1u32; 1024]).unwrap();
    d.inject("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN, 1);
    let e = reg.unregister().unwrap_err();
    assert_eq!((e.error().status(), e.error().call()), (Status::Cuda, "cuMemHostUnregister"));
    let reg = e.into_registration();
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 4096);
    assert_eq!(reg.unregister().unwrap(), vec![1u32; 1024]);
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 0);
}

#[test]
fn double_a_registration_that_cannot_be_unregistered_leaks_its_vec_on_drop() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    let reg = rt.host_register(vec![1u8; 4096]).unwrap();
    d.inject("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN, 1);
    drop(reg); // the range stays registered: the Vec is not freed under it
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 4096);
    assert_eq!(d.call_count("cuMemHostUnregister"), 1);
}

#[test]
fn forgetting_a_transfer_of_a_registered_vec_leaks_the_vec() {
    let (status, text) =
        run_ignored_child("registration::child_forgets_a_transfer_of_a_registered_vec");
    assert!(status.success() && text.contains("1 passed"), "{status}: {text}");
}

/// The program of issue 17, item 1, with the Vec moved in: safe code only.
#[test]
#[ignore = "a child of forgetting_a_transfer_of_a_registered_vec_leaks_the_vec"]
#[forbid(unsafe_code)]
fn child_forgets_a_transfer_of_a_registered_vec() {
    let rt = Runtime::new(0).unwrap();
    let (stream, dev) = device_of_cd(&rt, 1 << 16);
    let reg = rt.host_register(vec![0u8; 1 << 16]).unwrap();
    std::mem::forget(stream.download_async(&dev, reg).unwrap());
    let fresh = vec![0x11u8; 1 << 16];
    stream.sync().unwrap(); // the copy runs, into the leaked Vec
    assert!(fresh.iter().all(|&b| b == 0x11));
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 1 << 16);
}

#[test]
fn a_scoped_registration_waits_for_its_copies_before_returning() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let (stream, dev) = device_of_cd(&rt, 4096);
    let mut data = vec![0u8; 4096];
    let out = rt
        .with_host_registered(&mut data, |reg| {
            let reg = stream.download_async(&dev, reg).unwrap().wait().unwrap();
            assert_eq!(reg[4095], 0xcd);
            stream.download_async(&dev.slice(..16), reg).unwrap_err() // lengths differ
        })
        .unwrap();
    assert_eq!(out.status(), Status::InvalidArgument);
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 0);
    let e = rt.with_host_registered(&mut [0u8; 0], |_| ()).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_host_register"));
}

#[test]
fn forgetting_a_transfer_of_a_scoped_registration_is_waited_for_by_the_scope() {
    let (status, text) =
        run_ignored_child("registration::child_forgets_a_transfer_of_a_scoped_registration");
    assert!(status.success() && text.contains("1 passed"), "{status}: {text}");
}

#[test]
#[ignore = "a child of forgetting_a_transfer_of_a_scoped_registration_is_waited_for_by_the_scope"]
#[forbid(unsafe_code)]
fn child_forgets_a_transfer_of_a_scoped_registration() {
    let rt = Runtime::new(0).unwrap();
    let (stream, dev) = device_of_cd(&rt, 1 << 16);
    let mut data = vec![0u8; 1 << 16];
    rt.with_host_registered(&mut data, |reg| {
        std::mem::forget(stream.download_async(&dev, reg).unwrap());
    })
    .unwrap();
    // Returned only once the copy was done (on the double it runs when the
    // unregistration waits for the stream): nothing writes `data` later.
    assert!(data.iter().all(|&b| b == 0xcd));
    data.fill(0x11);
    stream.sync().unwrap();
    assert!(data.iter().all(|&b| b == 0x11));
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 0);
}

#[test]
fn a_scoped_registration_ends_when_its_closure_panics() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let (stream, dev) = device_of_cd(&rt, 4096);
    let mut data = vec![0u8; 4096];
    let caught = quietly(|| {
        panic::catch_unwind(AssertUnwindSafe(|| {
            rt.with_host_registered(&mut data, |reg| {
                let _pending = stream.download_async(&dev, reg).unwrap();
                panic!("inside the scope");
            })
        }))
    });
    assert_eq!(support::panic_text(&caught.unwrap_err()), "inside the scope");
    assert!(data.iter().all(|&b| b == 0xcd));
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 0);
}

#[test]
fn double_a_scope_whose_memory_cannot_be_unregistered_aborts_the_process() {
    let (status, text) = run_ignored_child("registration::child_cannot_unregister_a_scope");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(6), "{text}");
    assert!(
        text.contains("with_host_registered: the device may still use the caller's memory")
            && text.contains("cuMemHostUnregister"),
        "{text}"
    );
}

#[test]
#[ignore = "a child of double_a_scope_whose_memory_cannot_be_unregistered_aborts_the_process"]
fn child_cannot_unregister_a_scope() {
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    let mut data = [0u8; 4096];
    d.inject("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN, 2);
    let _ = rt.with_host_registered(&mut data, |_| ());
    unreachable!("with_host_registered returned although its memory stayed registered");
}

#[test]
fn double_a_scope_retries_a_failed_unregistration_once() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    let mut data = [0u8; 4096];
    d.inject("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_eq!(rt.with_host_registered(&mut data, |reg| reg.len()).unwrap(), 4096);
    assert_eq!(d.call_count("cuMemHostUnregister"), 2);
    assert_eq!(rt.host_stats().unwrap().bytes_registered, 0);
}

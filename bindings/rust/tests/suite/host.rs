// SPDX-License-Identifier: MIT OR Apache-2.0
//! Page-locked host memory and asynchronous copies: HostBuffer, Transfer,
//! the pool's stats and trim, and the optional 1.1 functions (registration:
//! registration.rs).

use tenferro_gpu::{sys, HostBuffer, HostPoolStats, Runtime, Status, Transfer};

use crate::support::{self, serial};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn host_types_are_send_and_sync() {
    assert_send_sync::<HostBuffer<f32>>();
    assert_send_sync::<Transfer<'static, HostBuffer<f64>>>();
    assert_send_sync::<HostPoolStats>();
}

#[test]
fn host_buffer_derefs_to_a_slice_and_goes_back_to_the_pool() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let before = rt.host_stats().unwrap();
    let mut host = rt.host_alloc::<u32>(1000).unwrap(); // 4000 bytes: class 4 KiB
    assert_eq!(host.len(), 1000);
    host.iter_mut().enumerate().for_each(|(i, v)| *v = i as u32);
    assert_eq!(host[999], 999);
    assert_eq!(host.as_ptr() as usize % 4096, 0);
    let s = rt.host_stats().unwrap();
    assert_eq!(s.blocks_in_use, before.blocks_in_use + 1);
    assert_eq!(s.bytes_in_use, before.bytes_in_use + 4096);
    // dropped on another thread
    std::thread::spawn(move || drop(host)).join().unwrap();
    let s = rt.host_stats().unwrap();
    assert_eq!(s.blocks_in_use, before.blocks_in_use);
    assert!(s.blocks_cached >= 1);
    let again = rt.host_alloc::<u8>(4096).unwrap(); // reused
    assert_eq!(rt.host_stats().unwrap().driver_allocations, s.driver_allocations);
    again.free().unwrap();
    rt.host_trim().unwrap();
    let s = rt.host_stats().unwrap();
    assert_eq!((s.blocks_cached, s.bytes_cached), (0, 0));
}

#[test]
fn host_alloc_refuses_zero_and_overflowing_sizes() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let e = rt.host_alloc::<f64>(0).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_host_alloc"));
    let e = rt.host_alloc::<f64>(usize::MAX).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "Runtime::host_alloc"));
}

#[test]
fn async_round_trip_through_a_host_buffer() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    let mut buf = stream.alloc::<f32>(256).unwrap();
    let mut host = rt.host_alloc::<f32>(256).unwrap();
    host.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32 * 0.5);
    let host = stream.upload_async(host, &mut buf).unwrap().wait().unwrap();
    assert_eq!(buf.to_vec().unwrap(), host.to_vec());
    let mut zeros = rt.host_alloc::<f32>(256).unwrap();
    zeros.fill(0.0);
    let transfer = stream.download_async(&buf, zeros).unwrap();
    let back = transfer.wait().unwrap();
    assert_eq!(back[..], host[..]);
    // a view of the device buffer
    let part = rt.host_alloc::<f32>(8).unwrap();
    let part = stream.download_async(&buf.slice(100..108), part).unwrap().wait().unwrap();
    assert_eq!(part[..], host[100..108]);
}

#[test]
fn double_transfer_reports_pending_work_until_the_device_runs_it() {
    let _s = serial();
    let double = support::double();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    let buf = stream.alloc_from(&[7u64; 64]).unwrap();
    stream.sync().unwrap();
    unsafe { (double.set_async_pending)(1) };
    let transfer = stream.download_async(&buf, rt.host_alloc::<u64>(64).unwrap()).unwrap();
    assert!(!transfer.query().unwrap());
    let other = rt.stream(1).unwrap();
    other.runtime().wait_event(transfer.event()).unwrap();
    let host = transfer.wait().unwrap();
    assert!(host.iter().all(|&v| v == 7));
    unsafe { (double.set_async_pending)(0) };
}

#[test]
fn async_copies_check_lengths() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    let mut buf = stream.alloc::<u8>(16).unwrap();
    let e = stream.download_async(&buf, rt.host_alloc::<u8>(32).unwrap()).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "Stream::download_async"));
    let e =
        stream.upload_async(rt.host_alloc::<u8>(8).unwrap(), &mut buf.slice_mut(..4)).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "Stream::upload_async"));
}

#[test]
fn double_driver_failures_reach_the_caller() {
    let _s = serial();
    let double = support::double();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    double.inject("cuMemHostAlloc", 1, support::CUDA_ERROR_UNKNOWN, 1);
    let e = rt.host_alloc::<u8>(1 << 20).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::Cuda, "tf_host_alloc"));
    let buf = stream.alloc::<u8>(64).unwrap();
    let host = rt.host_alloc::<u8>(64).unwrap();
    double.inject("cuMemcpyDtoHAsync", 1, support::CUDA_ERROR_UNKNOWN, 1);
    let e = stream.download_async(&buf, host).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::Cuda, "tf_download_async"));
}

#[test]
fn a_missing_optional_function_is_an_error_naming_it() {
    let Ok(lib) = sys::library() else { return };
    let mut old = *lib;
    old.tf_host_alloc = None;
    let mut out = std::ptr::null_mut();
    let missing = unsafe { old.tf_host_alloc(std::ptr::null_mut(), 1, &mut out) }.unwrap_err();
    assert_eq!((missing.name(), missing.since()), ("tf_host_alloc", "1.1"));
    assert!(missing.to_string().contains("too old"), "{missing}");
    assert!(lib.tf_host_alloc.is_some(), "this tree's library has the 1.1 functions");
}

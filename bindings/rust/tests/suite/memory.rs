//! Device memory and transfers: DeviceBuffer ownership, round trips,
//! scalars, copies and the checks before anything is queued.

use std::thread;

use tenferro_gpu::{Runtime, Status};

use crate::support::{self, serial};

#[test]
fn upload_download_round_trip_small_and_pipelined() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    for n in [1usize, 1000, 3 << 18] {
        // above 64 KiB a pageable destination takes the staging pipeline
        let data: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let mut buf = rt.alloc::<u64>(n).unwrap();
        assert_eq!((buf.len(), buf.byte_len()), (n, 8 * n));
        buf.upload(&data).unwrap();
        assert_eq!(buf.to_vec().unwrap(), data);
        let mut tail = vec![0u64; 1];
        buf.download_at(n - 1, &mut tail).unwrap();
        assert_eq!(tail[0], data[n - 1]);
    }
}

#[test]
fn scalars_copies_and_raw_addresses() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let mut a = rt.alloc::<f64>(4).unwrap();
    a.upload(&[1.5, -2.25, 3.0, 4.0]).unwrap();
    assert_eq!(rt.download_scalar::<f64>(a.ptr() + 8).unwrap(), -2.25);
    assert_eq!(rt.download_scalar::<[f64; 2]>(a.ptr() + 16).unwrap(), [3.0, 4.0]);
    let e = rt.download_scalar::<[f64; 3]>(a.ptr()).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    let mut b = rt.alloc::<f64>(4).unwrap();
    b.copy_from(&a).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![1.5, -2.25, 3.0, 4.0]);
    rt.copy(a.ptr(), b.ptr() + 24, 8).unwrap();
    assert_eq!(b.to_vec().unwrap()[3], 1.5);
    let e = rt.copy(a.ptr(), a.ptr() + 8, 16).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_copy"));
    let mut raw = [0f64; 2];
    rt.download(a.ptr(), &mut raw).unwrap();
    assert_eq!(raw, [1.5, -2.25]);
    rt.upload(&[9.0f64], a.ptr()).unwrap();
    assert_eq!(a.to_vec().unwrap()[0], 9.0);
}

#[test]
fn bounds_are_checked_before_anything_is_queued() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let mut buf = rt.alloc::<u32>(4).unwrap();
    let e = buf.upload(&[0u32; 5]).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("5 values at offset 0 do not fit the 4"), "{e}");
    assert!(buf.download_at(3, &mut [0u32; 2]).is_err());
    let other = rt.alloc::<u32>(3).unwrap();
    assert!(buf.copy_from(&other).is_err());
    let host = [0u8; 4];
    let e = rt.upload(&[1u8], host.as_ptr() as u64).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_upload"));
    let empty = rt.alloc::<u8>(0).unwrap();
    assert_eq!((empty.ptr(), empty.to_vec().unwrap()), (0, vec![]));
}

#[test]
fn peer_copy_on_one_device() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let other = Runtime::new(0).unwrap();
    assert!(rt.peer_copy_available(&other).unwrap());
    let mut a = rt.alloc::<u8>(8).unwrap();
    let b = other.alloc::<u8>(8).unwrap();
    a.upload(b"peercopy").unwrap();
    rt.peer_copy(a.ptr(), &other, b.ptr(), 8).unwrap();
    rt.sync().unwrap();
    assert_eq!(b.to_vec().unwrap(), b"peercopy");
}

#[test]
fn double_drop_free_and_other_threads_release_the_memory() {
    let _s = serial();
    let d = support::double();
    let before = d.count(support::TFD_DEVICE_ALLOCS);
    let rt = Runtime::new(0).unwrap();
    let a = rt.alloc::<u8>(64).unwrap();
    let b = rt.alloc::<u8>(64).unwrap();
    let c = rt.alloc::<u8>(64).unwrap();
    assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before + 3);
    drop(a);
    b.free().unwrap();
    rt.sync().unwrap(); // the frees are queued on the slot's stream
    assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before + 1);
    thread::spawn(move || drop(c)).join().unwrap(); // freed on its own slot
    rt.sync().unwrap(); // c's slot is this thread's
    assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before);
    // a buffer keeps its runtime alive
    let keep = rt.alloc::<u8>(4).unwrap();
    drop(rt);
    assert_eq!(d.refcount(), 1);
    drop(keep);
    assert_eq!(d.refcount(), 0);
}

#[test]
fn double_retire_frees_once_the_device_has_passed() {
    let _s = serial();
    let d = support::double();
    let before = d.count(support::TFD_DEVICE_ALLOCS);
    let rt = Runtime::new(0).unwrap();
    let buf = rt.alloc::<u8>(64).unwrap();
    rt.stream().unwrap();
    unsafe { (d.set_async_pending)(1) };
    buf.retire().unwrap();
    rt.poll_retirements().unwrap();
    assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before + 1);
    rt.sync().unwrap(); // passes the retirement: its release queues the free ...
    rt.sync().unwrap(); // ... which the stream then runs
    assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before);
    let stats = rt.retirement_stats().unwrap();
    assert!(stats.deferred >= 1 && stats.released == stats.deferred && stats.in_flight == 0);
}

#[test]
fn double_failed_allocations_leak_nothing() {
    let _s = serial();
    let d = support::double();
    for pools in [1, 0] {
        unsafe { (d.set_attribute)(0, support::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, pools) };
        let entry = if pools == 1 { "cuMemAllocAsync" } else { "cuMemAlloc" };
        let rt = Runtime::new(0).unwrap();
        d.inject(entry, 1, support::CUDA_ERROR_OUT_OF_MEMORY, 1);
        let e = rt.alloc::<u8>(1 << 20).unwrap_err();
        assert_eq!((e.status(), e.operation(), e.call()), (Status::OutOfMemory, "tf_alloc", entry));
        assert_eq!(d.refcount(), 1);
        let mut ok = rt.alloc::<u8>(8).unwrap();
        ok.upload(b"12345678").unwrap();
        drop(ok);
        drop(rt);
        assert_eq!(d.refcount(), 0);
    }
}

// SPDX-License-Identifier: MIT OR Apache-2.0
//! Device memory and transfers: DeviceBuffer ownership, typed views, round
//! trips, scalars, copies and the checks before anything is queued.

use std::panic::{self, AssertUnwindSafe};
use std::thread;

use tenferro_gpu::{DeviceBuffer, DeviceSlice, Runtime, Status};

use crate::support::{self, quietly, serial};

#[test]
fn upload_download_round_trip_small_and_pipelined() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    for n in [1usize, 1000, 3 << 18] {
        // above 64 KiB a pageable destination takes the staging pipeline
        let data: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let mut buf = stream.alloc::<u64>(n).unwrap();
        assert_eq!((buf.len(), buf.byte_len()), (n, 8 * n));
        buf.upload(&data).unwrap();
        assert_eq!(buf.to_vec().unwrap(), data);
        assert_eq!(stream.to_vec(&buf.slice(n - 1..)).unwrap(), [data[n - 1]]);
        let mut back = vec![0u64; n];
        stream.download(&buf, &mut back).unwrap();
        assert_eq!(back, data);
    }
}

#[test]
fn transfers_are_byte_exact_for_every_element_type() {
    let _s = serial();
    let stream = Runtime::new(0).unwrap().stream(0).unwrap();
    // Bit patterns that a conversion would change: NaN payloads, -0.0,
    // subnormals, extreme integers.
    let floats = [f64::from_bits(0x7ff8_dead_beef_0001), -0.0, f64::MIN_POSITIVE / 3.0, f64::MAX];
    let back = stream.to_vec(&stream.alloc_from(&floats).unwrap()).unwrap();
    assert_eq!(back.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), floats.map(f64::to_bits));
    let singles = [f32::from_bits(0xffc0_0001), -0.0f32, 1e-45];
    let back = stream.to_vec(&stream.alloc_from(&singles).unwrap()).unwrap();
    assert_eq!(back.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), singles.map(f32::to_bits));
    let ints = [i128::MIN, -1, 0, i128::MAX];
    assert_eq!(stream.to_vec(&stream.alloc_from(&ints).unwrap()).unwrap(), ints);
    let pairs = [[1u16, 2], [u16::MAX, 0]];
    let buf = stream.alloc_from(&pairs).unwrap();
    assert_eq!(buf.byte_len(), 8);
    assert_eq!(stream.to_vec(&buf).unwrap(), pairs);
}

#[test]
fn views_borrow_ranges_of_a_buffer() {
    let _s = serial();
    let stream = Runtime::new(0).unwrap().stream(0).unwrap();
    let mut buf = stream.alloc_from(&[0u32, 1, 2, 3, 4, 5, 6, 7]).unwrap();
    let view = buf.slice(2..6);
    assert_eq!((view.len(), view.byte_len(), view.as_raw()), (4, 16, buf.as_raw() + 8));
    assert_eq!(view.to_vec().unwrap(), [2, 3, 4, 5]);
    assert_eq!(view.slice(1..=2).to_vec().unwrap(), [3, 4]);
    assert_eq!(stream.download_scalar(&view.slice(3..4)).unwrap(), 5);
    assert!(buf.try_slice(7..9).is_none() && buf.try_slice(9..).is_none());
    assert_eq!(buf.try_slice(8..).unwrap().len(), 0);
    {
        let (mut low, mut high) = buf.slice_mut(..).split_at_mut(4);
        low.upload(&[10, 11, 12, 13]).unwrap();
        high.copy_from(&low).unwrap(); // device to device, same length
        high.slice_mut(3..).upload(&[99]).unwrap();
    }
    assert_eq!(buf.to_vec().unwrap(), [10, 11, 12, 13, 10, 11, 12, 99]);
    let mut dst = stream.alloc::<u32>(2).unwrap();
    stream.copy(&buf.slice(1..3), &mut dst).unwrap();
    assert_eq!(dst.to_vec().unwrap(), [11, 12]);
    let raw = unsafe { DeviceSlice::<u32>::from_raw(&stream, buf.as_raw() + 4, 2) };
    assert_eq!(raw.to_vec().unwrap(), [11, 12]);
}

#[test]
fn lengths_and_ranges_are_checked_before_anything_is_queued() {
    let _s = serial();
    let stream = Runtime::new(0).unwrap().stream(0).unwrap();
    let mut buf = stream.alloc::<u32>(4).unwrap();
    let e = buf.upload(&[0u32; 5]).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "Stream::upload"));
    assert!(e.message().contains("the source holds 5 values, the destination 4"), "{e}");
    assert!(buf.download(&mut [0u32; 3]).is_err());
    let other = stream.alloc::<u32>(3).unwrap();
    assert_eq!(buf.copy_from(&other).unwrap_err().operation(), "Stream::copy");
    let e = stream.download_scalar(&buf.slice(0..2)).unwrap_err();
    assert!(e.message().contains("holds 2 values, the destination 1"), "{e}");
    let e = stream.runtime().download_scalar::<[f64; 3]>(buf.as_raw()).unwrap_err();
    assert!(e.message().contains("24-byte value is over the 16-byte limit"), "{e}");
    let caught = quietly(|| panic::catch_unwind(AssertUnwindSafe(|| buf.slice(3..5).len())));
    assert!(support::panic_text(&caught.unwrap_err()).contains("out of bounds"));
    let caught = quietly(|| {
        panic::catch_unwind(AssertUnwindSafe(|| buf.slice_mut(..).split_at_mut(5).0.len()))
    });
    assert!(caught.is_err());
    let e = stream.alloc::<u64>(usize::MAX / 4).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "Stream::alloc"));
    let empty = stream.alloc::<u8>(0).unwrap();
    assert_eq!((empty.as_raw(), empty.to_vec().unwrap()), (0, vec![]));
}

#[test]
fn raw_addresses_reach_the_library_unchecked_by_the_binding() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let a = rt.stream(0).unwrap().alloc_from(&[1.5f64, -2.25, 3.0, 4.0]).unwrap();
    let b = rt.stream(0).unwrap().alloc::<f64>(4).unwrap();
    let s0 = rt.stream(0).unwrap();
    let rt0 = s0.runtime(); // the bound handle: slot 0 from this thread too
    assert_eq!(rt0.download_scalar::<f64>(a.as_raw() + 8).unwrap(), -2.25);
    assert_eq!(rt0.download_scalar::<[f64; 2]>(a.as_raw() + 16).unwrap(), [3.0, 4.0]);
    rt0.copy(a.as_raw(), b.as_raw() + 24, 8).unwrap();
    assert_eq!(b.to_vec().unwrap()[3], 1.5);
    let e = rt0.copy(a.as_raw(), a.as_raw() + 8, 16).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_copy"));
    let mut raw = [0f64; 2];
    rt0.download(a.as_raw(), &mut raw).unwrap();
    assert_eq!(raw, [1.5, -2.25]);
    rt0.upload(&[9.0f64], a.as_raw()).unwrap();
    assert_eq!(a.to_vec().unwrap()[0], 9.0);
    let host = [0u8; 4];
    let e = rt0.upload(&[1u8], host.as_ptr() as u64).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_upload"));
    // ownership round trip through the raw address
    let stream = rt.stream(0).unwrap();
    let owned = stream.alloc_from(&[7u8; 8]).unwrap();
    let address = owned.into_raw();
    let back = unsafe { DeviceBuffer::<u8>::from_raw(&stream, address, 8) };
    assert_eq!(back.to_vec().unwrap(), [7; 8]);
    back.free().unwrap();
}

#[test]
fn peer_copy_between_runtimes_of_one_device() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let other = Runtime::new(0).unwrap();
    assert!(rt.peer_copy_available(&other).unwrap());
    let (here, there) = (rt.stream(0).unwrap(), other.stream(1).unwrap());
    let a = here.alloc_from(b"peercopy").unwrap();
    let mut b = there.alloc::<u8>(8).unwrap();
    here.peer_copy(&a, &mut b).unwrap();
    here.sync().unwrap();
    assert_eq!(b.to_vec().unwrap(), b"peercopy");
    let mut short = there.alloc::<u8>(4).unwrap();
    assert_eq!(here.peer_copy(&a, &mut short).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn double_a_buffer_is_freed_on_its_stream_whichever_thread_drops_it() {
    let _s = serial();
    let d = support::double();
    let before = d.count(support::TFD_DEVICE_ALLOCS);
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(1).unwrap();
    let a = stream.alloc::<u8>(64).unwrap();
    let b = stream.alloc::<u8>(64).unwrap();
    let c = stream.alloc::<u8>(64).unwrap();
    assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before + 3);
    drop(a);
    b.free().unwrap();
    stream.sync().unwrap(); // the frees are queued on the buffers' stream
    assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before + 1);
    thread::spawn(move || drop(c)).join().unwrap(); // freed on slot 1 all the same
    stream.sync().unwrap();
    assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before);
    // a buffer keeps its stream, and so the runtime, alive
    let keep = stream.alloc::<u8>(4).unwrap();
    drop((rt, stream));
    assert_eq!(d.refcount(), 1);
    drop(keep);
    assert_eq!(d.refcount(), 0);
}

/// Runs `f` with the double's device answering whether it has memory pools
/// (`pools`: 1 stream-ordered allocation, 0 cuMemAlloc / cuMemFree).
fn with_pools(pools: i32, f: impl FnOnce()) {
    let d = support::double();
    unsafe { (d.set_attribute)(0, support::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, pools) };
    f();
    unsafe { (d.set_attribute)(0, support::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1) };
}

/// `f(pools)` with memory pools, then without.
fn with_and_without_pools(f: impl Fn(i32)) {
    for pools in [1, 0] {
        with_pools(pools, || f(pools));
    }
}

#[test]
fn double_retire_frees_once_the_device_has_passed() {
    let _s = serial();
    let d = support::double();
    with_and_without_pools(|pools| {
        let before = d.count(support::TFD_DEVICE_ALLOCS);
        let rt = Runtime::new(0).unwrap();
        let stream = rt.stream(0).unwrap();
        let buf = stream.alloc::<u8>(64).unwrap();
        stream.sync().unwrap();
        unsafe { (d.set_async_pending)(1) };
        buf.retire().unwrap(); // never waits
        rt.poll_retirements().unwrap();
        assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before + 1, "pools {pools}");
        stream.sync().unwrap(); // passes the retirement, or runs the queued free
        stream.sync().unwrap();
        assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before, "pools {pools}");
        let stats = rt.retirement_stats().unwrap();
        // With pools the free is stream-ordered: no retirement is needed.
        assert_eq!(stats.deferred, if pools == 1 { 0 } else { 1 }, "pools {pools}");
        assert!(stats.released == stats.deferred && stats.in_flight == 0);
        unsafe { (d.set_async_pending)(0) };
    });
}

#[test]
fn double_a_retired_buffer_does_not_keep_its_runtime_alive() {
    let _s = serial();
    let d = support::double();
    with_and_without_pools(|pools| {
        let before = d.count(support::TFD_DEVICE_ALLOCS);
        let rt = Runtime::new(0).unwrap();
        let stream = rt.stream(0).unwrap();
        stream.alloc::<u8>(64).unwrap().retire().unwrap();
        drop((stream, rt));
        assert_eq!(d.refcount(), 0, "pools {pools}: the pending release holds the runtime");
        assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before, "pools {pools}");
    });
}

#[test]
fn double_a_retirement_released_at_teardown_leaves_the_memory_to_the_context() {
    let _s = serial();
    let d = support::double();
    with_pools(0, || {
        let before = d.count(support::TFD_DEVICE_ALLOCS);
        let keeper = Runtime::new(0).unwrap(); // holds the primary context
        let rt = Runtime::new(0).unwrap();
        let stream = rt.stream(0).unwrap();
        stream.alloc::<u8>(64).unwrap().retire().unwrap();
        drop((stream, rt)); // the release runs in the teardown: no call into it
        assert_eq!(d.refcount(), 1);
        assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before + 1);
        drop(keeper); // the context goes, and its memory with it
        assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before);
    });
}

#[test]
fn double_a_retirement_frees_through_whichever_handle_runs_it() {
    let _s = serial();
    let d = support::double();
    with_pools(0, || {
        let before = d.count(support::TFD_DEVICE_ALLOCS);
        let rt = Runtime::new(0).unwrap();
        let s0 = rt.stream(0).unwrap();
        let buf = s0.alloc::<u8>(64).unwrap();
        buf.retire().unwrap();
        drop(s0); // the handle it was retired through, and the buffer's
        assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before + 1);
        let other = rt.stream(0).unwrap(); // another handle of the slot
        other.sync().unwrap(); // runs the release: it frees through `other`
        assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), before);
        assert_eq!(rt.retirement_stats().unwrap().released, 1);
    });
}

#[test]
fn double_failed_allocations_leak_nothing() {
    let _s = serial();
    let d = support::double();
    for pools in [1, 0] {
        unsafe { (d.set_attribute)(0, support::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, pools) };
        let entry = if pools == 1 { "cuMemAllocFromPoolAsync" } else { "cuMemAlloc" };
        let rt = Runtime::new(0).unwrap();
        let stream = rt.stream(0).unwrap();
        // tf_alloc retries once after giving cached memory back.
        d.inject(entry, 1, support::CUDA_ERROR_OUT_OF_MEMORY, 2);
        let e = stream.alloc::<u8>(1 << 20).unwrap_err();
        assert_eq!((e.status(), e.operation(), e.call()), (Status::OutOfMemory, "tf_alloc", entry));
        assert_eq!(d.refcount(), 1);
        let mut ok = stream.alloc::<u8>(8).unwrap();
        ok.upload(b"12345678").unwrap();
        drop((ok, stream));
        drop(rt);
        assert_eq!(d.refcount(), 0);
    }
}

// SPDX-License-Identifier: MIT OR Apache-2.0
//! A synchronous copy to or from page-locked memory that fails after it was
//! queued (an injected cuStreamSynchronize failure): the device may still
//! use the memory, so its owner lets go of it only after a sync of the
//! copy's slot succeeds, and leaks it otherwise (issue 17, item 6).

use tenferro_gpu::{sys, DeviceBuffer, Runtime, Status, Stream};

use crate::support::{self, serial, CUDA_ERROR_UNKNOWN};

const N: usize = 4096;

/// A runtime, its stream 0 and a device buffer of N bytes of 0xcd.
fn setup() -> (Runtime, Stream, DeviceBuffer<u8>) {
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    let dev = stream.alloc_from(&[0xcdu8; N]).unwrap();
    stream.sync().unwrap();
    (rt, stream, dev)
}

/// Makes the next `times` waits of any stream fail.
fn fail_waits(times: u64) {
    support::double().inject("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN, times);
}

fn assert_failed_wait(e: tenferro_gpu::Error) {
    assert_eq!((e.status(), e.call()), (Status::Cuda, "cuStreamSynchronize"), "{e}");
}

/// Frees a block the test leaked on purpose, once its runtime is gone
/// (`tf_host_free(NULL, ptr)`): a block left allocated keeps the primary
/// context retained, and a later test's poisoned context would stay so.
fn free_leaked_block(ptr: *const u8) {
    let lib = sys::library().unwrap();
    // SAFETY: a tf_host_alloc block nothing uses any more, freed once.
    let status = unsafe { lib.tf_host_free(std::ptr::null_mut(), ptr as *mut _) }.unwrap();
    assert_eq!(status, sys::TF_OK);
    assert_eq!(support::double().refcount(), 0);
}

#[test]
fn double_a_failed_download_never_lands_in_the_next_host_buffer() {
    let _s = serial();
    let (rt, stream, dev) = setup();
    let mut stale = rt.host_alloc::<u8>(N).unwrap();
    fail_waits(1);
    assert_failed_wait(stream.download(&dev, &mut stale).unwrap_err());
    drop(stale); // syncs the slot first: the queued copy lands in `stale`
    let mut fresh = rt.host_alloc::<u8>(N).unwrap();
    fresh.fill(0x11);
    stream.sync().unwrap();
    assert_eq!(fresh[0], 0x11, "fresh[0] = {:#x} (was 0x11)", fresh[0]);
}

#[test]
fn double_a_host_buffer_whose_failed_copy_cannot_be_waited_for_is_leaked() {
    let _s = serial();
    let d = support::double();
    let (rt, stream, dev) = setup();
    let mut stale = rt.host_alloc::<u8>(N).unwrap();
    let leaked_block = stale.as_ptr();
    let before = rt.host_stats().unwrap();
    fail_waits(2); // the download's wait, and the one before the free
    assert_failed_wait(stream.download(&dev, &mut stale).unwrap_err());
    let syncs = d.call_count("cuStreamSynchronize");
    assert_failed_wait(stale.free().unwrap_err());
    assert_eq!(d.call_count("cuStreamSynchronize"), syncs + 1);
    let leaked = rt.host_stats().unwrap();
    assert_eq!(leaked.blocks_in_use, before.blocks_in_use, "never given back to the pool");
    let mut fresh = rt.host_alloc::<u8>(N).unwrap(); // another block
    assert_eq!(rt.host_stats().unwrap().driver_allocations, before.driver_allocations + 1);
    fresh.fill(0x11);
    stream.sync().unwrap();
    assert_eq!(fresh[0], 0x11);
    drop((fresh, dev, stream, rt));
    free_leaked_block(leaked_block);
}

#[test]
fn double_a_failed_upload_reads_its_own_host_buffer_not_the_next() {
    let _s = serial();
    let (rt, stream, mut dev) = setup();
    let mut stale = rt.host_alloc::<u8>(N).unwrap();
    stale.fill(0x5a);
    fail_waits(1);
    assert_failed_wait(stream.upload(&stale, &mut dev).unwrap_err());
    drop(stale);
    let mut fresh = rt.host_alloc::<u8>(N).unwrap();
    fresh.fill(0x11);
    stream.sync().unwrap();
    assert_eq!(dev.to_vec().unwrap()[0], 0x5a, "the copy read the next buffer");
}

#[test]
fn double_a_registered_vec_comes_back_only_after_its_failed_copy_landed() {
    let _s = serial();
    let (rt, stream, dev) = setup();
    let mut reg = rt.host_register(vec![0u8; N]).unwrap();
    fail_waits(1);
    assert_failed_wait(stream.download(&dev, &mut reg).unwrap_err());
    let mut data = reg.unregister().unwrap();
    assert_eq!(data[0], 0xcd, "given back before the device was done");
    data.fill(0x11);
    stream.sync().unwrap();
    assert_eq!(data[0], 0x11);
}

#[test]
fn double_a_scoped_registration_returns_only_after_its_failed_copy_landed() {
    let _s = serial();
    let (rt, stream, dev) = setup();
    let mut data = vec![0u8; N];
    fail_waits(1);
    let e = rt.with_host_registered(&mut data, |mut reg| stream.download(&dev, &mut reg)).unwrap();
    assert_failed_wait(e.unwrap_err());
    assert_eq!(data[0], 0xcd);
    data.fill(0x11);
    stream.sync().unwrap();
    assert_eq!(data[0], 0x11);
}

#[test]
fn double_a_failed_copy_through_another_runtime_keeps_the_block_until_that_slot_syncs() {
    let _s = serial();
    let (rt, stream, dev) = setup();
    let other = Runtime::new(0).unwrap(); // owns the page-locked block
    let before = other.host_stats().unwrap();
    let mut leaked_block = std::ptr::null();
    for sync_first in [false, true] {
        let mut block = other.host_alloc::<u8>(N).unwrap();
        fail_waits(1);
        assert_failed_wait(stream.download(&dev, &mut block).unwrap_err());
        if sync_first {
            stream.sync().unwrap();
            block.free().unwrap();
        } else {
            leaked_block = block.as_ptr();
            let e = block.free().unwrap_err();
            assert_eq!(e.status(), Status::RuntimeState);
            assert!(e.message().contains("another runtime"), "{e}");
        }
    }
    // the first block is leaked, the second went back to the pool
    assert_eq!(other.host_stats().unwrap().blocks_in_use, before.blocks_in_use + 1);
    drop((dev, stream, rt, other));
    free_leaked_block(leaked_block);
}

#[test]
fn double_a_successful_sync_forgets_failed_copies_on_its_slot() {
    let _s = serial();
    let d = support::double();
    let (rt, stream, dev) = setup();
    let mut block = rt.host_alloc::<u8>(N).unwrap();
    fail_waits(1);
    assert_failed_wait(stream.download(&dev, &mut block).unwrap_err());
    stream.sync().unwrap();
    let syncs = d.call_count("cuStreamSynchronize");
    block.free().unwrap(); // nothing left to wait for
    assert_eq!(d.call_count("cuStreamSynchronize"), syncs);
}

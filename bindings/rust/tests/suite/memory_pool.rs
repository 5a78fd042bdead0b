// SPDX-License-Identifier: MIT OR Apache-2.0
//! The device's memory pool: statistics, peak reset, trim, the memory
//! options, and uses on other slots, recorded by the crate's calls or by
//! hand.

use tenferro_gpu::{
    cublas::Gemm, sys, Capability, CompileOptions, DeviceBuffer, LaunchConfig, MemoryStats,
    Runtime, RuntimeOptions, Status, Stream,
};

use crate::support::{self, serial};

const MIB: u64 = 1 << 20;

/// What every snapshot satisfies (tf_memory_pool_stats).
fn assert_consistent(s: &MemoryStats) {
    assert!(s.in_use_bytes <= s.reserved_bytes && s.reserved_bytes <= s.reserved_peak, "{s:?}");
    assert!(s.in_use_bytes <= s.in_use_peak && s.frees <= s.allocations, "{s:?}");
}

#[test]
fn memory_stats_count_allocations_peaks_and_trims() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    let before = rt.memory_stats().unwrap();
    let defaults = (sys::TF_DEFAULT_MEMORY_RELEASE_THRESHOLD, 0);
    assert_eq!((before.release_threshold, before.reserved_limit), defaults);
    let big = stream.alloc::<u8>(MIB as usize).unwrap();
    let small = stream.alloc::<u32>(1024).unwrap();
    let s = rt.memory_stats().unwrap();
    assert_consistent(&s);
    assert_eq!(s.cached, rt.supports(Capability::StreamOrderedAlloc).unwrap());
    assert_eq!(s.in_use_bytes, before.in_use_bytes + MIB + 4096);
    assert_eq!((s.allocations, s.frees), (before.allocations + 2, before.frees));
    drop(big);
    stream.sync().unwrap();
    let after = rt.memory_stats().unwrap();
    assert_consistent(&after);
    assert_eq!((after.in_use_bytes, after.frees), (s.in_use_bytes - MIB, s.frees + 1));
    assert!(after.in_use_peak >= s.in_use_bytes);
    assert_eq!(after, rt.stream(3).unwrap().runtime().memory_stats().unwrap());
    assert_eq!(after, Runtime::new(0).unwrap().memory_stats().unwrap(), "the device's counters");
    rt.reset_peak_memory_stats().unwrap();
    let reset = rt.memory_stats().unwrap();
    assert_eq!(
        (reset.in_use_peak, reset.reserved_peak),
        (reset.in_use_bytes, reset.reserved_bytes)
    );
    rt.trim_memory(0).unwrap();
    let trimmed = rt.memory_stats().unwrap();
    assert_consistent(&trimmed);
    assert_eq!(trimmed.trims, reset.trims + u64::from(trimmed.cached));
    assert!(trimmed.reserved_bytes <= reset.reserved_bytes);
    if support::is_double() {
        assert_eq!(trimmed.reserved_bytes, trimmed.in_use_bytes, "the double keeps nothing");
    }
    drop(small);
}

#[test]
fn double_without_memory_pools_the_stats_say_uncached() {
    let _s = serial();
    let d = support::double();
    unsafe { (d.set_attribute)(0, support::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0) };
    let rt = Runtime::new(0).unwrap();
    let buf = rt.stream(0).unwrap().alloc::<u8>(4096).unwrap();
    let s = rt.memory_stats().unwrap();
    assert!(!s.cached && s.reserved_bytes == s.in_use_bytes && s.in_use_bytes == 4096, "{s:?}");
    rt.trim_memory(0).unwrap(); // nothing to give back
    assert_eq!(rt.memory_stats().unwrap().trims, 0);
    buf.record_use(&rt.stream(1).unwrap()).unwrap(); // checks the address only
    drop((buf, rt));
    unsafe { (d.set_attribute)(0, support::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1) };
}

#[test]
fn the_memory_options_reach_the_devices_pool() {
    let _s = serial();
    let options =
        RuntimeOptions::new().memory_release_threshold(MIB).memory_reserved_limit(64 * MIB);
    assert!(format!("{options:?}").contains("memory_reserved_limit: 67108864"));
    let rt = Runtime::with_options(0, &options).unwrap();
    let s = rt.memory_stats().unwrap();
    if !s.cached {
        eprintln!("the device has no memory pools: its options are not shown; test skipped");
        return;
    }
    assert_eq!((s.release_threshold, s.reserved_limit), (MIB, 64 * MIB));
    // The pool is the device's: another value is refused while it lives,
    // 0 takes the pool's.
    let other = RuntimeOptions::new().memory_reserved_limit(128 * MIB);
    let e = Runtime::with_options(0, &other).unwrap_err();
    assert_eq!(
        (e.status(), e.operation()),
        (Status::InvalidArgument, "tf_runtime_new_with_options")
    );
    assert!(e.message().contains("memory_reserved_limit 134217728 differs from the 67108864"), "{e}");
    let same = Runtime::with_options(0, &RuntimeOptions::new()).unwrap();
    assert_eq!(same.memory_stats().unwrap().reserved_limit, 64 * MIB);
    // The limit holds: past it, the pool gives back and retries, then fails.
    let stream = rt.stream(0).unwrap();
    let six = stream.alloc::<u8>(48 * MIB as usize).unwrap();
    let e = stream.alloc::<u8>(32 * MIB as usize).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::OutOfMemory, "tf_alloc"));
    assert!(e.message().contains("memory_reserved_limit"), "{e}");
    let s = rt.memory_stats().unwrap();
    assert_eq!((s.oom_retries, s.oom_failures), (1, 1));
    drop((six, stream, same, rt));
    let e =
        Runtime::with_options(0, &RuntimeOptions::new().memory_reserved_limit(4096)).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("below TF_MIN_MEMORY_RESERVED_LIMIT"), "{e}");
    // Once the device's runtimes are gone, a new pool takes new options.
    let rt =
        Runtime::with_options(0, &RuntimeOptions::new().memory_reserved_limit(128 * MIB)).unwrap();
    assert_eq!(rt.memory_stats().unwrap().reserved_limit, 128 * MIB);
}

#[test]
fn record_use_checks_its_address() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    let buf = stream.alloc::<u64>(8).unwrap();
    buf.record_use(&rt.stream(1).unwrap()).unwrap();
    buf.slice(7..).record_use(&stream).unwrap();
    stream.alloc::<u8>(0).unwrap().record_use(&stream).unwrap(); // empty: nothing to record
    let e = rt.record_use(0).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_memory_record_use"));
    let host = [0u8; 8];
    let e = rt.record_use(host.as_ptr() as u64).unwrap_err();
    assert!(e.message().contains("is not inside a live tf_alloc() allocation"), "{e}");
    let e = rt.record_use(buf.as_raw() + 64).unwrap_err(); // one past the end
    assert_eq!(e.status(), Status::InvalidArgument);
}

/// Slot 1 writes 0x55 over `x`, a buffer of slot 0, by `write` (deferred: it
/// runs later); `x` is dropped (freed on slot 0) and the pool hands its
/// memory to `y` on slot 0, which is filled with 0xAA.  Returns the byte y
/// holds once both slots ran: 0xAA when the free waited for slot 1's work,
/// 0x55 when that work landed in y.
fn free_while_slot_1_writes(
    write: impl FnOnce(&Stream, &DeviceBuffer<u8>, &mut DeviceBuffer<u8>),
) -> u8 {
    const BYTES: usize = 4096;
    let rt = Runtime::new(0).unwrap();
    let (s0, s1) = (rt.stream(0).unwrap(), rt.stream(1).unwrap());
    let src = s1.alloc_from(&[0x55u8; BYTES]).unwrap();
    let mut x = s0.alloc::<u8>(BYTES).unwrap();
    let address = x.as_raw();
    write(&s1, &src, &mut x);
    drop(x);
    let mut y = s0.alloc::<u8>(BYTES).unwrap();
    assert_eq!(y.as_raw(), address, "stream order on slot 0: the pool hands it out at once");
    y.upload(&[0xAA; BYTES]).unwrap();
    s0.sync().unwrap();
    s1.sync().unwrap();
    let back = y.to_vec().unwrap();
    assert!(back.iter().all(|&b| b == back[0]), "one write or the other, whole");
    back[0]
}

#[test]
fn double_a_buffer_used_on_another_slot_is_freed_after_that_work() {
    let _s = serial();
    let _ = support::double();
    // The crate's own call records the use: the free waits for slot 1.
    assert_eq!(free_while_slot_1_writes(|s1, src, x| s1.copy(src, x).unwrap()), 0xAA);
    // Work queued by hand on raw addresses is not recorded: the double
    // shows the hazard the record prevents, so the line above can fail ...
    let raw = |s1: &Stream, src: &DeviceBuffer<u8>, x: &mut DeviceBuffer<u8>| {
        s1.runtime().copy(src.as_raw(), x.as_raw(), src.len()).unwrap()
    };
    assert_eq!(free_while_slot_1_writes(raw), 0x55);
    // ... unless it is recorded by hand.
    let recorded = |s1: &Stream, src: &DeviceBuffer<u8>, x: &mut DeviceBuffer<u8>| {
        raw(s1, src, x);
        x.record_use(s1).unwrap();
    };
    assert_eq!(free_while_slot_1_writes(recorded), 0xAA);
}

/// cuEventRecord calls while `f` runs (a recorded use costs one at the
/// free).
fn event_records(f: impl FnOnce()) -> u64 {
    let d = support::double();
    let before = d.call_count("cuEventRecord");
    f();
    d.call_count("cuEventRecord") - before
}

#[test]
fn double_every_call_that_queues_work_records_its_operands_of_other_slots() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let (s0, s1) = (rt.stream(0).unwrap(), rt.stream(1).unwrap());
    let same_slot = rt.stream(0).unwrap(); // another handle of slot 0
    let mine = || s0.alloc_from(&[1f32; 64]).unwrap();
    let theirs = s1.alloc_from(&[2f32; 64]).unwrap();
    // Each case queues work with one buffer of slot 0 on `by`, then frees
    // it on slot 0: one event record at the free when the use was recorded.
    let case = |by: &Stream, use_it: &dyn Fn(&Stream, &mut DeviceBuffer<f32>)| {
        let mut buf = mine();
        s0.sync().unwrap();
        use_it(by, &mut buf);
        event_records(|| buf.free().unwrap())
    };
    let uses: Vec<(&str, Box<dyn Fn(&Stream, &mut DeviceBuffer<f32>)>)> = vec![
        ("upload", Box::new(|s, b| s.upload(&[3f32; 64], b).unwrap())),
        ("copy from", Box::new(|s, b| s.copy(b, &mut s.alloc::<f32>(64).unwrap()).unwrap())),
        ("copy into", Box::new(|s, b| s.copy(&theirs, b).unwrap())),
        (
            "copy into a view",
            Box::new(|s, b| s.copy(&theirs.slice(..8), &mut b.slice_mut(8..16)).unwrap()),
        ),
        (
            "gemm",
            Box::new(|s, b| s.gemm(&Gemm::new(8, 8, 8), 1f32, &theirs, &theirs, 0f32, b).unwrap()),
        ),
        (
            "download_async",
            Box::new(|s, b| {
                let host = s.runtime().host_alloc::<f32>(64).unwrap();
                s.download_async(&*b, host).unwrap().wait().unwrap();
            }),
        ),
        (
            "upload_async",
            Box::new(|s, b| {
                let host = s.runtime().host_alloc::<f32>(64).unwrap();
                s.upload_async(host, b).unwrap().wait().unwrap();
            }),
        ),
        ("peer_copy", Box::new(|s, b| s.peer_copy(&theirs, b).unwrap())),
    ];
    for (what, use_it) in &uses {
        assert_eq!(case(&s1, &**use_it), 1, "{what} on another slot");
        assert_eq!(case(&same_slot, &**use_it), 0, "{what} on the buffer's own slot");
    }
    // Downloads return once the device is done: nothing to record.
    assert_eq!(case(&s1, &|s, b| drop(s.to_vec(&*b).unwrap())), 0);
    // A kernel launch records its buffer arguments.
    if rt.supports(Capability::RuntimeCompilation).unwrap() {
        let program = rt.compile(support::ADD_SOURCE, &CompileOptions::new()).unwrap();
        let add =
            rt.load_module(program.image().unwrap()).unwrap().function("tfd_add_f32").unwrap();
        let launch = |s: &Stream, b: &mut DeviceBuffer<f32>| {
            let n = 64u32;
            // SAFETY: (const float *, const float *, float *, unsigned).
            unsafe {
                s.launch(&add, &LaunchConfig::linear(n, 64), &[&theirs, &theirs, &*b, &n]).unwrap()
            };
        };
        assert_eq!(case(&s1, &launch), 1, "launch on another slot");
        assert_eq!(case(&s0, &launch), 0, "launch on the buffer's own stream");
    }
    // Another runtime of the device: its slot's use is recorded too.
    let rt2 = Runtime::new(0).unwrap();
    let s2 = rt2.stream(0).unwrap();
    assert_eq!(case(&s2, &|s, b| s.upload(&[4f32; 64], b).unwrap()), 1);
}

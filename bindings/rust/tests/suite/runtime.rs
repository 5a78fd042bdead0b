// SPDX-License-Identifier: MIT OR Apache-2.0
//! Runtime: Clone and Drop, options, queries and the slot streams.

use std::ptr;
use std::sync::Arc;
use std::thread;

use tenferro_gpu::{self as tg, Capability, Runtime, RuntimeOptions, Status};

use crate::support::{self, serial};

fn slots(n: u32) -> Runtime {
    Runtime::with_options(0, &RuntimeOptions::new().stream_slots(n)).unwrap()
}

#[test]
fn runtime_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Runtime>();
}

#[test]
fn double_drop_releases_the_runtime() {
    let _s = serial();
    let d = support::double();
    let streams = d.streams();
    let rt = Runtime::new(0).unwrap();
    assert_eq!(d.refcount(), 1);
    rt.cu_stream().unwrap();
    assert_eq!(d.streams(), streams + 1);
    drop(rt);
    assert_eq!(d.refcount(), 0);
    assert_eq!(d.streams(), streams);
}

#[test]
fn clones_share_identity_state_and_slots() {
    let _s = serial();
    let rt = slots(3);
    let twin = rt.clone();
    assert_eq!(twin.as_raw(), rt.as_raw());
    assert_eq!(twin.identity().unwrap(), rt.identity().unwrap());
    assert_eq!(twin.slot_count().unwrap(), 3);
    assert_eq!(twin.cu_stream().unwrap(), rt.cu_stream().unwrap());
}

#[test]
fn double_a_clone_keeps_the_runtime_alive() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    let twin = rt.try_clone().unwrap();
    drop(rt);
    assert_eq!(d.refcount(), 1);
    twin.sync().unwrap();
    drop(twin);
    assert_eq!(d.refcount(), 0);
}

#[test]
fn into_raw_and_from_raw_move_the_reference() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let id = rt.identity().unwrap();
    let raw = rt.into_raw();
    let back = unsafe { Runtime::from_raw(raw) };
    assert_eq!(back.identity().unwrap(), id);
}

#[test]
fn identity_and_allocation_domain() {
    let _s = serial();
    let a = Runtime::new(0).unwrap();
    let b = Runtime::new(0).unwrap();
    let bound = a.bind_slot(0).unwrap();
    assert_ne!(a.identity().unwrap(), b.identity().unwrap());
    assert_eq!(bound.identity().unwrap(), a.identity().unwrap());
    assert_eq!(bound.allocation_domain().unwrap(), a.allocation_domain().unwrap());
    assert_ne!(a.allocation_domain().unwrap(), b.allocation_domain().unwrap());
    let domain = a.allocation_domain().unwrap();
    assert!(domain != a.identity().unwrap() && domain != b.identity().unwrap());
}

#[test]
fn options_reach_the_library() {
    let _s = serial();
    let opts =
        RuntimeOptions::new().stream_slots(3).cublas_workspace_bytes(0).retirement_capacity(5);
    assert_eq!(opts.as_raw().stream_slots, 3);
    assert_eq!(Runtime::with_options(0, &opts).unwrap().slot_count().unwrap(), 3);
    let defaults = RuntimeOptions::default();
    assert_eq!(defaults.as_raw().stream_slots, tg::sys::TF_DEFAULT_STREAM_SLOTS);
    assert_eq!(
        defaults.as_raw().cublas_workspace_bytes,
        tg::sys::TF_DEFAULT_CUBLAS_WORKSPACE_BYTES
    );
    assert_eq!(Runtime::new(0).unwrap().slot_count().unwrap(), 8);
    let e = Runtime::with_options(0, &RuntimeOptions::new().stream_slots(0)).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("stream_slots 0 is outside 1..256"), "{e}");
    assert_eq!(e.operation(), "tf_runtime_new_with_options");
    assert_eq!(Runtime::new(-1).unwrap_err().operation(), "tf_runtime_new");
    let e = Runtime::with_options(0, &RuntimeOptions::new().retirement_capacity(0)).unwrap_err();
    assert!(e.message().contains("retirement_capacity 0 is outside"), "{e}");
}

#[test]
fn download_options_reach_the_library() {
    let _s = serial();
    let opts = RuntimeOptions::new().download_threads(2).download_chunk_bytes(64 << 10);
    assert_eq!((opts.as_raw().download_threads, opts.as_raw().download_chunk_bytes), (2, 64 << 10));
    let rt = Runtime::with_options(0, &opts).unwrap();
    let data: Vec<u8> = (0..512 * 1024).map(|i| (i % 251) as u8).collect(); // staged in 64 KiB chunks
    let mut buf = rt.alloc::<u8>(data.len()).unwrap();
    buf.upload(&data).unwrap();
    assert_eq!(buf.to_vec().unwrap(), data);
    let e = Runtime::with_options(0, &RuntimeOptions::new().download_threads(65)).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_runtime_new_with_options"));
    assert!(e.message().contains("download_threads"), "{e}");
    let e = Runtime::with_options(0, &RuntimeOptions::new().download_chunk_bytes(4097)).unwrap_err();
    assert!(e.message().contains("download_chunk_bytes"), "{e}");
}

#[test]
fn device_info_matches_the_runtimes_device() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let dev = rt.device_info().unwrap();
    assert_eq!(dev, tg::device_info(0).unwrap());
    assert_eq!(dev, tg::devices().unwrap()[0]);
    assert_eq!(dev.ordinal, 0);
    assert!(!dev.name.is_empty() && dev.total_memory_bytes > 0 && dev.multiprocessor_count > 0);
    assert!(dev.compute_capability >= (7, 0));
    let uuid = dev.uuid_string();
    assert_eq!(uuid.len(), 40);
    assert!(uuid.starts_with("GPU-"));
}

#[test]
fn supports_answers_known_and_unknown_capabilities() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    assert!(rt.supports(Capability::RawStream).unwrap());
    assert!(!rt.supports(Capability::PeerCopy).unwrap());
    assert!(!rt.supports(Capability::Other(1000)).unwrap());
    assert_eq!(Capability::StreamOrderedAlloc.raw(), 7);
}

#[test]
fn the_stream_is_created_once_non_blocking_in_the_primary_context() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let s = rt.cu_stream().unwrap();
    assert!(!s.is_null());
    assert_eq!(rt.cu_stream().unwrap(), s);
    assert_eq!(rt.cu_slot_stream(rt.current_slot().unwrap()).unwrap(), s);
    if support::is_double() {
        let d = support::double();
        assert_eq!(unsafe { (d.stream_flags)(s) }, support::CU_STREAM_NON_BLOCKING);
        assert_eq!(unsafe { (d.stream_context)(s) }, rt.primary_context().unwrap());
        assert_eq!(d.call_count("cuStreamCreate"), 1);
        assert_eq!(rt.primary_context().unwrap(), unsafe { (d.primary_context)(0) });
    }
}

#[test]
fn each_slot_has_its_own_stream() {
    let _s = serial();
    let rt = slots(4);
    let streams: Vec<_> = (0..4).map(|i| rt.cu_slot_stream(i).unwrap()).collect();
    for i in 0..4 {
        for j in 0..i {
            assert_ne!(streams[i], streams[j]);
        }
    }
    let e = rt.cu_slot_stream(4).unwrap_err();
    assert!(e.message().contains("slot 4 is outside 0..3"), "{e}");
}

#[test]
fn threads_get_their_slots_and_their_streams() {
    let _s = serial();
    let rt = Arc::new(slots(64));
    let mut seen = Vec::new();
    for _ in 0..4 {
        // one after the other: consecutive thread numbers
        let rt = rt.clone();
        let (slot, stream) =
            thread::spawn(move || (rt.current_slot().unwrap(), rt.cu_stream().unwrap() as usize))
                .join()
                .unwrap();
        seen.push((slot, stream));
    }
    let first = seen[0].0;
    let steps: Vec<i32> = seen.iter().map(|&(s, _)| (s - first).rem_euclid(64)).collect();
    assert_eq!(steps, vec![0, 1, 2, 3]);
    for &(slot, stream) in &seen {
        assert_eq!(rt.cu_slot_stream(slot).unwrap() as usize, stream);
    }
}

#[test]
fn a_bound_handle_uses_its_slot_from_every_thread() {
    let _s = serial();
    let rt = slots(4);
    let bound = rt.bind_slot(2).unwrap();
    let expected = rt.cu_slot_stream(2).unwrap() as usize;
    let from_thread = thread::scope(|scope| {
        scope
            .spawn(|| (bound.current_slot().unwrap(), bound.cu_stream().unwrap() as usize))
            .join()
            .unwrap()
    });
    assert_eq!(from_thread, (2, expected));
    assert_eq!(bound.current_slot().unwrap(), 2);
    assert_eq!(bound.bind_slot(3).unwrap().current_slot().unwrap(), 3);
    assert_eq!(rt.bind_slot(-1).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn double_sync_reports_a_failed_wait() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    rt.cu_stream().unwrap();
    d.inject("cuStreamSynchronize", 1, support::CUDA_ERROR_UNKNOWN, 1);
    let e = rt.sync().unwrap_err();
    assert_eq!(e.status(), Status::Cuda);
    assert_eq!(
        (e.operation(), e.call(), e.code()),
        ("tf_runtime_sync", "cuStreamSynchronize", 999)
    );
    rt.sync().unwrap();
}

#[test]
fn debug_names_the_handle_and_identity() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let text = format!("{rt:?}");
    assert!(text.contains(&format!("identity: {}", rt.identity().unwrap())), "{text}");
    assert_ne!(rt.as_raw(), ptr::null_mut());
}

// SPDX-License-Identifier: MIT OR Apache-2.0
//! Stream: a bound slot, its CUDA stream, ordering between streams.

use std::thread;

use tenferro_gpu::{Runtime, RuntimeOptions, Status};

use crate::support::{self, serial};

fn slots(n: u32) -> Runtime {
    Runtime::with_options(0, &RuntimeOptions::new().stream_slots(n)).unwrap()
}

#[test]
fn a_stream_is_its_slots_cuda_stream_from_every_thread() {
    let _s = serial();
    let rt = slots(4);
    let stream = rt.stream(2).unwrap();
    let cu = rt.cu_slot_stream(2).unwrap() as usize;
    assert_eq!((stream.slot(), stream.cu_stream().unwrap() as usize), (2, cu));
    let twin = stream.clone();
    let seen = thread::spawn(move || {
        (twin.slot(), twin.runtime().current_slot().unwrap(), twin.cu_stream().unwrap() as usize)
    })
    .join()
    .unwrap();
    assert_eq!(seen, (2, 2, cu));
    assert_eq!(stream.stream_enqueue(|s| s as usize).unwrap(), cu);
    assert_eq!(stream.runtime().identity().unwrap(), rt.identity().unwrap());
    assert_eq!(rt.current_stream().unwrap().slot(), rt.current_slot().unwrap());
    let e = rt.stream(4).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_runtime_bind_slot"));
    assert!(format!("{stream:?}").contains("slot: 2"));
}

#[test]
fn double_a_stream_keeps_the_runtime_alive() {
    let _s = serial();
    let d = support::double();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(1).unwrap();
    drop(rt);
    assert_eq!(d.refcount(), 1);
    stream.sync().unwrap();
    drop(stream);
    assert_eq!(d.refcount(), 0);
}

#[test]
fn wait_for_orders_one_stream_after_another() {
    let _s = serial();
    let rt = slots(2);
    let (a, b) = (rt.stream(0).unwrap(), rt.stream(1).unwrap());
    let data: Vec<u16> = (0..2048).map(|i| i * 3 + 1).collect();
    let src = a.alloc_from(&data).unwrap();
    let mut dst = b.alloc::<u16>(data.len()).unwrap();
    b.sync().unwrap(); // dst's allocation is done: only the upload is pending
    b.wait_for(&a).unwrap(); // b's next work runs after a's upload
    b.copy(&src, &mut dst).unwrap();
    assert_eq!(b.to_vec(&dst).unwrap(), data);
    // Without the wait the copy on b may run before a's upload: it does in
    // the double's deferred mode.
    if support::is_double() {
        let again: Vec<u16> = data.iter().map(|v| v ^ 0x5555).collect();
        let mut src = src;
        a.upload(&again, &mut src).unwrap();
        b.copy(&src, &mut dst).unwrap();
        assert_eq!(b.to_vec(&dst).unwrap(), data, "b copied before a's upload ran");
        a.sync().unwrap();
    }
}

#[test]
fn events_order_streams() {
    let _s = serial();
    let rt = slots(2);
    let (a, b) = (rt.stream(0).unwrap(), rt.stream(1).unwrap());
    let ev = a.event().unwrap();
    let src = a.alloc_from(&[7u8; 64]).unwrap();
    a.record_event(&ev).unwrap();
    b.wait_event(&ev).unwrap();
    let mut dst = b.alloc::<u8>(64).unwrap();
    b.copy(&src, &mut dst).unwrap();
    assert_eq!(dst.to_vec().unwrap(), [7u8; 64]);
    ev.synchronize().unwrap();
}

#[test]
fn wait_for_refuses_a_stream_of_another_runtime() {
    let _s = serial();
    let (one, two) = (Runtime::new(0).unwrap(), Runtime::new(0).unwrap());
    let e = one.stream(0).unwrap().wait_for(&two.stream(1).unwrap()).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "Stream::wait_for"));
}

// SPDX-License-Identifier: MIT OR Apache-2.0
//! Work that moves between OS threads: a Stream keeps it on one CUDA
//! stream (std threads and async tasks alike), a plain Runtime does not;
//! and which types are Send and Sync.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::thread;

use tenferro_gpu::{
    sys, CompileOptions, DeviceBuffer, DeviceSlice, DeviceSliceMut, DeviceUse, Error, Event,
    Function, Graph, HostBuffer, LaunchConfig, MemoryStats, Module, Program, Registered,
    RegisteredSlice, Runtime, RuntimeOptions, Stream, Transfer, Updated,
};

use crate::support::{self, serial};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>(_: &T) {}

#[test]
fn every_handle_and_memory_type_is_send_and_sync() {
    assert_send_sync::<Runtime>();
    assert_send_sync::<Stream>();
    assert_send_sync::<DeviceBuffer<f32>>();
    assert_send_sync::<DeviceBuffer<[u8; 16]>>();
    assert_send_sync::<DeviceSlice<'static, f64>>();
    assert_send_sync::<DeviceSliceMut<'static, i32>>();
    assert_send_sync::<Event>();
    assert_send_sync::<Module>();
    assert_send_sync::<Function>();
    assert_send_sync::<Program>();
    assert_send_sync::<Graph>();
    assert_send_sync::<Updated>();
    assert_send_sync::<MemoryStats>();
    assert_send_sync::<DeviceUse<'static>>();
    assert_send_sync::<HostBuffer<f32>>();
    assert_send_sync::<Registered<u8>>();
    assert_send_sync::<RegisteredSlice<'static, u8>>();
    assert_send_sync::<Transfer<'static, HostBuffer<f64>>>();
    assert_send_sync::<Error>();
    assert_send_sync::<RuntimeOptions>();
    assert_send_sync::<LaunchConfig>();
    assert_send_sync::<CompileOptions>();
    assert_send_sync::<sys::Library>();
}

/// Values device memory does not hold by accident.
fn pattern(n: u32) -> Vec<u32> {
    (0..n).map(|i| 0xa5a5_0000 ^ i.wrapping_mul(2_654_435_761)).collect()
}

/// Runs `f` on a new thread whose slot of `rt` is not `avoid`, and returns
/// that slot and `f`'s result.  Threads are numbered as they first call the
/// library, so consecutive threads get consecutive slots; a thread that
/// lands on `avoid` hands `f` back and the next one is tried.
fn on_a_thread_of_another_slot<F, R>(rt: &Runtime, avoid: i32, mut f: F) -> (i32, R)
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    for _ in 0..64 {
        let outcome = thread::scope(|s| {
            s.spawn(move || {
                let slot = rt.current_slot().unwrap();
                if slot == avoid {
                    Err(f)
                } else {
                    Ok((slot, f()))
                }
            })
            .join()
            .unwrap()
        });
        match outcome {
            Ok(done) => return done,
            Err(back) => f = back,
        }
    }
    panic!("64 threads in a row got slot {avoid}")
}

#[test]
fn a_stream_keeps_its_work_in_order_across_threads() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(3).unwrap();
    let data = pattern(4096);
    // upload on one thread, copy on a second, download on a third: each a
    // different slot's thread, all through the one stream
    let (first, buf) = on_a_thread_of_another_slot(&rt, -1, || stream.alloc_from(&data).unwrap());
    let (second, twin) = on_a_thread_of_another_slot(&rt, first, || {
        let mut twin = stream.alloc::<u32>(buf.len()).unwrap();
        stream.copy(&buf, &mut twin).unwrap();
        twin
    });
    let (_, got) = on_a_thread_of_another_slot(&rt, second, || stream.to_vec(&twin).unwrap());
    assert_eq!(got, data);
}

#[test]
fn double_an_unbound_runtime_loses_an_upload_when_the_download_changes_threads() {
    let _s = serial();
    let _ = support::double(); // deferred execution: a stream runs when made to
    let rt = Runtime::new(0).unwrap();
    let home = rt.stream(0).unwrap();
    let buf = home.alloc::<u32>(4096).unwrap();
    home.sync().unwrap();
    let (address, data) = (buf.as_raw(), pattern(4096));
    let (up, ()) = on_a_thread_of_another_slot(&rt, -1, || rt.upload(&data, address).unwrap());
    let (down, got) = on_a_thread_of_another_slot(&rt, up, || {
        let mut out = vec![0u32; data.len()];
        rt.download(address, &mut out).unwrap();
        out
    });
    assert_ne!(got, data, "slot {down}'s download saw slot {up}'s upload, which nothing ordered");
    // The same two threads' calls through one Stream are ordered.
    let stream = rt.stream(up).unwrap();
    let again = pattern(4096).into_iter().rev().collect::<Vec<_>>();
    let (up, ()) =
        on_a_thread_of_another_slot(&rt, -1, || stream.runtime().upload(&again, address).unwrap());
    let (_, got) = on_a_thread_of_another_slot(&rt, up, || {
        let mut out = vec![0u32; again.len()];
        stream.runtime().download(address, &mut out).unwrap();
        out
    });
    assert_eq!(got, again);
}

/// A future that is pending once, as a task is at an `.await` after which
/// an executor may resume it on another worker thread.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn noop_waker() -> Waker {
    fn clone(_: *const ()) -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions ignore the (null) data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

type Task<T> = Pin<Box<dyn Future<Output = T> + Send>>;

fn poll_once<T>(task: &mut Task<T>) -> Poll<T> {
    let waker = noop_waker();
    task.as_mut().poll(&mut Context::from_waker(&waker))
}

/// What a work-stealing executor may do: poll `task` on one thread up to
/// its `.await`, then resume it to the end on another thread (one of
/// another slot of `rt`).  Returns both threads' slots and the output.
fn run_on_two_threads<T: Send>(rt: &Runtime, mut task: Task<T>) -> (i32, i32, T) {
    let (first, mut task) = on_a_thread_of_another_slot(rt, -1, move || {
        assert!(poll_once(&mut task).is_pending(), "the task ended before its .await");
        task
    });
    let (second, output) =
        on_a_thread_of_another_slot(rt, first, move || match poll_once(&mut task) {
            Poll::Ready(output) => output,
            Poll::Pending => panic!("the task did not end after its .await"),
        });
    (first, second, output)
}

#[test]
fn an_async_task_holding_a_stream_keeps_its_work_on_it_when_resumed_elsewhere() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(5).unwrap();
    let data = pattern(1000);
    let expected = data.clone();
    let task = async move {
        let buf = stream.alloc_from(&data).unwrap(); // queued, not waited for
        YieldOnce(false).await; // resumed on a thread of another slot
        stream.to_vec(&buf).unwrap()
    };
    assert_send(&task);
    let (first, second, got) = run_on_two_threads(&rt, Box::pin(task));
    assert_ne!(first, second);
    assert_eq!(got, expected);
}

#[test]
fn double_an_async_task_on_a_plain_runtime_changes_slots_when_it_moves() {
    let _s = serial();
    let _ = support::double();
    let rt = Runtime::new(0).unwrap();
    let home = rt.stream(0).unwrap();
    let buf = home.alloc::<u32>(1000).unwrap();
    home.sync().unwrap();
    let (address, data) = (buf.as_raw(), pattern(1000));
    let (task_rt, sent) = (rt.clone(), data.clone());
    let task = async move {
        task_rt.upload(&sent, address).unwrap(); // the first thread's slot
        YieldOnce(false).await;
        let mut out = vec![0u32; sent.len()];
        task_rt.download(address, &mut out).unwrap(); // the second thread's slot
        out
    };
    let (first, second, got) = run_on_two_threads(&rt, Box::pin(task));
    assert_ne!(got, data, "the download on slot {second} saw the upload queued on slot {first}");
    rt.stream(first).unwrap().sync().unwrap();
}

// SPDX-License-Identifier: MIT OR Apache-2.0
//! Graph capture: captured work runs at each launch, refused calls leave
//! the capture intact, a failing or panicking closure aborts it, update in
//! place or anew, graphs across threads, failed driver calls.  The kernel
//! is real CUDA C++ (the double runs its built-in of the same name), so
//! every test not named double_* also runs on a GPU.

use std::panic::{self, AssertUnwindSafe};
use std::thread;

use tenferro_gpu::{
    cublas::Gemm, Capability, CompileOptions, DeviceBuffer, Function, LaunchConfig, Runtime,
    Status, Stream, Updated,
};

use crate::support::{self, panic_text, quietly, serial, CUDA_ERROR_UNKNOWN};

const N: usize = 1000;

/// The add kernel (out = x + y), or None without NVRTC.
fn adder(rt: &Runtime) -> Option<Function> {
    if !rt.supports(Capability::RuntimeCompilation).unwrap() {
        eprintln!("NVRTC cannot be loaded here (add it to LD_LIBRARY_PATH); test skipped");
        return None;
    }
    let program = rt.compile(support::ADD_SOURCE, &CompileOptions::new()).unwrap();
    Some(rt.load_module(program.image().unwrap()).unwrap().function("tfd_add_f32").unwrap())
}

/// Queues out = x + y on `s`.
fn add(
    s: &Stream,
    f: &Function,
    x: &DeviceBuffer<f32>,
    y: &DeviceBuffer<f32>,
    out: &DeviceBuffer<f32>,
) -> tenferro_gpu::Result<()> {
    let n = out.len() as u32;
    // SAFETY: (const float *, const float *, float *, unsigned) of n values.
    unsafe { s.launch(f, &LaunchConfig::linear(n, 256), &[x, y, out, &n]) }
}

/// n values from `base` in steps of a quarter (sums of two are exact).
fn floats(n: usize, base: f32) -> Vec<f32> {
    (0..n).map(|i| base + i as f32 * 0.25).collect()
}

fn sum(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// A runtime, its stream 0, the add kernel, and x, y, out (zeros) on it.
struct Setup {
    rt: Runtime,
    s: Stream,
    add: Function,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    out: DeviceBuffer<f32>,
}

fn setup() -> Option<Setup> {
    let rt = Runtime::new(0).unwrap();
    let add = adder(&rt)?;
    let s = rt.stream(0).unwrap();
    let x = s.alloc_from(&floats(N, 1.0)).unwrap();
    let y = s.alloc_from(&floats(N, 0.5)).unwrap();
    let out = s.alloc_from(&vec![0f32; N]).unwrap();
    Some(Setup { rt, s, add, x, y, out })
}

fn assert_refused(e: tenferro_gpu::Error, operation: &str) {
    assert_eq!((e.status(), e.operation()), (Status::RuntimeState, operation), "{e}");
    assert!(e.message().contains("capturing a graph"), "{e}");
}

#[test]
fn captured_work_runs_at_each_launch_and_only_then() {
    let _s = serial();
    let Some(Setup { rt, s, add: f, mut x, y, out }) = setup() else { return };
    let mut copy = s.alloc_from(&vec![0f32; N]).unwrap();
    let graph = s
        .capture(|c| {
            add(c, &f, &x, &y, &out)?;
            c.copy(&out, &mut copy)
        })
        .unwrap();
    assert_eq!(s.to_vec(&copy).unwrap(), vec![0.0; N], "captured, not run");
    graph.launch(&s).unwrap();
    assert_eq!(s.to_vec(&copy).unwrap(), sum(&floats(N, 1.0), &floats(N, 0.5)));
    // Each launch runs the work on what the memory holds then.
    x.upload(&floats(N, -3.0)).unwrap();
    graph.launch(&s).unwrap();
    assert_eq!(s.to_vec(&copy).unwrap(), sum(&floats(N, -3.0), &floats(N, 0.5)));
    // On another slot, ordered with waits; and on a plain runtime's slot.
    let other = rt.stream(1).unwrap();
    x.upload(&floats(N, 7.0)).unwrap();
    other.wait_for(&s).unwrap();
    graph.launch(&other).unwrap();
    s.wait_for(&other).unwrap();
    assert_eq!(s.to_vec(&copy).unwrap(), sum(&floats(N, 7.0), &floats(N, 0.5)));
    x.upload(&floats(N, 2.0)).unwrap();
    s.sync().unwrap();
    graph.launch(&rt).unwrap();
    rt.sync().unwrap();
    assert_eq!(s.to_vec(&copy).unwrap(), sum(&floats(N, 2.0), &floats(N, 0.5)));
    assert!(format!("{graph:?}").starts_with("Graph"));
}

#[test]
fn a_buffer_allocated_and_dropped_inside_is_the_graphs_temporary() {
    let _s = serial();
    let Some(Setup { rt: _rt, s, add: f, mut x, y, mut out }) = setup() else { return };
    let graph = s
        .capture(|c| {
            let tmp = c.alloc::<f32>(N)?; // an allocation node
            add(c, &f, &x, &y, &tmp)?;
            c.copy(&tmp, &mut out) // tmp's drop: the free node
        })
        .unwrap();
    graph.launch(&s).unwrap();
    assert_eq!(s.to_vec(&out).unwrap(), sum(&floats(N, 1.0), &floats(N, 0.5)));
    x.upload(&floats(N, 4.0)).unwrap();
    graph.launch(&s).unwrap(); // allocated and freed again
    assert_eq!(s.to_vec(&out).unwrap(), sum(&floats(N, 4.0), &floats(N, 0.5)));
    // One still alive at the closure's end: the capture fails, nothing kept.
    let mut kept = None;
    let e = s
        .capture(|c| {
            kept = Some(c.alloc::<u8>(64)?);
            Ok(())
        })
        .unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::RuntimeState, "tf_graph_capture_end"), "{e}");
    assert!(e.message().contains("not freed in it"), "{e}");
    drop(kept); // its free is refused and ignored
    assert_eq!(s.to_vec(&out).unwrap().len(), N); // the slot works as before
}

#[test]
fn captured_work_is_byte_exact_against_uncaptured() {
    let _s = serial();
    let Some(Setup { s, add: f, .. }) = setup() else { return };
    let (m, n, k) = (33, 17, 45);
    let bits = |i: usize| f32::from_bits(0x3c00_0000 ^ (i as u32).wrapping_mul(2_654_435_761) >> 9);
    let a: Vec<f32> = (0..m * k).map(|i| bits(i) - 0.7).collect();
    let b: Vec<f32> = (0..k * n).map(|i| bits(i + 7) * 3.0).collect();
    let (da, db) = (s.alloc_from(&a).unwrap(), s.alloc_from(&b).unwrap());
    // C = A B, then D = C + C, then E = D (copied): through cuBLAS, a
    // kernel and the copy engine.
    let body = |c: &Stream, out: &mut [DeviceBuffer<f32>; 3]| -> tenferro_gpu::Result<()> {
        c.gemm(&Gemm::new(m, n, k), 1.0f32, &da, &db, 0.0, &mut out[0])?;
        add(c, &f, &out[0], &out[0], &out[1])?;
        let (head, tail) = out.split_at_mut(2);
        c.copy(&head[1], &mut tail[0])
    };
    let fresh = || [(); 3].map(|()| s.alloc_from(&vec![0f32; m * n]).unwrap());
    let mut plain = fresh();
    body(&s, &mut plain).unwrap();
    let mut captured = fresh();
    let graph = s.capture(|c| body(c, &mut captured)).unwrap();
    for _ in 0..2 {
        graph.launch(&s).unwrap();
        for (p, c) in plain.iter().zip(&captured) {
            let (p, c) = (s.to_vec(p).unwrap(), s.to_vec(c).unwrap());
            assert_eq!(
                p.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            assert!(p.iter().any(|&v| v != 0.0));
        }
    }
}

#[test]
fn calls_that_wait_are_refused_inside_a_capture_which_goes_on() {
    let _s = serial();
    let Some(Setup { rt, s, add: f, x, y, out }) = setup() else { return };
    let mut copy = s.alloc_from(&vec![0f32; N]).unwrap();
    let mut scratch = s.alloc::<f32>(4).unwrap();
    let earlier = s.capture(|c| add(c, &f, &x, &y, &out)).unwrap();
    let other = rt.stream(1).unwrap();
    let elsewhere = other.alloc_from(&[5u32; 4]).unwrap();
    let graph = s
        .capture(|c| {
            add(c, &f, &x, &y, &out)?;
            assert_refused(c.sync().unwrap_err(), "tf_runtime_sync");
            assert_refused(c.to_vec(&out).unwrap_err(), "tf_download");
            assert_refused(c.download_scalar(&out.slice(0..1)).unwrap_err(), "tf_download_scalar");
            assert_refused(c.upload(&[1f32; 4], &mut scratch).unwrap_err(), "tf_upload");
            assert_refused(c.runtime().poll_retirements().unwrap_err(), "tf_workspace_poll");
            assert_refused(earlier.launch(c).unwrap_err(), "tf_graph_launch");
            let nested = c.capture(|_| panic!("a second capture of the slot never begins"));
            assert_eq!(nested.unwrap_err().operation(), "tf_graph_capture_begin");
            // The crate's own asynchronous copies: their Transfer would give
            // the memory back before the launches use it.
            let host = rt.host_alloc::<f32>(N).unwrap();
            assert_refused(c.download_async(&out, host).unwrap_err(), "Stream::download_async");
            let host = rt.host_alloc::<f32>(4).unwrap();
            let e = c.upload_async(host, &mut scratch).unwrap_err();
            assert_refused(e, "Stream::upload_async");
            // Other slots work as usual.
            other.sync().unwrap();
            assert_eq!(other.to_vec(&elsewhere).unwrap(), [5; 4]);
            c.copy(&out, &mut copy) // captured after the refusals
        })
        .unwrap();
    graph.launch(&s).unwrap();
    assert_eq!(s.to_vec(&copy).unwrap(), sum(&floats(N, 1.0), &floats(N, 0.5)));
}

#[test]
fn a_failing_or_panicking_closure_aborts_the_capture_and_the_slot_works_afterwards() {
    let _s = serial();
    let Some(Setup { rt, s, add: f, x, y, out }) = setup() else { return };
    let graphs = support::is_double().then(|| support::double().count(support::TFD_GRAPHS));
    let caught = quietly(|| {
        panic::catch_unwind(AssertUnwindSafe(|| {
            s.capture(|c| {
                add(c, &f, &x, &y, &out)?;
                panic!("inside the capture")
            })
        }))
    });
    assert_eq!(panic_text(&caught.unwrap_err()), "inside the capture");
    s.sync().unwrap();
    assert_eq!(s.to_vec(&out).unwrap(), vec![0.0; N], "the aborted work never ran");
    // The closure's own error comes back as it is, the capture aborted.
    let e = s
        .capture(|c| {
            add(c, &f, &x, &y, &out)?;
            c.sync()
        })
        .unwrap_err();
    assert_refused(e, "tf_runtime_sync");
    if let Some(graphs) = graphs {
        let d = support::double();
        assert_eq!(unsafe { (d.capture_nodes)(s.cu_stream().unwrap()) }, 0);
        assert_eq!(d.count(support::TFD_GRAPHS), graphs, "an aborted capture keeps no graph");
    }
    // The slot captures again, and copies asynchronously again.
    let graph = s.capture(|c| add(c, &f, &x, &y, &out)).unwrap();
    graph.launch(&s).unwrap();
    let host = s.download_async(&out, rt.host_alloc::<f32>(N).unwrap()).unwrap().wait().unwrap();
    assert_eq!(host[..], sum(&floats(N, 1.0), &floats(N, 0.5))[..]);
}

#[test]
fn an_update_is_in_place_for_the_same_shape_and_anew_for_another() {
    let _s = serial();
    let Some(Setup { rt, s, add: f, x, y, out }) = setup() else { return };
    let x2 = s.alloc_from(&floats(N, 10.0)).unwrap();
    let out2 = s.alloc_from(&vec![0f32; N]).unwrap();
    let mut copy = s.alloc_from(&vec![0f32; N]).unwrap();
    let graph = s.capture(|c| add(c, &f, &x, &y, &out)).unwrap();
    let twin = graph.clone();
    let how = s.capture_into(&graph, |c| add(c, &f, &x2, &y, &out2)).unwrap();
    assert_eq!(how, Updated::InPlace);
    twin.launch(&s).unwrap(); // every clone runs the new work
    assert_eq!(s.to_vec(&out2).unwrap(), sum(&floats(N, 10.0), &floats(N, 0.5)));
    assert_eq!(s.to_vec(&out).unwrap(), vec![0.0; N], "the earlier work is gone");
    let how = s
        .capture_into(&graph, |c| {
            add(c, &f, &x, &y, &out)?;
            c.copy(&out, &mut copy)
        })
        .unwrap();
    assert_eq!(how, Updated::Reinstantiated);
    graph.launch(&s).unwrap();
    assert_eq!(s.to_vec(&copy).unwrap(), sum(&floats(N, 1.0), &floats(N, 0.5)));
    // Another runtime's graph: refused, the slot no longer captures, and
    // neither graph changed.
    let other_rt = Runtime::new(0).unwrap();
    let os = other_rt.stream(0).unwrap();
    let (a, mut b) = (os.alloc_from(&[3u8; 8]).unwrap(), os.alloc_from(&[0u8; 8]).unwrap());
    let foreign = os.capture(|c| c.copy(&a, &mut b)).unwrap();
    let e = s.capture_into(&foreign, |c| add(c, &f, &x, &y, &out)).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_graph_capture_update"));
    s.sync().unwrap();
    let e = foreign.launch(&s).unwrap_err();
    assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "tf_graph_launch"));
    foreign.launch(&os).unwrap();
    assert_eq!(os.to_vec(&b).unwrap(), [3; 8]);
    drop(rt);
}

#[test]
fn graphs_launch_and_release_on_any_thread() {
    let _s = serial();
    let Some(Setup { rt, s, add: f, x, y, out }) = setup() else { return };
    let execs = support::is_double().then(|| support::double().count(support::TFD_GRAPH_EXECS));
    let graph = s.capture(|c| add(c, &f, &x, &y, &out)).unwrap();
    s.sync().unwrap(); // x and y are uploaded: other slots may use them
    let want = sum(&floats(N, 1.0), &floats(N, 0.5));
    thread::scope(|scope| {
        for slot in 1..4 {
            let (clone, stream, out, want) = (graph.clone(), rt.stream(slot).unwrap(), &out, &want);
            scope.spawn(move || {
                clone.launch(&stream).unwrap();
                assert_eq!(&stream.to_vec(out).unwrap(), want);
                drop(clone); // released here, the others still hold it
            });
        }
    });
    let moved = graph.clone();
    let stream = rt.stream(4).unwrap();
    thread::spawn(move || moved.launch(&stream).and_then(|()| stream.sync()))
        .join()
        .unwrap()
        .unwrap();
    if let Some(execs) = execs {
        assert_eq!(support::double().count(support::TFD_GRAPH_EXECS), execs + 1);
        drop(graph); // the last reference
        assert_eq!(support::double().count(support::TFD_GRAPH_EXECS), execs);
    }
}

#[test]
fn double_failed_capture_calls_leave_nothing_behind_and_the_slot_usable() {
    let _s = serial();
    let d = support::double();
    let Some(Setup { rt, s, add: f, x, y, out }) = setup() else { return };
    let graphs = (d.count(support::TFD_GRAPHS), d.count(support::TFD_GRAPH_EXECS));
    let works = |what: &str| {
        s.sync().unwrap_or_else(|e| panic!("after {what}: {e}"));
        let host = rt.host_alloc::<f32>(4).unwrap();
        s.download_async(&out.slice(..4), host).unwrap().wait().unwrap();
        assert_eq!(unsafe { (d.capture_nodes)(s.cu_stream().unwrap()) }, 0, "{what}");
        assert_eq!((d.count(support::TFD_GRAPHS), d.count(support::TFD_GRAPH_EXECS)), graphs);
    };
    d.inject("cuStreamBeginCapture", 1, CUDA_ERROR_UNKNOWN, 1);
    let e = s.capture(|_| panic!("the closure of a capture that never began")).unwrap_err();
    assert_eq!((e.operation(), e.call()), ("tf_graph_capture_begin", "cuStreamBeginCapture"));
    works("a failed begin");
    d.inject("cuGraphInstantiateWithFlags", 1, CUDA_ERROR_UNKNOWN, 1);
    let e = s.capture(|c| add(c, &f, &x, &y, &out)).unwrap_err();
    assert_eq!((e.status(), e.call()), (Status::Cuda, "cuGraphInstantiateWithFlags"));
    works("a failed instantiation");
    // The end refused without ending: the crate aborts what is still open.
    d.inject("cuStreamEndCapture", 1, CUDA_ERROR_UNKNOWN, 1);
    let e = s.capture(|c| add(c, &f, &x, &y, &out)).unwrap_err();
    assert_eq!((e.operation(), e.call()), ("tf_graph_capture_end", "cuStreamEndCapture"));
    assert!(e.message().contains("still open"), "{e}");
    works("an end that left the capture open");
    // An update the driver refuses: instantiated anew, the same handle.
    let graph = s.capture(|c| add(c, &f, &x, &y, &out)).unwrap();
    d.inject("cuGraphExecUpdate", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_eq!(s.capture_into(&graph, |c| add(c, &f, &y, &x, &out)), Ok(Updated::Reinstantiated));
    graph.launch(&s).unwrap();
    assert_eq!(s.to_vec(&out).unwrap(), sum(&floats(N, 0.5), &floats(N, 1.0)));
    drop(graph);
    works("an update that was instantiated anew");
}

/// A capture whose end and both aborts fail stays open: what it can and
/// cannot do.
#[test]
fn double_a_capture_that_cannot_be_aborted_only_refuses_and_leaks_until_teardown() {
    let _s = serial();
    let d = support::double();
    let Some(Setup { rt, s, add: f, x, y, out }) = setup() else { return };
    let warnings = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = warnings.clone();
    tenferro_gpu::set_log_callback(move |_, m| log.lock().unwrap().push(m.to_string())).unwrap();
    let spare = s.alloc_from(&[1u8; 64]).unwrap();
    let allocations = d.count(support::TFD_DEVICE_ALLOCS);
    d.inject("cuStreamEndCapture", 1, CUDA_ERROR_UNKNOWN, 3); // the end, two aborts
    let e = s.capture(|c| add(c, &f, &x, &y, &out)).unwrap_err();
    assert!(e.message().contains("still open"), "{e}");
    assert_refused(s.sync().unwrap_err(), "tf_runtime_sync");
    let host = rt.host_alloc::<f32>(N).unwrap();
    assert_refused(s.download_async(&out, host).unwrap_err(), "Stream::download_async");
    drop(spare); // its free is refused: leaked, never freed twice
    assert_eq!(d.count(support::TFD_DEVICE_ALLOCS), allocations);
    rt.stream(1).unwrap().sync().unwrap(); // other slots are unaffected
    drop((x, y, out, f, s, rt)); // the teardown drops the capture
    assert_eq!(d.refcount(), 0);
    let seen = warnings.lock().unwrap().join("\n");
    assert!(seen.contains("still capturing a graph; the capture is discarded"), "{seen}");
}

/// A capture that begins while another thread queues asynchronous copies
/// on the same slot never captures one (capture_gate.rs): each copy is
/// refused, or runs now and hands back memory holding the device's data.
#[test]
fn double_a_capture_beginning_beside_asynchronous_copies_never_captures_one() {
    let _s = serial();
    let _ = support::double();
    let rt = Runtime::new(0).unwrap();
    let s = rt.stream(0).unwrap();
    let buf = s.alloc_from(&[0x77u32; 64]).unwrap();
    s.sync().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut refused, mut copied) = (0u32, 0u32);
    thread::scope(|scope| {
        let capturing = scope.spawn(|| {
            let started = std::time::Instant::now();
            while started.elapsed() < std::time::Duration::from_millis(300) {
                drop(s.capture(|_| Ok(())).unwrap());
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut host = rt.host_alloc::<u32>(64).unwrap();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            host.fill(0);
            match s.download_async(&buf, host) {
                Err(e) => {
                    assert_refused(e, "Stream::download_async");
                    refused += 1;
                    host = rt.host_alloc::<u32>(64).unwrap();
                }
                Ok(transfer) => {
                    host = transfer.wait().expect("a copy's event went into a capture");
                    assert!(host.iter().all(|&v| v == 0x77), "a captured copy came back unrun");
                    copied += 1;
                }
            }
        }
        capturing.join().unwrap();
    });
    eprintln!("{copied} copies ran, {refused} were refused during captures");
    assert!(copied > 0 && refused > 0, "{copied} copies, {refused} refused");
}

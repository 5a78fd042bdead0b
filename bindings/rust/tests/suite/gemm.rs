// SPDX-License-Identifier: MIT OR Apache-2.0
//! SGEMM and DGEMM through the library's own cuBLAS against a CPU
//! reference; the same checks run against the cuBLAS double and on a GPU.

use tenferro_gpu::cublas::{Gemm, GemmScalar, Op};
use tenferro_gpu::{CodeDomain, DeviceBuffer, Runtime, Status, Stream};

use crate::support::{self, serial};

const SHAPES: [(usize, usize, usize); 5] = [(1, 1, 1), (3, 4, 5), (17, 9, 33), (64, 128, 32), (127, 65, 200)];

/// A small deterministic generator (xorshift) of values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// Row-major C = A B in f64.
fn reference(a: &[f64], b: &[f64], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

fn device<T: GemmScalar>(stream: &Stream, host: &[T]) -> DeviceBuffer<T> {
    stream.alloc_from(host).unwrap()
}

fn check_matmul<T: GemmScalar + From<u8> + Into<f64>>(cast: fn(f64) -> T, tolerance: f64) {
    let rt = Runtime::new(0).unwrap();
    let stream = rt.stream(0).unwrap();
    for (m, n, k) in SHAPES {
        let a: Vec<T> = values(m * k, (m * 31 + k) as u64).into_iter().map(cast).collect();
        let b: Vec<T> = values(k * n, (n * 17 + k) as u64).into_iter().map(cast).collect();
        let (da, db) = (device(&stream, &a), device(&stream, &b));
        let mut dc = stream.alloc::<T>(m * n).unwrap();
        stream.matmul(&da, &db, &mut dc, m, n, k).unwrap();
        let got = dc.to_vec().unwrap();
        let a64: Vec<f64> = a.into_iter().map(Into::into).collect();
        let b64: Vec<f64> = b.into_iter().map(Into::into).collect();
        let want = reference(&a64, &b64, m, n, k);
        for (g, w) in got.into_iter().zip(want) {
            let g: f64 = g.into();
            assert!((g - w).abs() <= tolerance * (k as f64).sqrt() * (1.0 + w.abs()), "{m}x{n}x{k}: {g} vs {w}");
        }
    }
}

#[test]
fn sgemm_matmul_equals_the_cpu_reference() {
    let _s = serial();
    check_matmul::<f32>(|v| v as f32, 1e-5);
}

#[test]
fn dgemm_matmul_equals_the_cpu_reference() {
    let _s = serial();
    check_matmul::<f64>(|v| v, 1e-13);
}

#[test]
fn column_major_gemm_with_transposes_alpha_beta_and_padding() {
    let _s = serial();
    let stream = Runtime::new(0).unwrap().stream(1).unwrap();
    let (m, n, k, pad) = (5usize, 7usize, 3usize, 2usize);
    for (ta, tb) in [(Op::N, Op::N), (Op::T, Op::N), (Op::N, Op::T), (Op::T, Op::T)] {
        let (ar, ac) = if ta == Op::T { (k, m) } else { (m, k) };
        let (br, bc) = if tb == Op::T { (n, k) } else { (k, n) };
        let lda = ar + pad;
        let a = values(lda * ac, 3);
        let b = values(br * bc, 5);
        let c0 = values(m * n, 7);
        let (da, db) = (device(&stream, &a), device(&stream, &b));
        let mut dc = device(&stream, &c0);
        let shape = Gemm::new(m, n, k).trans(ta, tb).leading(lda, br, m);
        stream.gemm(&shape, 2.0, &da, &db, 0.5, &mut dc).unwrap();
        let got = dc.to_vec().unwrap();
        let at = |i: usize, p: usize| if ta == Op::T { a[i * lda + p] } else { a[p * lda + i] };
        let bt = |p: usize, j: usize| if tb == Op::T { b[p * br + j] } else { b[j * br + p] };
        for i in 0..m {
            for j in 0..n {
                let w = 2.0 * (0..k).map(|p| at(i, p) * bt(p, j)).sum::<f64>() + 0.5 * c0[j * m + i];
                assert!((got[j * m + i] - w).abs() < 1e-12, "{ta:?}{tb:?} ({i},{j})");
            }
        }
    }
}

#[test]
fn gemm_works_on_views_of_larger_buffers() {
    let _s = serial();
    let stream = Runtime::new(0).unwrap().stream(0).unwrap();
    // A and B side by side in one buffer, C in the middle of another.
    let ab = device(&stream, &[1.0f64, 2.0, 3.0, 4.0, /* B: */ 5.0, 6.0, 7.0, 8.0]);
    let mut c = device(&stream, &[-1.0f64; 8]);
    let (a, b) = (ab.slice(..4), ab.slice(4..));
    stream.matmul(&a, &b, &mut c.slice_mut(2..6), 2, 2, 2).unwrap();
    // row-major [1 2; 3 4] [5 6; 7 8] = [19 22; 43 50]
    assert_eq!(c.to_vec().unwrap(), [-1.0, -1.0, 19.0, 22.0, 43.0, 50.0, -1.0, -1.0]);
}

#[test]
fn shapes_are_checked_before_cublas_is_called() {
    let _s = serial();
    let rt = Runtime::new(0).unwrap();
    let small = rt.alloc::<f32>(6).unwrap();
    let big = rt.alloc::<f32>(100).unwrap();
    let mut out = rt.alloc::<f32>(100).unwrap();
    let calls = if support::is_double() { support::double().call_count("cublasSgemm_v2") } else { 0 };
    let e = rt.matmul(&small, &big, &mut out, 3, 3, 3).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("needs 9 values; the buffer has 6"), "{e}");
    let e = rt.gemm(&Gemm::new(2, 2, 2).leading(1, 2, 2), 1.0, &big, &big, 0.0, &mut out).unwrap_err();
    assert!(e.message().contains("leading dimension 1 is below its 2 rows"), "{e}");
    if support::is_double() {
        assert_eq!(support::double().call_count("cublasSgemm_v2"), calls);
    }
}

#[test]
fn double_a_refused_gemm_is_a_provider_error() {
    let _s = serial();
    let d = support::double();
    let stream = Runtime::new(0).unwrap().stream(0).unwrap();
    let buf = stream.alloc::<f32>(16).unwrap();
    let mut c = stream.alloc::<f32>(16).unwrap();
    d.inject("cublasSgemm_v2", 1, 13, 1);
    let e = stream.gemm(&Gemm::new(2, 2, 2), 1.0f32, &buf, &buf, 0.0, &mut c).unwrap_err();
    assert_eq!((e.status(), e.code(), e.code_domain()), (Status::Provider, 13, CodeDomain::Cublas));
}

#[test]
fn a_shape_whose_extent_overflows_is_an_invalid_argument() {
    let _s = serial();
    let stream = Runtime::new(0).unwrap().stream(0).unwrap();
    let (a, b) = (stream.alloc::<f32>(3).unwrap(), stream.alloc::<f32>(3).unwrap());
    let mut c = stream.alloc::<f32>(1).unwrap();
    let big = usize::MAX;
    // Each operand's extent (cols - 1) * ld + rows, in both of its products.
    let shapes = [
        (Gemm::new(1, 1, 3).leading(big, 3, 1), "a: a 1x3 matrix"),
        (Gemm::new(3, 1, 1).trans(Op::T, Op::N).leading(big, 1, 3), "a: a 1x3 matrix"),
        (Gemm::new(1, 3, 1).leading(1, big, 1), "b: a 1x3 matrix"),
        (Gemm::new(1, 1, 3).trans(Op::N, Op::T).leading(1, big, 1), "b: a 1x3 matrix"),
        (Gemm::new(1, 3, 1).leading(1, 1, big), "c: a 1x3 matrix"),
        (Gemm::new(2, 2, 0).leading(2, 1, big - 1), "c: a 2x2 matrix"), // the sum overflows
    ];
    for (shape, what) in shapes {
        let e = stream.gemm(&shape, 1.0, &a, &b, 0.0, &mut c).unwrap_err();
        assert_eq!((e.status(), e.operation()), (Status::InvalidArgument, "Runtime::gemm"), "{e}");
        assert!(e.message().contains(what), "{what}: {e}");
    }
}

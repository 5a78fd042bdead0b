// SPDX-License-Identifier: MIT OR Apache-2.0
//! The crate's tests: against the CUDA driver double in `make check`
//! (TF_TEST_MODE=double), against a real GPU with
//! `--skip double_ --skip source_` (mk/bindings-rust.mk has the command).

mod support;

mod absent;
mod context;
mod errors;
mod failed_copies;
mod gemm;
mod graph;
mod host;
mod kernels;
mod log;
mod memory;
mod memory_pool;
mod old_library;
mod registration;
mod runtime;
mod source;
mod stream_work;
mod streams;
mod threads;

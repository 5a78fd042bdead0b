//! The crate's tests: against the CUDA driver double in `make check`
//! (TF_TEST_MODE=double), against a real GPU with `--skip double_`.

mod support;

mod context;
mod errors;
mod log;
mod runtime;
mod source;

// SPDX-License-Identifier: MIT OR Apache-2.0
//! A program built with this crate runs on a libtenferro_gpu of 1.1, which
//! lacks the graph and memory pool functions of 1.2 (feature
//! `dynamic-loading`): each call that needs one returns NotSupported
//! naming it and "1.2", everything else goes on.  The library is a stand-in
//! built here with the system's C compiler: version 1.1.0, every function
//! of 1.0 and 1.1 (from `sys::Library::SINCE`) doing nothing and
//! succeeding, none of 1.2.  The parent test runs this test binary again as
//! a child with `TENFERRO_GPU_LIBRARY` naming it.

#![cfg(not(feature = "linked"))]

use std::fs;
use std::process::Command;

use tenferro_gpu::{self as tg, sys, Runtime, Status};

use crate::support::run_child;

const CHILD: &str = "old_library::child_on_a_1_1_library";

/// Definitions the stand-in needs beyond "return 0": values callers read.
fn special(name: &str) -> Option<&'static str> {
    Some(match name {
        "tf_version" => "unsigned tf_version(void) { return 10100; }",
        "tf_version_string" => "const char *tf_version_string(void) { return \"1.1.0\"; }",
        "tf_status_string" => "const char *tf_status_string(int s) { (void)s; return \"stand-in\"; }",
        "tf_runtime_new" => "int tf_runtime_new(int o, int **out) { (void)o; *out = &objects[0]; return 0; }",
        "tf_runtime_new_with_options" => {
            "int tf_runtime_new_with_options(int o, const void *x, int **out) \
             { (void)o; (void)x; *out = &objects[0]; return 0; }"
        }
        // Another object per slot, whose number it is.
        "tf_runtime_bind_slot" => {
            "int tf_runtime_bind_slot(int *rt, int slot, int **out) \
             { (void)rt; *out = &objects[slot & 15]; return 0; }"
        }
        "tf_runtime_current_slot" => {
            "int tf_runtime_current_slot(const int *rt, int *out) \
             { *out = (int)(rt - objects); return 0; }"
        }
        "tf_event_new" => "int tf_event_new(void *rt, int **out) { (void)rt; *out = &objects[0]; return 0; }",
        "tf_alloc" => {
            "int tf_alloc(void *rt, size_t n, uint64_t *out) { (void)rt; *out = n ? 4096 : 0; return 0; }"
        }
        "tf_host_alloc" => {
            "int tf_host_alloc(void *rt, size_t n, void **out) \
             { (void)rt; *out = aligned_alloc(4096, (n + 4095) / 4096 * 4096); return *out ? 0 : 13; }"
        }
        _ => return None,
    })
}

/// The stand-in's C source: the functions before 1.2, none of 1.2.
fn source() -> String {
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\
         static int objects[16];\n",
    );
    for (name, since) in sys::Library::NAMES.iter().zip(sys::Library::SINCE) {
        if *since == Some("1.2") {
            continue;
        }
        let line = match special(name) {
            Some(definition) => definition.to_string(),
            None if name.ends_with("_init") => format!(
                "void {name}(void *p, size_t n) {{ if (p && n >= 4) {{ memset(p, 0, n); *(uint32_t *)p = (uint32_t)n; }} }}"
            ),
            None => format!("int {name}(void) {{ return 0; }}"),
        };
        src += &line;
        src.push('\n');
    }
    src
}

#[test]
fn a_library_older_than_1_2_refuses_only_the_new_calls() {
    let dir = std::env::temp_dir().join(format!("tenferro-gpu-1.1-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let (c, lib) = (dir.join("stand_in.c"), dir.join("libtenferro_gpu.so.1"));
    fs::write(&c, source()).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let built = Command::new(&cc).args(["-shared", "-fPIC", "-o"]).arg(&lib).arg(&c).output();
    let built = match built {
        Ok(out) if out.status.success() => true,
        Ok(out) => panic!("{cc} failed on the stand-in:\n{}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => {
            eprintln!("no C compiler ({cc}: {e}): test skipped");
            false
        }
    };
    if built {
        let args = ["--exact", CHILD, "--ignored", "--nocapture", "--test-threads=1"];
        let (status, text) = run_child(&args, |c| {
            c.env(sys::LIBRARY_PATH_VARIABLE, &lib);
        });
        assert_eq!(status.code(), Some(0), "{text}");
        assert!(text.contains("1 passed"), "{text}");
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "a child of a_library_older_than_1_2_refuses_only_the_new_calls"]
fn child_on_a_1_1_library() {
    assert_eq!(tg::version().unwrap(), (1, 1, 0));
    let rt = Runtime::new(0).unwrap();
    let (s0, s1) = (rt.stream(0).unwrap(), rt.stream(1).unwrap());
    let mut buf = s0.alloc::<u8>(64).unwrap();
    let closure_ran = std::cell::Cell::new(false);
    let refused = [
        (s0.capture(|_| Ok(closure_ran.set(true))).map(drop), "tf_graph_capture_begin"),
        (rt.memory_stats().map(drop), "tf_memory_pool_stats_init"),
        (rt.reset_peak_memory_stats(), "tf_memory_reset_peak"),
        (rt.trim_memory(0), "tf_memory_trim"),
        (buf.record_use(&s1), "tf_memory_record_use"),
        (rt.record_use(buf.as_raw()), "tf_memory_record_use"),
    ];
    for (result, function) in refused {
        let e = result.unwrap_err();
        assert_eq!((e.status(), e.operation()), (Status::NotSupported, function), "{e}");
        assert!(e.message().contains("too old") && e.message().contains("new in 1.2"), "{e}");
    }
    assert!(!closure_ran.get());
    // The crate's calls that record uses on 1.2 work without: nothing can
    // record them; and the refused capture left no trace on the slot.
    let other = s1.alloc::<u8>(64).unwrap();
    s1.copy(&other, &mut buf).unwrap();
    s1.upload(&[1u8; 64], &mut buf).unwrap();
    let host = rt.host_alloc::<u8>(64).unwrap();
    s0.download_async(&buf, host).unwrap().wait().unwrap();
}

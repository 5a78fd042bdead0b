// SPDX-License-Identifier: MIT OR Apache-2.0
//! Checks of the crate against the header: every public function is
//! declared in `sys` or listed in UNBOUND.txt, every declaration is used by
//! the safe API (or is one of the raw-only reads of the error record), the
//! library writes its defaults at the crate's offsets, the version agrees,
//! and the docs state defaults by the header's constants.  (The sys
//! crate's own tests, sys/tests/header.rs, compare every constant value and
//! struct layout with the header and abi/layout.c.)

use std::fs;
use std::path::{Path, PathBuf};

use tenferro_gpu::{self as tg, sys};

use crate::support::serial;

/// Read one at a time through `tg::last_error()`'s single tf_last_error
/// call, and the cuBLASLt calls of 1.2, not yet wrapped: callable raw
/// through `sys` only.
const RAW_ONLY: [&str; 8] = [
    "tf_last_error_message",
    "tf_last_error_operation",
    "tf_last_error_call",
    "tf_last_error_code",
    "tf_last_error_code_domain",
    "tf_last_error_status",
    "tf_cublaslt_enqueue",
    "tf_cublaslt_symbol",
];

fn crate_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    assert!(
        dir.join("src/lib.rs").exists(),
        "the crate's sources are not at {}; run this binary with --skip source_",
        dir.display()
    );
    dir
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Names `tf_*` directly followed by `(` after `marker` on the same item.
fn functions(text: &str, marker: &str) -> Vec<String> {
    let mut names = Vec::new();
    for item in text.split(';') {
        if let Some(at) = item.find(marker) {
            let rest = &item[at + marker.len()..];
            if let Some(paren) = rest.find('(') {
                let before = rest[..paren].trim_end();
                let name =
                    before.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap();
                if name.starts_with("tf_") {
                    names.push(name.to_string());
                }
            }
        }
    }
    names.sort();
    names
}

fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let ok = |c: Option<char>| c.map_or(true, |c| !(c.is_alphanumeric() || c == '_'));
        ok(text[..i].chars().next_back()) && ok(text[i + word.len()..].chars().next())
    })
}

#[test]
fn source_every_header_function_is_declared_or_listed() {
    let dir = crate_dir();
    let header = functions(&read(&dir.join("../../include/tenferro_gpu.h")), "TF_API");
    let declared: Vec<String> = sys::Library::NAMES.iter().map(|s| s.to_string()).collect();
    let unbound: Vec<String> = read(&dir.join("UNBOUND.txt"))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, reason) = l.split_once(':').expect("UNBOUND.txt: name: reason");
            assert!(!reason.trim().is_empty(), "UNBOUND.txt: {name} lacks a reason");
            name.trim().to_string()
        })
        .collect();
    assert!(header.len() >= 70);
    for name in &header {
        assert!(
            declared.contains(name) != unbound.contains(name),
            "{name}: must be declared in sys/src/header.rs or listed in UNBOUND.txt, not both or neither"
        );
    }
    for name in declared.iter().chain(&unbound) {
        assert!(header.contains(name), "{name} is not in the header");
    }
}

#[test]
fn source_every_declaration_is_used_by_the_safe_api() {
    let dir = crate_dir();
    let mut safe = String::new();
    for entry in fs::read_dir(dir.join("src")).unwrap() {
        safe += &read(&entry.unwrap().path());
    }
    for name in sys::Library::NAMES {
        let used = contains_word(&safe, name);
        assert_eq!(used, !RAW_ONLY.contains(name), "{name}: used by the safe API = {used}");
    }
}

/// Numbers a doc comment of the options may state: 0 (the field's "pick
/// the default"), 1 (the lower bounds) and 4096 (the page multiple, which
/// the header states as a number too).  Every default and every other bound
/// is a link to the header's constant, which sys/tests/header.rs compares
/// with the header, so these docs cannot drift from it.
const NUMBERS_DOCS_MAY_STATE: [&str; 3] = ["0", "1", "4096"];

#[test]
fn source_runtime_options_docs_name_the_headers_constants() {
    let text = read(&crate_dir().join("src/runtime.rs"));
    let start = text.find("impl RuntimeOptions {").unwrap();
    let end = start + text[start..].find("\n}\n").unwrap();
    let mut linked = 0;
    for line in text[start..end].lines().filter(|l| l.trim_start().starts_with("///")) {
        // The prose outside [`links`].
        let prose: String = line
            .split('[')
            .enumerate()
            .map(|(i, part)| if i == 0 { part } else { part.split_once(']').map_or(part, |(_, r)| r) })
            .collect();
        for number in prose.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()) {
            assert!(
                NUMBERS_DOCS_MAY_STATE.contains(&number),
                "src/runtime.rs states {number} in `{}`: link the header's constant instead",
                line.trim()
            );
        }
        linked += line.matches("[`sys::TF_").count();
    }
    assert!(linked >= 9, "the option docs link only {linked} constants");
}

#[test]
fn each_init_writes_its_defaults_at_the_crates_offsets() {
    let _s = serial();
    // The library writes struct_size = the size the crate passes and its
    // defaults at its own offsets: they land in the crate's fields only if
    // both layouts agree.
    let lib = sys::library().unwrap();
    unsafe {
        let o = sys::initialised(lib.tf_runtime_options_init);
        assert_eq!(o.struct_size as usize, std::mem::size_of::<sys::tf_runtime_options>());
        assert_eq!(
            (o.stream_slots, o.cublas_workspace_bytes, o.retirement_capacity, o.flags),
            (
                sys::TF_DEFAULT_STREAM_SLOTS,
                sys::TF_DEFAULT_CUBLAS_WORKSPACE_BYTES,
                sys::TF_DEFAULT_RETIREMENT_CAPACITY,
                0
            )
        );
        assert_eq!((o.download_threads, o.download_chunk_bytes), (0, 0));
        let c = sys::initialised(lib.tf_launch_config_init);
        assert_eq!(c.struct_size as usize, std::mem::size_of::<sys::tf_launch_config>());
        assert_eq!(
            [c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z, c.shared_memory_bytes],
            [1, 1, 1, 1, 1, 1, 0]
        );
        let e = sys::initialised(lib.tf_error_info_init);
        assert_eq!(e.struct_size as usize, std::mem::size_of::<sys::tf_error_info>());
        let d = sys::initialised(lib.tf_device_properties_init);
        assert_eq!(d.struct_size as usize, std::mem::size_of::<sys::tf_device_properties>());
        let r = sys::initialised(lib.tf_retirement_stats_init);
        assert_eq!(r.struct_size as usize, std::mem::size_of::<sys::tf_retirement_stats>());
        let p = sys::initialised(lib.tf_compile_options_init);
        assert_eq!(p.struct_size as usize, std::mem::size_of::<sys::tf_compile_options>());
        assert_eq!((p.target, p.arch, p.option_count), (0, 0, 0));
        assert!(p.options.is_null() && p.name.is_null());
    }
    let dev = tg::device_info(0).unwrap();
    assert!(dev.ordinal == 0 && !dev.name.is_empty() && dev.total_memory_bytes > 0);
}

#[test]
fn the_loaded_library_is_the_version_of_the_declarations() {
    let _s = serial();
    let v = tg::version().unwrap();
    assert_eq!(v, (sys::TF_VERSION_MAJOR, sys::TF_VERSION_MINOR, sys::TF_VERSION_PATCH));
    assert_eq!(tg::version_string().unwrap(), format!("{}.{}.{}", v.0, v.1, v.2));
}

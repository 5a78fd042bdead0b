//! Checks of the crate against the header: every public function is
//! declared in `sys` or listed in UNBOUND.txt, every declaration is used by
//! the safe API (or is one of the raw-only reads of the error record), the
//! struct layouts match the library's, and the version agrees.

use std::fs;
use std::path::{Path, PathBuf};

use tenferro_gpu::{self as tg, sys};

use crate::support::serial;

/// Read one at a time through `tg::last_error()`'s single tf_last_error
/// call; callable raw through `sys` only.
const RAW_ONLY: [&str; 6] = [
    "tf_last_error_message",
    "tf_last_error_operation",
    "tf_last_error_call",
    "tf_last_error_code",
    "tf_last_error_code_domain",
    "tf_last_error_status",
];

fn crate_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    assert!(
        dir.join("src/sys.rs").exists(),
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
    let declared = functions(&read(&dir.join("src/sys.rs")), "pub fn ");
    let unbound: Vec<String> = read(&dir.join("UNBOUND.txt"))
        .lines()
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
            "{name}: must be declared in sys.rs or listed in UNBOUND.txt, not both or neither"
        );
    }
    for name in declared.iter().chain(&unbound) {
        assert!(header.contains(name), "{name} is not in the header");
    }
}

#[test]
fn source_every_declaration_is_used_by_the_safe_api() {
    let dir = crate_dir();
    let declared = functions(&read(&dir.join("src/sys.rs")), "pub fn ");
    let mut safe = String::new();
    for entry in fs::read_dir(dir.join("src")).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "sys.rs" {
            safe += &read(&path);
        }
    }
    for name in &declared {
        let used = contains_word(&safe, name);
        assert_eq!(
            used,
            !RAW_ONLY.contains(&name.as_str()),
            "{name}: used by the safe API = {used}"
        );
    }
}

#[test]
fn source_sys_constants_match_the_header() {
    let dir = crate_dir();
    let header = read(&dir.join("../../include/tenferro_gpu.h"));
    let define = |name: &str| -> u32 {
        let line = header.lines().find(|l| l.starts_with(&format!("#define {name} "))).unwrap();
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    assert_eq!(define("TF_VERSION_MAJOR"), sys::TF_VERSION_MAJOR);
    assert_eq!(define("TF_VERSION_MINOR"), sys::TF_VERSION_MINOR);
    assert_eq!(define("TF_VERSION_PATCH"), sys::TF_VERSION_PATCH);
    assert_eq!(define("TF_ERROR_NAME_CAPACITY") as usize, sys::TF_ERROR_NAME_CAPACITY);
    assert_eq!(define("TF_ERROR_MESSAGE_CAPACITY") as usize, sys::TF_ERROR_MESSAGE_CAPACITY);
    assert_eq!(define("TF_DEVICE_NAME_CAPACITY") as usize, sys::TF_DEVICE_NAME_CAPACITY);
    assert_eq!(define("TF_MAX_STREAM_SLOTS"), sys::TF_MAX_STREAM_SLOTS);
    assert_eq!(define("TF_DEFAULT_STREAM_SLOTS"), sys::TF_DEFAULT_STREAM_SLOTS);
    assert_eq!(define("TF_DEFAULT_RETIREMENT_CAPACITY"), sys::TF_DEFAULT_RETIREMENT_CAPACITY);
    assert_eq!(define("TF_MAX_RETIREMENT_CAPACITY"), sys::TF_MAX_RETIREMENT_CAPACITY);
    assert_eq!(define("TF_DEFAULT_DOWNLOAD_THREADS"), sys::TF_DEFAULT_DOWNLOAD_THREADS);
    assert_eq!(define("TF_MAX_DOWNLOAD_THREADS"), sys::TF_MAX_DOWNLOAD_THREADS);
    assert_eq!(define("TF_SCALAR_DOWNLOAD_MAX_BYTES") as usize, sys::TF_SCALAR_DOWNLOAD_MAX_BYTES);
}

/// Field names of `typedef struct NAME { ... } NAME;` (C) or
/// `pub struct NAME { ... }` (Rust) in `text`, in order.
fn struct_fields(text: &str, open: &str) -> Vec<String> {
    let start = text.find(open).unwrap_or_else(|| panic!("no {open}")) + open.len();
    let body = &text[start..start + text[start..].find('}').unwrap()];
    let mut fields = Vec::new();
    for line in body.lines() {
        let code = line.split("/*").next().unwrap().split("//").next().unwrap().trim();
        let decl = code.trim_end_matches([';', ',']);
        if decl.is_empty() || decl.starts_with('*') {
            continue;
        }
        let name = if let Some((left, _)) = decl.split_once(':') {
            left.trim().trim_start_matches("pub ").trim()
        } else {
            decl.split('[').next().unwrap().rsplit(|c: char| c == ' ' || c == '*').next().unwrap()
        };
        fields.push(name.to_string());
    }
    fields
}

#[test]
fn source_sys_structs_have_the_headers_fields() {
    let dir = crate_dir();
    let header = read(&dir.join("../../include/tenferro_gpu.h"));
    let sys_rs = read(&dir.join("src/sys.rs"));
    let structs = [
        "tf_error_info",
        "tf_device_properties",
        "tf_runtime_options",
        "tf_retirement_stats",
        "tf_launch_config",
        "tf_compile_options",
    ];
    assert_eq!(header.matches("typedef struct tf_").count() - header.matches("typedef struct tf_runtime tf_runtime").count()
        - header.matches("typedef struct tf_event tf_event").count()
        - header.matches("typedef struct tf_module tf_module").count()
        - header.matches("typedef struct tf_program tf_program").count(), structs.len());
    for name in structs {
        let c = struct_fields(&header, &format!("typedef struct {name} {{"));
        let rust = struct_fields(&sys_rs, &format!("pub struct {name} {{"));
        assert!(c.len() >= 6, "{name}: {c:?}");
        assert_eq!(rust, c, "{name}");
    }
}

#[test]
fn each_init_writes_its_defaults_at_the_crates_offsets() {
    let _s = serial();
    // The library writes struct_size = the size the crate passes and its
    // defaults at its own offsets: they land in the crate's fields only if
    // both layouts agree.
    unsafe {
        let o = sys::initialised(sys::tf_runtime_options_init);
        assert_eq!(o.struct_size as usize, std::mem::size_of::<sys::tf_runtime_options>());
        assert_eq!(
            (o.stream_slots, o.cublas_workspace_bytes, o.retirement_capacity, o.flags),
            (8, 32 << 20, 1024, 0)
        );
        assert_eq!((o.download_threads, o.download_chunk_bytes), (0, 0));
        let c = sys::initialised(sys::tf_launch_config_init);
        assert_eq!(c.struct_size as usize, std::mem::size_of::<sys::tf_launch_config>());
        assert_eq!(
            [c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z, c.shared_memory_bytes],
            [1, 1, 1, 1, 1, 1, 0]
        );
        let e = sys::initialised(sys::tf_error_info_init);
        assert_eq!(e.struct_size as usize, std::mem::size_of::<sys::tf_error_info>());
        let d = sys::initialised(sys::tf_device_properties_init);
        assert_eq!(d.struct_size as usize, std::mem::size_of::<sys::tf_device_properties>());
        let r = sys::initialised(sys::tf_retirement_stats_init);
        assert_eq!(r.struct_size as usize, std::mem::size_of::<sys::tf_retirement_stats>());
        let p = sys::initialised(sys::tf_compile_options_init);
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
    let v = tg::version();
    assert_eq!(v, (sys::TF_VERSION_MAJOR, sys::TF_VERSION_MINOR, sys::TF_VERSION_PATCH));
    assert_eq!(tg::version_string(), format!("{}.{}.{}", v.0, v.1, v.2));
}

// SPDX-License-Identifier: MIT OR Apache-2.0
//! The declarations against the header they copy: every function in the
//! list (in the header's order), every constant with the header's value,
//! every struct with the layout the C compiler measured.
//!
//! The layouts come from abi/layout.c, which tools/ci/abi-layout generates
//! from clang's view of the header and `make check-layout` keeps equal to
//! it: sizes, alignments, field offsets and field sizes as a C compiler
//! lays them out, with no C compiler needed here and no C layout rules
//! re-implemented.  The `#define` values are read from the header itself.
//! These tests read the repository's files, so they run from a checkout.

use std::collections::BTreeMap;
use std::fs;
use std::mem::{align_of, size_of, MaybeUninit};
use std::path::PathBuf;

use tenferro_gpu_sys as sys;

fn repository_file(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..").join(relative);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The header without comments.
fn header() -> String {
    let text = repository_file("include/tenferro_gpu.h");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("an unterminated comment") + start + 2;
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn every_header_function_is_in_the_list_in_the_headers_order() {
    let text = header();
    let mut names = Vec::new();
    for declaration in text.split("TF_API").skip(1) {
        let declaration = declaration.split(';').next().unwrap();
        if let Some(paren) = declaration.find('(') {
            let before = declaration[..paren].trim_end();
            let name = before.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap();
            if name.starts_with("tf_") {
                names.push(name.to_string());
            }
        }
    }
    assert!(names.len() >= 70, "found only {} TF_API functions", names.len());
    let listed: Vec<&str> = sys::Library::NAMES.to_vec();
    assert_eq!(listed, names, "the declarations differ from the header's TF_API functions");
}

/// Every function's `@since` in the header, in the header's order: the
/// tag of the doc comment right before its declaration.
fn header_since() -> Vec<(String, String)> {
    let text = repository_file("include/tenferro_gpu.h");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("TF_API") {
        let (before, after) = rest.split_at(at);
        let comment = &before[before.rfind("/**").unwrap_or(0)..];
        let declaration = after.split(';').next().unwrap();
        rest = &after["TF_API".len()..];
        let Some(paren) = declaration.find('(') else { continue };
        let head = declaration[..paren].trim_end();
        let name = head.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap();
        if !name.starts_with("tf_") {
            continue;
        }
        let since = comment.split("@since").nth(1).map(|t| t.split_whitespace().next().unwrap());
        out.push((name.to_string(), since.unwrap_or("none").to_string()));
    }
    out
}

#[test]
fn the_optional_functions_are_those_the_header_says_are_newer_than_1_0() {
    let header = header_since();
    assert_eq!(header.len(), sys::Library::NAMES.len());
    for ((name, since), (listed, optional)) in
        header.iter().zip(sys::Library::NAMES.iter().zip(sys::Library::SINCE))
    {
        assert_eq!(name, listed);
        let want = if since == "1.0" { None } else { Some(since.as_str()) };
        assert_eq!(*optional, want, "{name}: the header says @since {since}");
    }
}

/// A constant's value as the header or the crate states it.
#[derive(Debug, PartialEq)]
enum Value {
    Int(i128),
    Text(String),
}

/// `NAME -> value` of every `#define TF_...` constant: not TF_API and not
/// the attribute macros (TF_NODISCARD, TF_DEPRECATED(message), ...).
fn header_defines() -> BTreeMap<String, Value> {
    let text = header();
    let joined = text.replace("\\\n", " ");
    let mut defines = BTreeMap::new();
    let mut raw = BTreeMap::new();
    for line in joined.lines() {
        let Some(rest) = line.trim_start().strip_prefix("#define ") else { continue };
        let (name, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let attribute = name.contains('(')
            || ["__attribute__", "[[", "__declspec"].iter().any(|a| value.contains(a));
        if name.starts_with("TF_") && name != "TF_API" && !attribute && !value.trim().is_empty() {
            raw.insert(name.to_string(), value.trim().to_string());
        }
    }
    for (name, value) in &raw {
        defines.insert(name.clone(), evaluate(value, &raw));
    }
    defines
}

/// The value of a header #define: a number, a string, a cast shift
/// `((uint32_t)16 << 20)`, or a sum of products of other defines.
fn evaluate(text: &str, defines: &BTreeMap<String, String>) -> Value {
    let text = text.trim();
    if let Some(s) = text.strip_prefix('"') {
        return Value::Text(s.trim_end_matches('"').to_string());
    }
    // ((uint64_t)-1): all ones.
    if text.replace(' ', "") == "((uint64_t)-1)" {
        return Value::Int(u64::MAX as i128);
    }
    let bare: String = text
        .replace("(uint32_t)", "")
        .replace("(uint64_t)", "")
        .chars()
        .filter(|&c| c != '(' && c != ')')
        .collect();
    let int = |term: &str| -> i128 {
        let term = term.trim();
        if let Ok(n) = term.parse::<i128>() {
            return n;
        }
        match evaluate(&defines[term], defines) {
            Value::Int(n) => n,
            other => panic!("{term} is not a number: {other:?}"),
        }
    };
    if let Some((a, b)) = bare.split_once("<<") {
        return Value::Int(int(a) << int(b));
    }
    let sum = bare.split('+').map(|product| product.split('*').map(int).product::<i128>()).sum();
    Value::Int(sum)
}

/// `NAME -> value` of every enum constant abi/layout.c freezes.
fn frozen_enum_constants() -> BTreeMap<String, Value> {
    let layout = repository_file("abi/layout.c");
    let mut constants = BTreeMap::new();
    for line in layout.lines() {
        let Some(rest) = line.strip_prefix("_Static_assert(TF_") else { continue };
        let (name, value) = rest.split_once(" == ").unwrap();
        let value: i128 = value.split(',').next().unwrap().trim().parse().unwrap();
        constants.insert(format!("TF_{name}"), Value::Int(value));
    }
    constants
}

macro_rules! constants {
    ($($name:ident),* $(,)?) => {{
        let mut map = BTreeMap::new();
        $( map.insert(stringify!($name).to_string(), value_of(sys::$name)); )*
        map
    }};
}

trait Constant {
    fn value(self) -> Value;
}
macro_rules! integer_constant {
    ($($t:ty),*) => { $(impl Constant for $t { fn value(self) -> Value { Value::Int(self as i128) } })* };
}
integer_constant!(i32, u32, u64, usize);
impl Constant for &str {
    fn value(self) -> Value {
        Value::Text(self.to_string())
    }
}
fn value_of(c: impl Constant) -> Value {
    c.value()
}

/// Every constant the crate declares, by name.
fn crate_constants() -> BTreeMap<String, Value> {
    constants![
        TF_VERSION_MAJOR,
        TF_VERSION_MINOR,
        TF_VERSION_PATCH,
        TF_VERSION_NUMBER,
        TF_VERSION_STRING,
        TF_MAX_STRUCT_SIZE,
        TF_OK,
        TF_ERROR_INVALID_ARGUMENT,
        TF_ERROR_INVALID_HANDLE,
        TF_ERROR_DRIVER_NOT_FOUND,
        TF_ERROR_DRIVER_STUB,
        TF_ERROR_NO_DEVICE,
        TF_ERROR_DEVICE_UNAVAILABLE,
        TF_ERROR_DRIVER_TOO_OLD,
        TF_ERROR_CUDA,
        TF_ERROR_NOT_SUPPORTED,
        TF_ERROR_LIBRARY_NOT_FOUND,
        TF_ERROR_PROVIDER,
        TF_ERROR_CALLBACK,
        TF_ERROR_OUT_OF_MEMORY,
        TF_ERROR_RUNTIME_STATE,
        TF_ERROR_DEVICE_FAULT,
        TF_ERROR_COMPILE,
        TF_ERROR_INTERNAL,
        TF_CODE_NONE,
        TF_CODE_CUDA,
        TF_CODE_CUBLAS,
        TF_CODE_NVRTC,
        TF_CODE_CALLBACK,
        TF_CODE_SYSTEM,
        TF_ERROR_NAME_CAPACITY,
        TF_ERROR_MESSAGE_CAPACITY,
        TF_LOG_WARNING,
        TF_LOG_ERROR,
        TF_DEVICE_NAME_CAPACITY,
        TF_DEFAULT_STREAM_SLOTS,
        TF_MAX_STREAM_SLOTS,
        TF_DEFAULT_CUBLAS_WORKSPACE_BYTES,
        TF_DEFAULT_RETIREMENT_CAPACITY,
        TF_MAX_RETIREMENT_CAPACITY,
        TF_DEFAULT_DOWNLOAD_THREADS,
        TF_MAX_DOWNLOAD_THREADS,
        TF_DEFAULT_DOWNLOAD_CHUNK_BYTES,
        TF_MIN_DOWNLOAD_CHUNK_BYTES,
        TF_MAX_DOWNLOAD_CHUNK_BYTES,
        TF_DEFAULT_MEMORY_RELEASE_THRESHOLD,
        TF_MIN_MEMORY_RESERVED_LIMIT,
        TF_CAP_NATIVE_MODULES,
        TF_CAP_RUNTIME_COMPILATION,
        TF_CAP_RAW_STREAM,
        TF_CAP_SAME_DEVICE_COPY,
        TF_CAP_PEER_COPY,
        TF_CAP_CUBLAS,
        TF_CAP_STREAM_ORDERED_ALLOC,
        TF_CUBLAS_POINTER_MODE_HOST,
        TF_CUBLAS_POINTER_MODE_DEVICE,
        TF_COMPILE_PTX,
        TF_COMPILE_CUBIN,
        TF_SCALAR_DOWNLOAD_MAX_BYTES,
    ]
}

#[test]
fn every_constant_has_the_headers_value_and_none_is_missing() {
    let mut expected = header_defines();
    expected.remove("TENFERRO_GPU_H");
    let enums = frozen_enum_constants();
    assert!(enums.len() >= 35, "abi/layout.c froze only {} enum constants", enums.len());
    expected.extend(enums);
    let declared = crate_constants();
    let missing: Vec<&String> = expected.keys().filter(|k| !declared.contains_key(*k)).collect();
    let extra: Vec<&String> = declared.keys().filter(|k| !expected.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, not in the header {extra:?}"
    );
    for (name, value) in &expected {
        assert_eq!(&declared[name], value, "{name}");
    }
}

#[test]
fn the_list_above_names_every_constant_of_the_crate() {
    // Every `pub const TF_` of the declarations is compared above.
    let source =
        fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/header.rs"))
            .unwrap();
    let declared = crate_constants();
    let mut count = 0;
    for line in source.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("pub const ") {
            let name = rest.split(':').next().unwrap().trim();
            assert!(declared.contains_key(name), "{name} is not compared with the header");
            count += 1;
        }
    }
    assert_eq!(count, declared.len());
}

/// One field as Rust lays it out: (name, offset, size).
type Field = (&'static str, usize, usize);

fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

/// (size, alignment, fields) of a struct; the pattern names every field,
/// so a field missing here does not compile.
macro_rules! layout {
    ($name:ident { $($field:ident),* $(,)? }) => {{
        #[allow(unused)]
        fn exhaustive(value: sys::$name) {
            let sys::$name { $($field: _),* } = value;
        }
        let value = MaybeUninit::<sys::$name>::uninit();
        let base = value.as_ptr();
        let fields: Vec<Field> = vec![$({
            // SAFETY: the address of a field of an allocated struct; nothing
            // is read.
            let at = unsafe { std::ptr::addr_of!((*base).$field) };
            (stringify!($field), at as usize - base as usize, size_of_pointee(at))
        }),*];
        (stringify!($name), size_of::<sys::$name>(), align_of::<sys::$name>(), fields)
    }};
}

/// (size, alignment, [(field, offset, size)]) of one struct.
type Measured = (usize, usize, Vec<(String, usize, usize)>);

/// `struct -> Measured` from abi/layout.c.
fn measured_layouts() -> BTreeMap<String, Measured> {
    let layout = repository_file("abi/layout.c");
    let number = |s: &str| -> usize { s.split(',').next().unwrap().trim().parse().unwrap() };
    let mut out: BTreeMap<String, Measured> = BTreeMap::new();
    for line in layout.lines() {
        let Some(rest) = line.strip_prefix("_Static_assert(") else { continue };
        if let Some(r) = rest.strip_prefix("sizeof(struct ") {
            let (name, value) = r.split_once(") == ").unwrap();
            out.entry(name.to_string()).or_default().0 = number(value);
        } else if let Some(r) = rest.strip_prefix("_Alignof(struct ") {
            let (name, value) = r.split_once(") == ").unwrap();
            out.entry(name.to_string()).or_default().1 = number(value);
        } else if let Some(r) = rest.strip_prefix("offsetof(struct ") {
            let (name, r) = r.split_once(", ").unwrap();
            let (field, value) = r.split_once(") == ").unwrap();
            out.entry(name.to_string()).or_default().2.push((field.to_string(), number(value), 0));
        } else if let Some(r) = rest.strip_prefix("sizeof(((struct ") {
            let (name, r) = r.split_once(" *)0)->").unwrap();
            let (field, value) = r.split_once(") == ").unwrap();
            let fields = &mut out.get_mut(name).expect("a field size before its offset").2;
            let entry =
                fields.iter_mut().find(|f| f.0 == field).expect("a field size before its offset");
            entry.2 = number(value);
        }
    }
    out
}

#[test]
fn every_struct_has_the_layout_the_c_compiler_measured() {
    let rust = [
        layout!(tf_error_info { struct_size, status, code_domain, code, operation, call, message }),
        layout!(tf_device_properties {
            struct_size,
            ordinal,
            name,
            uuid,
            compute_capability_major,
            compute_capability_minor,
            total_memory_bytes,
            multiprocessor_count,
            pci_domain_id,
            pci_bus_id,
            pci_device_id,
        }),
        layout!(tf_runtime_options {
            struct_size,
            stream_slots,
            cublas_workspace_bytes,
            retirement_capacity,
            flags,
            download_threads,
            download_chunk_bytes,
            memory_release_threshold,
            memory_reserved_limit,
        }),
        layout!(tf_retirement_stats {
            struct_size,
            capacity,
            deferred,
            released,
            barrier_fallbacks,
            leaked,
            in_flight,
            max_in_flight,
        }),
        layout!(tf_host_pool_stats {
            struct_size,
            reserved,
            bytes_in_use,
            bytes_cached,
            bytes_registered,
            blocks_in_use,
            blocks_cached,
            driver_allocations,
            pending_frees,
        }),
        layout!(tf_memory_pool_stats {
            struct_size,
            cached,
            reserved_bytes,
            reserved_peak,
            in_use_bytes,
            in_use_peak,
            allocations,
            frees,
            oom_retries,
            oom_failures,
            trims,
            release_threshold,
            reserved_limit,
        }),
        layout!(tf_launch_config {
            struct_size,
            grid_x,
            grid_y,
            grid_z,
            block_x,
            block_y,
            block_z,
            shared_memory_bytes,
        }),
        layout!(tf_compile_options { struct_size, target, arch, option_count, options, name }),
    ];
    let measured = measured_layouts();
    let names: Vec<&str> = rust.iter().map(|r| r.0).collect();
    let frozen: Vec<&str> = measured.keys().map(String::as_str).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, frozen, "abi/layout.c and the crate know different structs");
    for (name, size, align, fields) in rust {
        let (c_size, c_align, c_fields) = &measured[name];
        assert_eq!((size, align), (*c_size, *c_align), "{name}: size and alignment");
        let rust_fields: Vec<(String, usize, usize)> =
            fields.into_iter().map(|(f, o, s)| (f.to_string(), o, s)).collect();
        assert_eq!(&rust_fields, c_fields, "{name}: (field, offset, size) in order");
    }
}

#[test]
fn the_typedefs_have_the_measured_sizes() {
    let layout = repository_file("abi/layout.c");
    let size = |name: &str| -> usize {
        let line = layout
            .lines()
            .find(|l| l.starts_with(&format!("_Static_assert(sizeof({name}) == ")))
            .unwrap_or_else(|| panic!("abi/layout.c has no size of {name}"));
        line.split(" == ").nth(1).unwrap().split(',').next().unwrap().parse().unwrap()
    };
    assert_eq!(size_of::<sys::tf_status>(), size("tf_status"));
    assert_eq!(size_of::<sys::tf_log_fn>(), size("tf_log_fn"));
    // The callback types the header spells inline are function pointers too.
    assert_eq!(size_of::<sys::tf_stream_fn>(), size("tf_log_fn"));
}

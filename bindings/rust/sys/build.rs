// SPDX-License-Identifier: MIT OR Apache-2.0
//! With the `linked` feature: finds libtenferro_gpu through pkg-config (the
//! `PKG_CONFIG` program, `pkg-config` by default) and links it by name, so
//! the program loads the SONAME libtenferro_gpu.so.1 through the normal
//! search path at run time.  For an uninstalled build tree, point
//! PKG_CONFIG_PATH at the folder of its tenferro_gpu.pc (the Makefile makes
//! build/pkgconfig/).
//!
//! With `dynamic-loading` alone (the default) it does nothing: the library
//! is opened at run time, so building needs neither the library nor
//! pkg-config.

use std::env;
use std::process::Command;

const MODULE: &str = "tenferro_gpu";
const ABI_MAJOR: &str = "1";

fn pkg_config(args: &[&str]) -> Result<String, String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&program)
        .args(args)
        .arg(MODULE)
        .output()
        .map_err(|e| format!("{program} could not run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {} {MODULE} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn link() {
    for var in ["PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "PKG_CONFIG_SYSROOT_DIR"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let found = pkg_config(&["--modversion"]).and_then(|version| {
        if version.split('.').next() != Some(ABI_MAJOR) {
            return Err(format!(
                "pkg-config found {MODULE} {version}; this crate needs major version {ABI_MAJOR}"
            ));
        }
        pkg_config(&["--libs"]).map(|libs| (version, libs))
    });
    let (version, libs) = found.unwrap_or_else(|why| {
        panic!(
            "\n\ntenferro-gpu-sys (feature `linked`): cannot find the tenferro_gpu library: {why}\n\
             Install it (make install PREFIX=...) and make sure pkg-config finds \
             tenferro_gpu.pc (PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig), or, in a build \
             tree, run `make build/pkgconfig/tenferro_gpu.pc` and set \
             PKG_CONFIG_PATH=$PWD/build/pkgconfig.  The default feature \
             `dynamic-loading` needs none of this.\n\n"
        )
    });
    for token in libs.split_whitespace() {
        if let Some(dir) = token.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:libdir={dir}");
        } else if let Some(name) = token.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={name}");
        }
    }
    println!("cargo:version={version}");
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_LINKED").is_some() {
        link();
    }
}

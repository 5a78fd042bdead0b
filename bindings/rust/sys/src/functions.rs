// SPDX-License-Identifier: MIT OR Apache-2.0
//! One list of the header's functions, two ways to reach them.
//!
//! `header.rs` names every `TF_API` function once, inside
//! `declare_functions!`.  The macro turns that list into
//!
//!  - [`Library`](crate::Library): a table with one function pointer per
//!    function, and a method of the same name calling it;
//!  - `Library::NAMES`, the names in the order of the list, and
//!    `Library::SINCE`, the minor version that added each (`None`: 1.0);
//!  - with `linked`: an `extern "C"` block (resolved by the linker) and a
//!    static table of those functions;
//!  - without it (`dynamic-loading`): the table's resolution with dlsym and a
//!    free function per entry that calls through the table.
//!
//! Both modes expand the same tokens, so a declaration cannot differ between
//! them, and the free functions have the same signatures either way.
//!
//! An entry marked `[1.1]` (the minor version that added it) is optional
//! with `dynamic-loading`: a library of an older minor version lacks it and
//! still loads.  Its field is an `Option`, and its method and free function
//! return `Result<_, MissingFunction>`: `Err` names the function when the
//! loaded library lacks it (with `linked` they always succeed).

/// The type of a table field: the function pointer, or for an optional
/// (`[minor]`) entry an `Option` of it.
#[doc(hidden)]
#[macro_export]
macro_rules! __tf_field {
    ([$since:literal] $t:ty) => { Option<$t> };
    ($t:ty) => { $t };
}

/// What a method of the table returns: the C result, or for an optional
/// entry that result or the [`MissingFunction`](crate::MissingFunction).
#[doc(hidden)]
#[macro_export]
macro_rules! __tf_returns {
    ([$since:literal] $($r:ty)?) => { Result<$crate::__tf_unit!($($r)?), $crate::MissingFunction> };
    ($($r:ty)?) => { $crate::__tf_unit!($($r)?) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tf_unit {
    ($r:ty) => { $r };
    () => { () };
}

/// Calls `$f` (a field value) with the arguments: directly, or for an
/// optional entry when present, else `Err`.
#[doc(hidden)]
#[macro_export]
macro_rules! __tf_call {
    ([$since:literal] $name:ident, $f:expr, ($($arg:expr),*)) => {
        match $f {
            Some(f) => Ok(f($($arg),*)),
            None => Err($crate::MissingFunction::new(stringify!($name), stringify!($since))),
        }
    };
    ($name:ident, $f:expr, ($($arg:expr),*)) => { $f($($arg),*) };
}

/// The resolved address as a field value: a missing optional entry is
/// `None`, a missing required one fails the whole resolution.
#[doc(hidden)]
#[macro_export]
macro_rules! __tf_resolved {
    ([$since:literal] $name:ident, $address:expr, $t:ty) => {
        if $address.is_null() {
            None
        } else {
            Some(std::mem::transmute::<*mut std::os::raw::c_void, $t>($address))
        }
    };
    ($name:ident, $address:expr, $t:ty) => {{
        if $address.is_null() {
            return Err(stringify!($name));
        }
        std::mem::transmute::<*mut std::os::raw::c_void, $t>($address)
    }};
}

/// The version an entry is marked with, for `Library::SINCE`.
#[doc(hidden)]
#[macro_export]
macro_rules! __tf_since {
    ([$since:literal]) => { Some(stringify!($since)) };
    () => { None };
}

/// A linked function as a field value.
#[doc(hidden)]
#[macro_export]
macro_rules! __tf_linked {
    ([$since:literal] $f:expr) => { Some($f) };
    ($f:expr) => { $f };
}

macro_rules! declare_functions {
    ($( $(#[$meta:meta])* $([$since:literal])? fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; )*) => {
        /// Every function of `include/tenferro_gpu.h`, resolved once: by the
        /// linker (feature `linked`) or with dlsym when the library is
        /// opened (feature `dynamic-loading`).  [`library()`](crate::library) gives the
        /// process's table.
        ///
        /// Each field is the C function (an `Option` of it for a function
        /// newer than 1.0, which an older library lacks); the method of the
        /// same name calls it.  Calling either is `unsafe`: the header's
        /// contract applies.
        #[derive(Clone, Copy)]
        pub struct Library {
            $( pub $name: $crate::__tf_field!($([$since])? unsafe extern "C" fn($($ty),*) $(-> $ret)?), )*
        }

        #[allow(clippy::too_many_arguments)]
        impl Library {
            /// The functions' names, in the order of the declarations.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// For each of [`Library::NAMES`], the minor version that added
            /// it (`Some("1.2")`), or `None` for a function of 1.0: the
            /// functions an older library may lack, which are optional with
            /// `dynamic-loading`.
            pub const SINCE: &'static [Option<&'static str>] = &[$($crate::__tf_since!($([$since])?)),*];

            $(
                $(#[$meta])*
                #[doc = concat!("Calls `", stringify!($name), "` (include/tenferro_gpu.h).")]
                ///
                /// # Safety
                /// The header's contract for this function.
                #[inline]
                pub unsafe fn $name(&self, $($arg: $ty),*) -> $crate::__tf_returns!($([$since])? $($ret)?) {
                    $crate::__tf_call!($([$since])? $name, self.$name, ($($arg),*))
                }
            )*

            /// Resolves every function with `lookup` (NUL-terminated names),
            /// or names the first required one it cannot find.
            #[cfg(not(feature = "linked"))]
            pub(crate) unsafe fn resolve(
                mut lookup: impl FnMut(&'static [u8]) -> *mut std::os::raw::c_void,
            ) -> Result<Library, &'static str> {
                Ok(Library {
                    $( $name: {
                        let address = lookup(concat!(stringify!($name), "\0").as_bytes());
                        $crate::__tf_resolved!($([$since])? $name, address,
                            unsafe extern "C" fn($($ty),*) $(-> $ret)?)
                    }, )*
                })
            }
        }

        #[cfg(feature = "linked")]
        pub(crate) mod linked {
            #[allow(unused_imports)]
            use super::*;

            extern "C" {
                $( $(#[$meta])* pub fn $name($($arg: $ty),*) $(-> $ret)?; )*
            }

            /// The linked functions as a table.
            pub(crate) static LIBRARY: Library = Library { $( $name: $crate::__tf_linked!($([$since])? $name), )* };
        }

        $(
            $(#[$meta])*
            #[doc = concat!("`", stringify!($name), "` of include/tenferro_gpu.h, through [`library()`](crate::library).")]
            ///
            /// # Safety
            /// The header's contract for this function.
            ///
            /// # Panics
            /// With `dynamic-loading`, if libtenferro_gpu.so.1 could not be
            /// loaded; check [`library()`](crate::library) first to get that
            /// as an error instead.
            #[inline]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) -> $crate::__tf_returns!($([$since])? $($ret)?) {
                crate::loader::table().$name($($arg),*)
            }
        )*
    };
}

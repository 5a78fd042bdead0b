//! One list of the header's functions, two ways to reach them.
//!
//! `header.rs` names every `TF_API` function once, inside
//! `declare_functions!`.  The macro turns that list into
//!
//!  - [`Library`](crate::Library): a table with one function pointer per
//!    function, and a method of the same name calling it;
//!  - `Library::NAMES`, the names in the order of the list;
//!  - with `linked`: an `extern "C"` block (resolved by the linker) and a
//!    static table of those functions;
//!  - without it (`dynamic-loading`): the table's resolution with dlsym and a
//!    free function per entry that calls through the table.
//!
//! Both modes expand the same tokens, so a declaration cannot differ between
//! them, and the free functions have the same signatures either way.

macro_rules! declare_functions {
    ($( $(#[$meta:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; )*) => {
        /// Every function of `include/tenferro_gpu.h`, resolved once: by the
        /// linker (feature `linked`) or with dlsym when the library is
        /// opened (feature `dynamic-loading`).  [`library()`](crate::library) gives the
        /// process's table.
        ///
        /// Each field is the C function; the method of the same name calls
        /// it.  Calling either is `unsafe`: the header's contract applies.
        #[derive(Clone, Copy)]
        pub struct Library {
            $( pub $name: unsafe extern "C" fn($($ty),*) $(-> $ret)?, )*
        }

        #[allow(clippy::too_many_arguments)]
        impl Library {
            /// The functions' names, in the order of the declarations.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            $(
                $(#[$meta])*
                #[doc = concat!("Calls `", stringify!($name), "` (include/tenferro_gpu.h).")]
                ///
                /// # Safety
                /// The header's contract for this function.
                #[inline]
                pub unsafe fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
                    (self.$name)($($arg),*)
                }
            )*

            /// Resolves every function with `lookup` (NUL-terminated names),
            /// or names the first one it cannot find.
            #[cfg(not(feature = "linked"))]
            pub(crate) unsafe fn resolve(
                mut lookup: impl FnMut(&'static [u8]) -> *mut std::os::raw::c_void,
            ) -> Result<Library, &'static str> {
                Ok(Library {
                    $( $name: {
                        let address = lookup(concat!(stringify!($name), "\0").as_bytes());
                        if address.is_null() {
                            return Err(stringify!($name));
                        }
                        std::mem::transmute::<
                            *mut std::os::raw::c_void,
                            unsafe extern "C" fn($($ty),*) $(-> $ret)?,
                        >(address)
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
            pub(crate) static LIBRARY: Library = Library { $( $name, )* };
        }

        #[cfg(feature = "linked")]
        pub use linked::{$($name),*};

        $(
            #[cfg(not(feature = "linked"))]
            $(#[$meta])*
            #[doc = concat!("`", stringify!($name), "` of include/tenferro_gpu.h, through [`library()`](crate::library).")]
            ///
            /// # Safety
            /// The header's contract for this function.
            ///
            /// # Panics
            /// If libtenferro_gpu.so.1 could not be loaded; check
            /// [`library()`](crate::library) first to get that as an error instead.
            #[inline]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
                (crate::loader::loaded().$name)($($arg),*)
            }
        )*
    };
}

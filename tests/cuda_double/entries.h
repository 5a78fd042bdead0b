/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Declarations of the double's driver entry points, generated from the
// library's own list (src/driver/driver_entries.inc).  Each one is declared with the
// function type of PFN_<name>_v<version> from cudaTypedefs.h, so a
// definition whose parameters differ from that ABI does not compile, and an
// entry added to the list without an implementation does not link.
#ifndef TFD_ENTRIES_H
#define TFD_ENTRIES_H

#include <cuda.h>
#include <cudaTypedefs.h>

#include <type_traits>

namespace tfd {
namespace entry {

#define TF_DRIVER_ENTRY(name, version) std::remove_pointer_t<PFN_##name##_v##version> d_##name;
#include "driver/driver_entries.inc"
#include "extra_entries.inc"
#undef TF_DRIVER_ENTRY

}  // namespace entry
}  // namespace tfd

#endif

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The driver's entry points, called directly, for the double's self-tests
 * (tests/test_double*.c): every entry of the library's list
 * (src/driver/driver_entries.inc) and the double's extra ones
 * (tests/cuda_double/extra_entries.inc), each with its exact prototype,
 * resolved through cuGetProcAddress_v2 of whichever libcuda.so.1 the
 * process loaded, at the listed versions.  No part of libtenferro_gpu is
 * involved. */
#ifndef TF_TEST_DRIVER_TABLE_H
#define TF_TEST_DRIVER_TABLE_H

#include <cuda.h>
#include <cudaTypedefs.h>

struct driver_table {
#define TF_DRIVER_ENTRY(name, version) PFN_##name##_v##version name;
#include "../../src/driver/driver_entries.inc"
#include "../cuda_double/extra_entries.inc"
#undef TF_DRIVER_ENTRY
};

/* The table, or NULL when no libcuda.so.1 can be loaded or it lacks an
 * entry.  Resolved once per process. */
const struct driver_table *driver_table(void);
/* cuGetProcAddress_v2 of the loaded libcuda.so.1, or NULL. */
PFN_cuGetProcAddress_v12000 driver_get_proc(void);

/* Per-test fixture of the double's self-tests (no-ops without the double):
 * setup resets the double, initializes it and clears the thread's context;
 * teardown releases every primary context a test left retained, resets
 * the double again and fails (-1) when any object is still live. */
int double_selftest_setup(void **state);
int double_selftest_teardown(void **state);

#endif

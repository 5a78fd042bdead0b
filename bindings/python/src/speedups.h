/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* What the files of the optional C extension (tenferro_gpu/_speedups)
 * share.  Each file adds its objects to the module in its *_ready(). */
#ifndef TENFERRO_GPU_SPEEDUPS_H
#define TENFERRO_GPU_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

/* ref.c: one C reference the binding owns (see _handles.py): the object
 * every call passes as its handle, so that the call holds the reference. */
typedef struct {
    PyObject_HEAD void *ptr;
    PyObject *weakreflist;
} tfsp_Ref;

extern PyTypeObject tfsp_RefType;

/* What the hot calls return for None (a handle closed by another thread
 * between the caller's check and the call): no status is that negative. */
#define TFSP_CLOSED (-1000000)

int tfsp_ref_ready(PyObject *module);

/* host_export.c: HostBuffer's buffer, counted, with a hook at the last
 * release. */
int tfsp_exporter_ready(PyObject *module);

/* dlpack_release.c: the DLPack deleters and the capsule destructor. */
int tfsp_dlpack_ready(PyObject *module);

/* dlpack.h, ABI version 1: the layout the capsules' readers need. */
typedef struct {
    void *data;
    int32_t device[2];
    int32_t ndim;
    uint8_t dtype[4];
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
    uint32_t version[2];
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* dlpack_take.c: a capsule of the common kind read and taken in C. */
int tfsp_take_ready(PyObject *module);

/* hot_paths.c: quietly, alloc, free_on_slot and gemm without ctypes. */
int tfsp_hot_ready(PyObject *module);

#endif

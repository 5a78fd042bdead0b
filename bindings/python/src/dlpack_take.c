/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Another library's DLPack capsule of the common kind (a torch.Tensor's:
 * CUDA or managed memory, float32 or float64, one lane, C order), read and
 * taken without ctypes (_foreign.take_capsule):
 *
 *   take_dlpack(capsule, writable)  -> (address, nbytes, managed, versioned)
 *                                      with the capsule renamed "used_...":
 *                                      the caller owns the tensor; or None,
 *                                      the capsule untouched, for anything
 *                                      else (Python then reads it and says
 *                                      what is wrong)
 *   dlpack_delete(managed, versioned)  the tensor's deleter, if any
 */
#include "speedups.h"

enum { KDL_CUDA = 2, KDL_CUDA_MANAGED = 13, KDL_FLOAT = 2, FLAG_READ_ONLY = 1 };

/* Bytes of a C-order tensor of float32/64 in CUDA memory, else 0 (and
 * for zero elements, where nothing is read, the answer is still 0). */
static int common_bytes(const DLTensor *t, uint64_t *nbytes) {
    int64_t expected = 1, count = 1;
    int i;
    if (t->device[0] != KDL_CUDA && t->device[0] != KDL_CUDA_MANAGED) return 0;
    if (t->dtype[0] != KDL_FLOAT || (t->dtype[1] != 32 && t->dtype[1] != 64) ||
        t->dtype[2] != 1 || t->dtype[3] != 0)
        return 0;
    if (t->ndim < 0 || (t->ndim > 0 && t->shape == NULL)) return 0;
    for (i = t->ndim - 1; i >= 0; i--) {
        int64_t n = t->shape[i];
        if (n < 0) return 0;
        if (t->strides != NULL && n > 1 && t->strides[i] != expected) return 0;
        expected *= n;
        count *= n;
    }
    *nbytes = (uint64_t)count * (t->dtype[1] / 8);
    return 1;
}

static PyObject *sp_take_dlpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const char *name, *used;
    const DLTensor *t;
    void *managed;
    uint64_t nbytes = 0;
    int versioned, writable;
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "take_dlpack(capsule, writable)");
        return NULL;
    }
    writable = PyObject_IsTrue(args[1]);
    if (writable < 0) return NULL;
    if (!PyCapsule_CheckExact(args[0])) Py_RETURN_NONE;
    name = PyCapsule_GetName(args[0]);
    if (name == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    versioned = strcmp(name, "dltensor_versioned") == 0;
    if (!versioned && strcmp(name, "dltensor") != 0) Py_RETURN_NONE;
    managed = PyCapsule_GetPointer(args[0], name);
    if (managed == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (versioned) {
        const DLManagedTensorVersioned *v = managed;
        if (v->version[0] != 1 || (writable && (v->flags & FLAG_READ_ONLY))) Py_RETURN_NONE;
        t = &v->dl_tensor;
    } else {
        t = &((const DLManagedTensor *)managed)->dl_tensor;
    }
    if (!common_bytes(t, &nbytes)) Py_RETURN_NONE;
    /* From here the caller owns the tensor: the capsule no longer deletes it. */
    used = versioned ? "used_dltensor_versioned" : "used_dltensor";
    if (PyCapsule_SetName(args[0], used) < 0) return NULL;
    return Py_BuildValue("(KKKO)", (unsigned long long)((uintptr_t)t->data + t->byte_offset),
                         (unsigned long long)nbytes, (unsigned long long)(uintptr_t)managed,
                         versioned ? Py_True : Py_False);
}

static PyObject *sp_dlpack_delete(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long address;
    int versioned;
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "dlpack_delete(managed, versioned)");
        return NULL;
    }
    address = PyLong_AsUnsignedLongLong(args[0]);
    if (address == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    versioned = PyObject_IsTrue(args[1]);
    if (versioned < 0) return NULL;
    if (versioned) {
        DLManagedTensorVersioned *v = (DLManagedTensorVersioned *)(uintptr_t)address;
        if (v->deleter != NULL) v->deleter(v);
    } else {
        DLManagedTensor *m = (DLManagedTensor *)(uintptr_t)address;
        if (m->deleter != NULL) m->deleter(m);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"take_dlpack", (PyCFunction)(void (*)(void))sp_take_dlpack, METH_FASTCALL,
     "take_dlpack(capsule, writable) -> (address, nbytes, managed, versioned), or None"},
    {"dlpack_delete", (PyCFunction)(void (*)(void))sp_dlpack_delete, METH_FASTCALL,
     "dlpack_delete(managed, versioned): the tensor's deleter"},
    {NULL, NULL, 0, NULL},
};

int tfsp_take_ready(PyObject *module) { return PyModule_AddFunctions(module, methods); }

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The C end of the DLPack capsules DeviceBuffer.__dlpack__ hands out
 * (_interop.py): the tensors' deleters and the capsules' destructor.
 *
 * A tensor's manager_ctx is a Python object (the export: it pins the
 * buffer's memory) with one reference the tensor owns; the deleter drops
 * it.  A capsule destroyed unconsumed (still named "dltensor" or
 * "dltensor_versioned") runs its tensor's deleter.  Both may run while the
 * consumer has an exception pending (it drops the capsule on its way out
 * with an error set): they keep that exception, as the capsule API
 * requires of a destructor.  Addresses for Python: DELETER,
 * DELETER_VERSIONED, CAPSULE_DESTRUCTOR. */
#include "speedups.h"

/* Drop the reference a tensor owns, keeping the pending exception. */
static void drop_context(void *context) {
    PyGILState_STATE gil;
    PyObject *type, *value, *tb;
    if (context == NULL || !Py_IsInitialized()) return; /* leaked at shutdown */
    gil = PyGILState_Ensure();
    PyErr_Fetch(&type, &value, &tb);
    Py_DECREF((PyObject *)context);
    PyErr_Restore(type, value, tb);
    PyGILState_Release(gil);
}

static void deleter(DLManagedTensor *self) {
    if (self != NULL) drop_context(self->manager_ctx);
}

static void deleter_versioned(DLManagedTensorVersioned *self) {
    if (self != NULL) drop_context(self->manager_ctx);
}

/* Called with the GIL held, possibly with an exception set. */
static void capsule_destructor(PyObject *capsule) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
        if (t->deleter != NULL) t->deleter(t);
    } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned *t = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (t->deleter != NULL) t->deleter(t);
    }
    PyErr_Restore(type, value, tb);
}

static int add_address(PyObject *module, const char *name, void *address) {
    PyObject *value = PyLong_FromVoidPtr(address);
    if (value == NULL) return -1;
    if (PyModule_AddObject(module, name, value) < 0) {
        Py_DECREF(value);
        return -1;
    }
    return 0;
}

int tfsp_dlpack_ready(PyObject *module) {
    if (add_address(module, "DELETER", (void *)(uintptr_t)deleter) < 0) return -1;
    if (add_address(module, "DELETER_VERSIONED", (void *)(uintptr_t)deleter_versioned) < 0)
        return -1;
    return add_address(module, "CAPSULE_DESTRUCTOR", (void *)(uintptr_t)capsule_destructor);
}

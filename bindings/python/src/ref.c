/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Ref: the pointer of one library reference (a tf_runtime *, tf_event *,
 * tf_module *, tf_program *) as an object.  The binding's owner objects
 * hold their Ref until close(); every call passes the Ref itself as the
 * handle, so a call in flight keeps it alive, and the reference is released
 * when the Ref dies (a weakref finalizer in _handles.py): "NOTE calls hold
 * their handle" there.  Typed ctypes calls take it through _as_parameter_;
 * the hot calls of _speedups.c read the pointer directly. */
#include "speedups.h"

#include <stddef.h>

static PyObject *ref_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *value;
    tfsp_Ref *self;
    void *ptr;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "Ref(handle) takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:Ref", &value)) return NULL;
    ptr = PyLong_AsVoidPtr(value);
    if (ptr == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a Ref of NULL");
        return NULL;
    }
    self = (tfsp_Ref *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->ptr = ptr;
    self->weakreflist = NULL;
    return (PyObject *)self;
}

static void ref_dealloc(PyObject *o) {
    tfsp_Ref *self = (tfsp_Ref *)o;
    /* Runs the finalizer that releases the reference. */
    if (self->weakreflist != NULL) PyObject_ClearWeakRefs(o);
    Py_TYPE(o)->tp_free(o);
}

static PyObject *ref_value(PyObject *o, void *closure) {
    (void)closure;
    return PyLong_FromVoidPtr(((tfsp_Ref *)o)->ptr);
}

static PyObject *ref_repr(PyObject *o) {
    return PyUnicode_FromFormat("<tenferro_gpu Ref %p>", ((tfsp_Ref *)o)->ptr);
}

static PyGetSetDef ref_getset[] = {
    {"value", ref_value, NULL, "the pointer as an int", NULL},
    {"_as_parameter_", ref_value, NULL, "what ctypes passes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject tfsp_RefType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tenferro_gpu._speedups.Ref",
    .tp_basicsize = sizeof(tfsp_Ref),
    .tp_dealloc = ref_dealloc,
    .tp_repr = ref_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One library reference the binding owns (see _handles.py).",
    .tp_weaklistoffset = offsetof(tfsp_Ref, weakreflist),
    .tp_getset = ref_getset,
    .tp_new = ref_new,
};

int tfsp_ref_ready(PyObject *module) {
    if (PyType_Ready(&tfsp_RefType) < 0) return -1;
    Py_INCREF(&tfsp_RefType);
    if (PyModule_AddObject(module, "Ref", (PyObject *)&tfsp_RefType) < 0) {
        Py_DECREF(&tfsp_RefType);
        return -1;
    }
    return PyModule_AddIntConstant(module, "CLOSED", TFSP_CLOSED);
}

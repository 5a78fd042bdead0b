/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* A HostBuffer's buffer protocol, counted (host.py; "NOTE memory is freed
 * once" in _claims.py).
 *
 * Exporter(address, nbytes, on_idle) exports the block: each export
 * (memoryview, numpy.frombuffer, the binding's own borrows) holds the
 * Exporter, which counts them.  close() refuses new exports; once it was
 * called, the release of the last export calls on_idle() (which gives the
 * block back), with the caller's pending exception kept.
 *
 * export_through(cls) makes the HostBuffer class `cls` (a ctypes array type
 * the binding made) export through its instances' `_exporter`: ctypes
 * counts nothing itself.  Only the binding's own heap types are changed. */
#include "speedups.h"

typedef struct {
    PyObject_HEAD char *buf;
    Py_ssize_t len;
    Py_ssize_t exports;
    int closed;
    PyObject *on_idle;
} Exporter;

static PyTypeObject ExporterType;

static PyObject *exporter_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *address, *on_idle;
    Py_ssize_t len;
    Exporter *self;
    void *buf;
    (void)kwargs;
    if (!PyArg_ParseTuple(args, "OnO:Exporter", &address, &len, &on_idle)) return NULL;
    buf = PyLong_AsVoidPtr(address);
    if (buf == NULL && PyErr_Occurred()) return NULL;
    if (len < 0 || !PyCallable_Check(on_idle)) {
        PyErr_SetString(PyExc_ValueError, "Exporter(address, nbytes >= 0, callable)");
        return NULL;
    }
    self = (Exporter *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->buf = buf;
    self->len = len;
    Py_INCREF(on_idle);
    self->on_idle = on_idle;
    return (PyObject *)self;
}

/* Not garbage-collected, on purpose: nothing it holds refers back to it,
 * and a collection that cleared on_idle before the last view's release
 * would lose the end of the claim. */
static void exporter_dealloc(PyObject *o) {
    Py_CLEAR(((Exporter *)o)->on_idle);
    Py_TYPE(o)->tp_free(o);
}

static int exporter_getbuffer(PyObject *o, Py_buffer *view, int flags) {
    Exporter *self = (Exporter *)o;
    if (self->closed) {
        PyErr_SetString(PyExc_BufferError, "the tenferro_gpu.HostBuffer is closed");
        view->obj = NULL;
        return -1;
    }
    if (PyBuffer_FillInfo(view, o, self->buf, self->len, 0, flags) < 0) return -1;
    self->exports++;
    return 0;
}

/* on_idle(), keeping whatever exception the releasing code has pending
 * (a view dropped while an exception propagates). */
static void call_on_idle(Exporter *self) {
    PyObject *type, *value, *tb, *fn = self->on_idle, *result;
    if (fn == NULL) return;
    PyErr_Fetch(&type, &value, &tb);
    Py_INCREF(fn);
    result = PyObject_CallObject(fn, NULL);
    if (result == NULL)
        PyErr_WriteUnraisable(fn);
    else
        Py_DECREF(result);
    Py_DECREF(fn);
    PyErr_Restore(type, value, tb);
}

static void exporter_releasebuffer(PyObject *o, Py_buffer *view) {
    Exporter *self = (Exporter *)o;
    (void)view;
    if (--self->exports == 0 && self->closed) call_on_idle(self);
}

static PyObject *exporter_close(PyObject *o, PyObject *unused) {
    Exporter *self = (Exporter *)o;
    (void)unused;
    self->closed = 1;
    return PyBool_FromLong(self->exports == 0);
}

static PyObject *exporter_exports(PyObject *o, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(((Exporter *)o)->exports);
}

static PyMethodDef exporter_methods[] = {
    {"close", exporter_close, METH_NOARGS,
     "Refuse new exports; True when none is alive (on_idle then never runs)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef exporter_getset[] = {
    {"exports", exporter_exports, NULL, "exports alive", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyBufferProcs exporter_buffer = {exporter_getbuffer, exporter_releasebuffer};

static PyTypeObject ExporterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tenferro_gpu._speedups.Exporter",
    .tp_basicsize = sizeof(Exporter),
    .tp_dealloc = exporter_dealloc,
    .tp_as_buffer = &exporter_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A HostBuffer's memory, exported and counted (host_export.c).",
    .tp_methods = exporter_methods,
    .tp_getset = exporter_getset,
    .tp_new = exporter_new,
};

/* A HostBuffer's bf_getbuffer: its Exporter's. */
static int host_getbuffer(PyObject *host, Py_buffer *view, int flags) {
    PyObject *exporter = PyObject_GetAttrString(host, "_exporter");
    int rc;
    view->obj = NULL;
    if (exporter == NULL) return -1;
    if (!PyObject_TypeCheck(exporter, &ExporterType)) {
        PyErr_SetString(PyExc_BufferError, "the tenferro_gpu.HostBuffer is closed");
        Py_DECREF(exporter);
        return -1;
    }
    rc = PyObject_GetBuffer(exporter, view, flags);
    Py_DECREF(exporter);
    return rc;
}

/* Never called: a HostBuffer's views name the Exporter as their object,
 * whose release counts.  It is there because consumers look for it: NumPy
 * keeps a memoryview (an export) of an object with bf_releasebuffer, and
 * only the object itself otherwise (numpy.frombuffer). */
static void host_releasebuffer(PyObject *host, Py_buffer *view) {
    (void)host;
    (void)view;
}

static PyObject *export_through(PyObject *module, PyObject *cls) {
    PyTypeObject *type = (PyTypeObject *)cls;
    (void)module;
    if (!PyType_Check(cls) || !(type->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        type->tp_as_buffer == NULL || type->tp_as_buffer->bf_getbuffer == NULL) {
        PyErr_SetString(PyExc_TypeError, "export_through(a heap type with a buffer)");
        return NULL;
    }
    type->tp_as_buffer->bf_getbuffer = host_getbuffer;
    type->tp_as_buffer->bf_releasebuffer = host_releasebuffer;
    PyType_Modified(type);
    Py_RETURN_NONE;
}

static PyMethodDef functions[] = {
    {"export_through", export_through, METH_O,
     "export_through(cls): instances export through their _exporter"},
    {NULL, NULL, 0, NULL},
};

int tfsp_exporter_ready(PyObject *module) {
    if (PyType_Ready(&ExporterType) < 0) return -1;
    Py_INCREF(&ExporterType);
    if (PyModule_AddObject(module, "Exporter", (PyObject *)&ExporterType) < 0) {
        Py_DECREF(&ExporterType);
        return -1;
    }
    return PyModule_AddFunctions(module, functions);
}

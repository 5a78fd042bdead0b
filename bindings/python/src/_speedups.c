/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Optional accelerator of the Python binding: the four calls whose
 * per-call cost matters (tf_runtime_stream, tf_runtime_sync,
 * tf_download_scalar, tf_with_context) without ctypes' per-call argument
 * conversion and libffi call; and what ctypes cannot do (ref.c,
 * host_export.c, dlpack_release.c), and the hot paths of a DeviceBuffer's
 * life and a small GEMM (hot_paths.c).
 *
 * It links nothing: tenferro_gpu/_capi.py passes the addresses of the
 * functions of the library it loaded to bind(), so both paths call the same
 * library.  Built by `make python-speedups` (bindings/python/tools/build_speedups.py) when
 * the interpreter's headers are there; without it the package uses ctypes
 * alone, with the same behaviour.  Every call releases the GIL around the
 * library call, as ctypes does; with_context's callback takes it back.
 *
 * The handle is the caller's Ref (ref.c), held by the call; None (closed
 * by another thread after the caller looked) answers CLOSED.  Failures are
 * returned, not raised, so that Python reads the library's error record
 * right after the call (_capi.fail):
 *   stream(ref)                   -> the CUstream (int >= 0), or -status
 *   sync(ref)                     -> status
 *   download_scalar(ref, address, size) -> bytes, or the status (int)
 *   with_context(ref, frame)      -> status; frame is the binding's
 *       [callable, args, kwargs, result, exception] list (_callbacks.py)
 */
#include "speedups.h"

#include <stdint.h>

typedef int32_t (*stream_fn)(void *rt, void **out);
typedef int32_t (*sync_fn)(void *rt);
typedef int32_t (*scalar_fn)(void *rt, uint64_t src, void *out, size_t len);
typedef int32_t (*context_fn)(void *rt, int32_t (*fn)(void *), void *user_data);

static stream_fn p_stream;
static sync_fn p_sync;
static scalar_fn p_scalar;
static context_fn p_context;

/* What the callback returns when the callable raised (_callbacks.py). */
#define CALLBACK_RAISED (-1)
#define SCALAR_MAX 16

/* The pointer of Ref `value`; NULL for None (closed), or with TypeError. */
static void *pointer_of(PyObject *value) {
    if (Py_TYPE(value) == &tfsp_RefType) return ((tfsp_Ref *)value)->ptr;
    if (value != Py_None) PyErr_SetString(PyExc_TypeError, "the handle must be a Ref");
    return NULL;
}

#define CLOSED_OR_RAISED() (PyErr_Occurred() ? NULL : PyLong_FromLong(TFSP_CLOSED))

static PyObject *sp_bind(PyObject *self, PyObject *args) {
    unsigned long long a, b, c, d;
    (void)self;
    if (!PyArg_ParseTuple(args, "KKKK", &a, &b, &c, &d)) return NULL;
    p_stream = (stream_fn)(uintptr_t)a;
    p_sync = (sync_fn)(uintptr_t)b;
    p_scalar = (scalar_fn)(uintptr_t)c;
    p_context = (context_fn)(uintptr_t)d;
    Py_RETURN_NONE;
}

static PyObject *sp_stream(PyObject *self, PyObject *handle) {
    void *rt = pointer_of(handle), *out = NULL;
    int32_t st;
    (void)self;
    if (rt == NULL) return CLOSED_OR_RAISED();
    Py_BEGIN_ALLOW_THREADS st = p_stream(rt, &out);
    Py_END_ALLOW_THREADS if (st != 0) return PyLong_FromLong(-(long)st);
    return PyLong_FromVoidPtr(out);
}

static PyObject *sp_sync(PyObject *self, PyObject *handle) {
    void *rt = pointer_of(handle);
    int32_t st;
    (void)self;
    if (rt == NULL) return CLOSED_OR_RAISED();
    Py_BEGIN_ALLOW_THREADS st = p_sync(rt);
    Py_END_ALLOW_THREADS return PyLong_FromLong(st);
}

static PyObject *sp_download_scalar(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned char out[SCALAR_MAX];
    void *rt;
    unsigned long long src;
    Py_ssize_t len;
    int32_t st;
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "download_scalar(ref, address, size)");
        return NULL;
    }
    rt = pointer_of(args[0]);
    if (rt == NULL) return CLOSED_OR_RAISED();
    src = PyLong_AsUnsignedLongLong(args[1]);
    if (src == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    len = PyLong_AsSsize_t(args[2]);
    if (len < 0 || len > SCALAR_MAX) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "size is 0 .. 16");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS st = p_scalar(rt, (uint64_t)src, out, (size_t)len);
    Py_END_ALLOW_THREADS if (st != 0) return PyLong_FromLong(st);
    return PyBytes_FromStringAndSize((const char *)out, len);
}

/* The callable's exception, with its traceback, into frame[4]. */
static void keep_exception(PyObject *frame) {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *value = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
#endif
    if (value == NULL) {
        Py_INCREF(Py_None);
        value = Py_None;
    }
    PyList_SetItem(frame, 4, value); /* steals value */
}

static int32_t call_frame(void *user_data) {
    PyObject *frame = (PyObject *)user_data, *fn, *args, *kwargs, *result;
    int32_t rc = 0;
    PyGILState_STATE gil = PyGILState_Ensure();
    fn = PyList_GET_ITEM(frame, 0);
    args = PyList_GET_ITEM(frame, 1);
    kwargs = PyList_GET_ITEM(frame, 2);
    result = PyObject_Call(fn, args, PyDict_GET_SIZE(kwargs) ? kwargs : NULL);
    if (result == NULL) {
        keep_exception(frame);
        rc = CALLBACK_RAISED;
    } else {
        PyList_SetItem(frame, 3, result); /* steals result */
    }
    PyGILState_Release(gil);
    return rc;
}

static PyObject *sp_with_context(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *rt;
    PyObject *frame;
    int32_t st;
    (void)self;
    if (nargs != 2 || !PyList_CheckExact(args[1]) || PyList_GET_SIZE(args[1]) != 5 ||
        !PyTuple_Check(PyList_GET_ITEM(args[1], 1)) || !PyDict_Check(PyList_GET_ITEM(args[1], 2))) {
        PyErr_SetString(PyExc_TypeError, "with_context(ref, frame)");
        return NULL;
    }
    rt = pointer_of(args[0]);
    if (rt == NULL) return CLOSED_OR_RAISED();
    frame = args[1];
    Py_INCREF(frame); /* alive for the whole call whatever the callable does */
    Py_BEGIN_ALLOW_THREADS st = p_context(rt, call_frame, frame);
    Py_END_ALLOW_THREADS Py_DECREF(frame);
    return PyLong_FromLong(st);
}

static PyMethodDef methods[] = {
    {"bind", sp_bind, METH_VARARGS, "bind(stream, sync, download_scalar, with_context addresses)"},
    {"stream", sp_stream, METH_O, "stream(ref) -> CUstream, or -status"},
    {"sync", sp_sync, METH_O, "sync(ref) -> status"},
    {"download_scalar", (PyCFunction)(void (*)(void))sp_download_scalar, METH_FASTCALL,
     "download_scalar(ref, address, size) -> bytes, or status"},
    {"with_context", (PyCFunction)(void (*)(void))sp_with_context, METH_FASTCALL,
     "with_context(ref, frame) -> status"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_speedups",
    "The binding's hot calls without ctypes (optional; see _speedups.c).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (tfsp_ref_ready(m) < 0 || tfsp_exporter_ready(m) < 0 || tfsp_dlpack_ready(m) < 0 ||
        tfsp_hot_ready(m) < 0 || tfsp_take_ready(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The extension's part of the per-call costs of a DeviceBuffer's life and
 * a small GEMM (docs/python.md, "Per-call overhead"):
 *
 *   bind_hot(addresses...)           the library's functions, as _capi.py
 *                                    loaded them, and the cleanup note hook
 *   quietly(fn, *args)               _capi.quietly: fn(*args) as cleanup; the
 *                                    thread's error record compared before
 *                                    and after in C (two tf_last_error
 *                                    calls), the note hook called only when
 *                                    the cleanup replaced it
 *   alloc(ref, nbytes)               tf_runtime_current_slot + tf_alloc in
 *                                    one GIL release -> (address, slot), or
 *                                    the status (int)
 *   free_on_slot(handle, ptr, slot)  tf_free in order on `slot`, binding that
 *                                    slot first when the call's is another
 *                                    -> status; handle: a Ref or an int the
 *                                    caller holds
 *   gemm(ref, fn, double, opa, opb, m, n, k, alpha, a, lda, b, ldb, beta,
 *        c, ldc)                     tf_cublas_enqueue in host pointer mode
 *                                    whose callback (C, no GIL) calls the
 *                                    library's cublas<S|D>gemm_v2 at `fn`
 *                                    -> status
 *
 * Failures are returned, not raised, as in _speedups.c, so that Python
 * reads the error record right after the call. */
#include "speedups.h"

#include <stdint.h>
#include <string.h>

typedef int32_t (*slot_fn)(void *rt, int32_t *out);
typedef int32_t (*alloc_fn)(void *rt, size_t bytes, uint64_t *out);
typedef int32_t (*free_fn)(void *rt, uint64_t ptr);
typedef int32_t (*bind_slot_fn)(void *rt, int32_t slot, void **out);
typedef int32_t (*release_fn)(void *rt);
typedef void (*info_init_fn)(void *info, size_t size);
typedef int32_t (*last_error_fn)(void *info);
typedef int32_t (*cublas_cb)(void *handle, void *stream, void *user_data);
typedef int32_t (*enqueue_fn)(void *rt, int32_t mode, cublas_cb fn, void *user_data);
typedef int (*sgemm_fn)(void *, int, int, int, int, int, const float *, uint64_t, int,
                        uint64_t, int, const float *, uint64_t, int);
typedef int (*dgemm_fn)(void *, int, int, int, int, int, const double *, uint64_t, int,
                        uint64_t, int, const double *, uint64_t, int);

static slot_fn p_current_slot;
static alloc_fn p_alloc;
static free_fn p_free;
static bind_slot_fn p_bind_slot;
static release_fn p_release;
static info_init_fn p_info_init;
static last_error_fn p_last_error;
static enqueue_fn p_enqueue;
static PyObject *note_replaced; /* _capi._note_replaced(before, after) */

/* struct tf_error_info: 4 int32 fields, then 64 + 64 + 512 chars. */
#define ERROR_INFO_BYTES (16 + 64 + 64 + 512)
typedef struct {
    uint32_t struct_size;
    unsigned char rest[ERROR_INFO_BYTES - 4];
} error_info;

static PyObject *sp_bind_hot(PyObject *self, PyObject *args) {
    unsigned long long a[8];
    PyObject *note;
    (void)self;
    if (!PyArg_ParseTuple(args, "KKKKKKKKO", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6],
                          &a[7], &note))
        return NULL;
    p_current_slot = (slot_fn)(uintptr_t)a[0];
    p_alloc = (alloc_fn)(uintptr_t)a[1];
    p_free = (free_fn)(uintptr_t)a[2];
    p_bind_slot = (bind_slot_fn)(uintptr_t)a[3];
    p_release = (release_fn)(uintptr_t)a[4];
    p_info_init = (info_init_fn)(uintptr_t)a[5];
    p_last_error = (last_error_fn)(uintptr_t)a[6];
    p_enqueue = (enqueue_fn)(uintptr_t)a[7];
    Py_INCREF(note);
    Py_XSETREF(note_replaced, note);
    Py_RETURN_NONE;
}

static void snapshot(error_info *info) {
    memset(info, 0, sizeof *info);
    p_info_init(info, sizeof *info);
    p_last_error(info);
}

/* After the cleanup: note the replaced record, keeping fn's exception. */
static int note_if_replaced(const error_info *before) {
    error_info after;
    PyObject *type, *value, *tb, *r;
    snapshot(&after);
    if (memcmp(before, &after, sizeof after) == 0) return 0;
    PyErr_Fetch(&type, &value, &tb);
    r = PyObject_CallFunction(note_replaced, "y#y#", (const char *)before,
                              (Py_ssize_t)sizeof *before, (const char *)&after,
                              (Py_ssize_t)sizeof after);
    if (r == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    Py_DECREF(r);
    PyErr_Restore(type, value, tb);
    return 0;
}

static PyObject *sp_quietly(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    error_info before;
    PyObject *result;
    (void)self;
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "quietly(fn, *args)");
        return NULL;
    }
    snapshot(&before);
    result = PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), NULL);
    if (note_if_replaced(&before) < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    return result;
}

/* The runtime pointer of a Ref, or of an int; NULL for None (closed). */
static void *runtime_of(PyObject *value) {
    if (Py_TYPE(value) == &tfsp_RefType) return ((tfsp_Ref *)value)->ptr;
    if (PyLong_Check(value)) return PyLong_AsVoidPtr(value);
    if (value != Py_None) PyErr_SetString(PyExc_TypeError, "the handle must be a Ref or an int");
    return NULL;
}

#define CLOSED_OR_RAISED() (PyErr_Occurred() ? NULL : PyLong_FromLong(TFSP_CLOSED))

static PyObject *sp_alloc(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *rt;
    size_t nbytes;
    uint64_t ptr = 0;
    int32_t slot = -1, st;
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "alloc(ref, nbytes)");
        return NULL;
    }
    rt = runtime_of(args[0]);
    if (rt == NULL) return CLOSED_OR_RAISED();
    nbytes = PyLong_AsSize_t(args[1]);
    if (nbytes == (size_t)-1 && PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS st = p_current_slot(rt, &slot);
    if (st == 0) st = p_alloc(rt, nbytes, &ptr);
    Py_END_ALLOW_THREADS if (st != 0) return PyLong_FromLong(st);
    return Py_BuildValue("(Ki)", (unsigned long long)ptr, (int)slot);
}

static int32_t free_on(void *rt, uint64_t ptr, int32_t slot) {
    int32_t current = -1, st;
    void *bound = NULL;
    if (p_current_slot(rt, &current) == 0 && current == slot) return p_free(rt, ptr);
    st = p_bind_slot(rt, slot, &bound);
    if (st != 0) return st;
    st = p_free(bound, ptr);
    p_release(bound);
    return st;
}

static PyObject *sp_free_on_slot(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *rt;
    unsigned long long ptr;
    long slot;
    int32_t st;
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "free_on_slot(handle, ptr, slot)");
        return NULL;
    }
    rt = runtime_of(args[0]);
    if (rt == NULL) return CLOSED_OR_RAISED();
    ptr = PyLong_AsUnsignedLongLong(args[1]);
    if (ptr == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    slot = PyLong_AsLong(args[2]);
    if (slot == -1 && PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS st = free_on(rt, (uint64_t)ptr, (int32_t)slot);
    Py_END_ALLOW_THREADS return PyLong_FromLong(st);
}

/* One GEMM's arguments, on the caller's stack for the enqueue's length. */
typedef struct {
    uintptr_t fn;
    int is_double, opa, opb, m, n, k, lda, ldb, ldc;
    double alpha, beta;
    uint64_t a, b, c;
} gemm_call;

static int32_t run_gemm(void *handle, void *stream, void *user_data) {
    const gemm_call *g = (const gemm_call *)user_data;
    (void)stream;
    if (g->is_double)
        return ((dgemm_fn)g->fn)(handle, g->opa, g->opb, g->m, g->n, g->k, &g->alpha, g->a,
                                 g->lda, g->b, g->ldb, &g->beta, g->c, g->ldc);
    {
        const float alpha = (float)g->alpha, beta = (float)g->beta;
        return ((sgemm_fn)g->fn)(handle, g->opa, g->opb, g->m, g->n, g->k, &alpha, g->a, g->lda,
                                 g->b, g->ldb, &beta, g->c, g->ldc);
    }
}

static PyObject *sp_gemm(PyObject *self, PyObject *args) {
    PyObject *ref;
    void *rt;
    unsigned long long fn, a, b, c;
    gemm_call g;
    int32_t st;
    (void)self;
    if (!PyArg_ParseTuple(args, "OKpiiiiidKiKidKi", &ref, &fn, &g.is_double, &g.opa, &g.opb,
                          &g.m, &g.n, &g.k, &g.alpha, &a, &g.lda, &b, &g.ldb, &g.beta, &c,
                          &g.ldc))
        return NULL;
    rt = runtime_of(ref);
    if (rt == NULL) return CLOSED_OR_RAISED();
    g.fn = (uintptr_t)fn;
    g.a = a;
    g.b = b;
    g.c = c;
    Py_BEGIN_ALLOW_THREADS st = p_enqueue(rt, 0 /* TF_CUBLAS_POINTER_HOST */, run_gemm, &g);
    Py_END_ALLOW_THREADS return PyLong_FromLong(st);
}

static PyMethodDef methods[] = {
    {"bind_hot", sp_bind_hot, METH_VARARGS, "bind_hot(8 function addresses, note_replaced)"},
    {"quietly", (PyCFunction)(void (*)(void))sp_quietly, METH_FASTCALL,
     "quietly(fn, *args) -> fn(*args), as cleanup"},
    {"alloc", (PyCFunction)(void (*)(void))sp_alloc, METH_FASTCALL,
     "alloc(ref, nbytes) -> (address, slot), or status"},
    {"free_on_slot", (PyCFunction)(void (*)(void))sp_free_on_slot, METH_FASTCALL,
     "free_on_slot(handle, ptr, slot) -> status"},
    {"gemm", sp_gemm, METH_VARARGS, "gemm(ref, fn, double, opa, opb, m, n, k, alpha, a, lda, "
                                    "b, ldb, beta, c, ldc) -> status"},
    {NULL, NULL, 0, NULL},
};

int tfsp_hot_ready(PyObject *module) { return PyModule_AddFunctions(module, methods); }

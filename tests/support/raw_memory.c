/* SPDX-License-Identifier: MIT OR Apache-2.0 */
#include "support/raw_memory.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <string.h>

#include "support/test_support.h"

struct raw_memory_api {
    PFN_cuMemAlloc_v3020 alloc;
    PFN_cuMemFree_v3020 free;
    PFN_cuMemcpyHtoDAsync_v3020 htod;
    PFN_cuMemcpyDtoHAsync_v3020 dtoh;
    PFN_cuStreamSynchronize_v2000 sync;
};

static const struct raw_memory_api *api(void) {
    static struct raw_memory_api a;
    static int loaded;
    if (!loaded) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        PFN_cuGetProcAddress_v12000 gpa = NULL;
        if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
        assert_non_null(h);
        *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
        assert_non_null(gpa);
        gpa("cuMemAlloc", (void **)&a.alloc, 3020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
        gpa("cuMemFree", (void **)&a.free, 3020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
        gpa("cuMemcpyHtoDAsync", (void **)&a.htod, 3020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
        gpa("cuMemcpyDtoHAsync", (void **)&a.dtoh, 3020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
        gpa("cuStreamSynchronize", (void **)&a.sync, 2000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
        assert_true(a.alloc && a.free && a.htod && a.dtoh && a.sync);
        loaded = 1;
    }
    return &a;
}

struct op {
    CUdeviceptr dptr;
    size_t bytes;
    const void *src;
    void *dst;
    CUresult result;
};

static int32_t do_alloc(void *p) {
    struct op *o = p;
    return (int32_t)(o->result = api()->alloc(&o->dptr, o->bytes));
}

static int32_t do_free(void *p) {
    struct op *o = p;
    return (int32_t)(o->result = api()->free(o->dptr));
}

static int32_t do_htod(void *stream, void *p) {
    struct op *o = p;
    return (int32_t)(o->result = api()->htod(o->dptr, o->src, o->bytes, (CUstream)stream));
}

static int32_t do_dtoh(void *stream, void *p) {
    struct op *o = p;
    return (int32_t)(o->result = api()->dtoh(o->dst, o->dptr, o->bytes, (CUstream)stream));
}

uint64_t dev_alloc(tf_runtime *rt, size_t bytes) {
    struct op o;
    memset(&o, 0, sizeof o);
    o.bytes = bytes;
    assert_ok(tf_with_context(rt, do_alloc, &o));
    return o.dptr;
}

void dev_free(tf_runtime *rt, uint64_t dptr) {
    struct op o;
    memset(&o, 0, sizeof o);
    o.dptr = dptr;
    assert_ok(tf_with_context(rt, do_free, &o));
}

void dev_upload_async(tf_runtime *rt, uint64_t dst, const void *src, size_t bytes) {
    struct op o;
    memset(&o, 0, sizeof o);
    o.dptr = dst;
    o.src = src;
    o.bytes = bytes;
    assert_ok(tf_stream_enqueue(rt, do_htod, &o));
}

void dev_upload(tf_runtime *rt, uint64_t dst, const void *src, size_t bytes) {
    dev_upload_async(rt, dst, src, bytes);
    assert_ok(tf_runtime_sync(rt));
}

void dev_download_async(tf_runtime *rt, void *dst, uint64_t src, size_t bytes) {
    struct op o;
    memset(&o, 0, sizeof o);
    o.dptr = src;
    o.dst = dst;
    o.bytes = bytes;
    assert_ok(tf_stream_enqueue(rt, do_dtoh, &o));
}

void dev_download(tf_runtime *rt, void *dst, uint64_t src, size_t bytes) {
    dev_download_async(rt, dst, src, bytes);
    assert_ok(tf_runtime_sync(rt));
}

/* On the legacy default stream, which non-blocking slot streams do not
 * synchronize with. */
void dev_read_unordered(void *dst, uint64_t src, size_t bytes) {
    assert_int_equal(api()->dtoh(dst, src, bytes, NULL), CUDA_SUCCESS);
    assert_int_equal(api()->sync(NULL), CUDA_SUCCESS);
}

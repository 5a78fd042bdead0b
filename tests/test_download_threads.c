/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* When the system refuses to start copy threads, bulk uploads and
 * downloads still complete with the threads that did start (at least the
 * caller), and a warning says so once.
 *
 * This suite defines pthread_create: the dynamic linker then binds the
 * library's calls to it (the executable comes first in symbol lookup), and
 * it refuses on demand before handing over to the C library's.  Only calls
 * made from libtenferro_gpu are refused or counted, so threads the CUDA
 * driver starts are never affected. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"
#include "support/transfer_support.h"

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static atomic_int allowed = -1; /* threads still allowed to start; -1: all */

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                   void *arg) {
    create_fn real;
    Dl_info caller;
    if (dladdr(__builtin_return_address(0), &caller) && caller.dli_fname &&
        strstr(caller.dli_fname, "libtenferro_gpu")) {
        int left = atomic_load(&allowed);
        while (left > 0 && !atomic_compare_exchange_weak(&allowed, &left, left - 1)) {
        }
        if (left == 0) return EAGAIN;
    }
    *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
    return real(thread, attr, start, arg);
}

static void download_with_threads_refused(int may_start, uint32_t threads, const char *says) {
    const size_t n = (size_t)3 << 20;
    const int before = count_copy_threads();
    tf_runtime *rt = runtime_with(TF_DEFAULT_STREAM_SLOTS, threads, 256 << 10);
    uint64_t d = lib_alloc(rt, n);
    unsigned char *host = malloc(n);
    const char *warnings;
    fill_pattern(host, n, 5);
    atomic_store(&allowed, may_start);
    log_capture_start();
    assert_ok(tf_upload(rt, host, d, n)); /* staged: starts the threads */
    memset(host, 0, n);
    assert_ok(tf_download(rt, d, host, n));
    assert_ok(tf_download(rt, d, host, n));
    warnings = log_capture_stop();
    atomic_store(&allowed, -1);
    assert_pattern(host, n, 5);
    assert_non_null(strstr(warnings,
                           "tf_upload: the system refused to start a download copy "
                           "thread (pthread_create: "));
    assert_non_null(strstr(warnings, says));
    assert_null(strstr(strstr(warnings, "refused") + 1, "refused")); /* once */
    assert_int_equal(count_copy_threads(), before + may_start);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(copy_threads_settle(before), before);
    free(host);
}

static void some_threads_refused(void **state) {
    (void)state;
    download_with_threads_refused(2, 6, "use 3 threads instead of 6");
}

static void every_thread_refused(void **state) {
    (void)state;
    download_with_threads_refused(0, 4, "use 1 thread instead of 4");
}

/* The interposer itself works: with no refusal, every thread starts. */
static void no_refusal_no_warning(void **state) {
    const size_t n = (size_t)1 << 20;
    const int before = count_copy_threads();
    tf_runtime *rt = runtime_with(TF_DEFAULT_STREAM_SLOTS, 3, 0);
    uint64_t d = lib_alloc(rt, n);
    unsigned char *host = malloc(n);
    const char *warnings;
    (void)state;
    atomic_store(&allowed, 100);
    log_capture_start();
    assert_ok(tf_download(rt, d, host, n));
    warnings = log_capture_stop();
    assert_int_equal(atomic_load(&allowed), 98); /* our pthread_create ran twice */
    atomic_store(&allowed, -1);
    assert_string_equal(warnings, "");
    assert_int_equal(count_copy_threads(), before + 2);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(host);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(no_refusal_no_warning),
        TF_TEST(some_threads_refused),
        TF_TEST(every_thread_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

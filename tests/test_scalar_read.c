/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* tf_download_scalar's paths: a copy and a flag (cuStreamWriteValue32) on an
 * idle stream, the library's one-thread kernel behind queued work, a copy
 * and a stream wait where neither can run.  Each path's calls, ordering
 * after deferred work, the bounded spin and its blocking fallback, sticky
 * faults, every failure injected, and what a failure abandons. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/test_support.h"
#include "support/transfer_support.h"

#define MAX TF_SCALAR_DOWNLOAD_MAX_BYTES

static long live(int kind) { return tfd()->tfd_live(kind); }

static int logged(const char *entry) {
    size_t i, n = tfd()->tfd_log_count();
    int count = 0;
    for (i = 0; i < n; ++i) count += strcmp(tfd()->tfd_log_name(i), entry) == 0;
    return count;
}

/* The calls since the last tfd_log_clear, comma-joined. */
static const char *calls(void) {
    static char buf[1024];
    tfd()->tfd_log_format(buf, sizeof buf, 0);
    return buf;
}

/* Work queued on rt's slot stream that has not run: the stream is busy. */
static void make_busy(tf_runtime *rt, uint64_t scratch) {
    tfd()->tfd_set_execution(TFD_EXEC_DEFERRED);
    queue_memset(rt, scratch, 0x5A, 64);
}

/* A runtime and device memory holding a known pattern; the primary context
 * left current so the logs show only the read's own calls. */
struct fixture {
    tf_runtime *rt;
    uint64_t d, scratch;
    long hosts;
};

static void open_fixture(struct fixture *f) {
    unsigned char pattern[64];
    void *primary = NULL;
    f->hosts = live(TFD_HOST_ALLOCS);
    f->rt = new_runtime();
    f->d = lib_alloc(f->rt, 64);
    f->scratch = lib_alloc(f->rt, 64);
    fill_pattern(pattern, sizeof pattern, 9);
    assert_ok(tf_upload(f->rt, pattern, f->d, sizeof pattern));
    assert_ok(tf_runtime_sync(f->rt));
    assert_ok(tf_runtime_primary_context(f->rt, &primary));
    raw_set_current_context(primary);
}

static void close_fixture(struct fixture *f) {
    tfd()->tfd_set_execution(TFD_EXEC_DEFERRED);
    raw_set_current_context(NULL);
    lib_free(f->rt, f->scratch);
    lib_free(f->rt, f->d);
    assert_ok(tf_runtime_release(f->rt));
}

/* Reads [off, off + n) of the fixture's pattern and checks it and the
 * bytes after it. */
static void read_and_check(struct fixture *f, size_t off, size_t n) {
    unsigned char want[64], got[MAX + 4];
    fill_pattern(want, sizeof want, 9);
    memset(got, 0xEE, sizeof got);
    assert_ok(tf_download_scalar(f->rt, f->d + off, got, n));
    assert_memory_equal(got, want + off, n);
    assert_int_equal(got[n], 0xEE);
}

/* ---- the paths ------------------------------------------------------------ */

static void idle_stream_reads_with_a_copy_and_a_flag(void **state) {
    struct fixture f;
    size_t n;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    tfd()->tfd_set_execution(TFD_EXEC_SYNC);
    read_and_check(&f, 0, 4); /* makes the mailbox */
    tfd()->tfd_log_clear();
    read_and_check(&f, 3, 4);
    assert_string_equal(calls(),
                        "cuCtxGetCurrent,cuStreamQuery,cuMemcpyDtoHAsync,"
                        "cuStreamWriteValue32");
    for (n = 1; n <= MAX; ++n) read_and_check(&f, 17 + n, n);
    assert_int_equal(logged("cuStreamSynchronize") + logged("cuLaunchKernel"), 0);
    assert_int_equal(logged("cuMemHostAlloc"), 0);
    close_fixture(&f);
}

static void busy_stream_reads_with_the_kernel(void **state) {
    struct fixture f;
    size_t n;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    /* Queued while deferred, run by the first op queued once in sync mode:
     * the stream is busy when asked, and the kernel runs at its launch. */
    make_busy(f.rt, f.scratch);
    tfd()->tfd_set_execution(TFD_EXEC_SYNC);
    tfd()->tfd_log_clear();
    read_and_check(&f, 5, 8);
    assert_string_equal(calls(),
                        "cuCtxGetCurrent,cuMemHostAlloc,"
                        "cuMemHostGetDevicePointer,cuStreamQuery,cuModuleLoadDataEx,"
                        "cuModuleGetFunction,cuLaunchKernel");
    /* Deferred throughout: the kernel's flag cannot come while the host
     * spins, so each read also waits (and, slower than an idle read, keeps
     * the slot asking: NOTE [idle streak]). */
    for (n = 1; n <= MAX; ++n) {
        tfd()->tfd_set_execution(TFD_EXEC_DEFERRED);
        queue_memset(f.rt, f.scratch, (unsigned char)n, 64);
        tfd()->tfd_log_clear();
        read_and_check(&f, 40 - n, n);
        assert_string_equal(calls(),
                            "cuCtxGetCurrent,cuStreamQuery,cuLaunchKernel,cuStreamSynchronize");
    }
    assert_int_equal(live(TFD_MODULES), 1);
    close_fixture(&f);
    assert_int_equal(live(TFD_MODULES), 0); /* unloaded at teardown */
}

/* Deferred work: the flag cannot arrive while the host spins, so the read
 * falls back to the blocking wait, and still sees every op queued before. */
static void read_is_ordered_after_deferred_work(void **state) {
    struct fixture f;
    uint32_t word = 0;
    int k;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    tfd()->tfd_set_execution(TFD_EXEC_DEFERRED);
    for (k = 1; k <= 4; ++k) queue_memset(f.rt, f.scratch, (unsigned char)k, 64);
    tfd()->tfd_log_clear();
    assert_ok(tf_download_scalar(f.rt, f.scratch + 60, &word, 4));
    assert_int_equal(word, 0x04040404u);
    assert_int_equal(logged("cuLaunchKernel"), 1);
    assert_int_equal(logged("cuStreamSynchronize"), 1);
    assert_int_equal(tfd()->tfd_pending(NULL), 0);
    /* Idle now, yet deferred: copy and flag, then the wait. */
    tfd()->tfd_log_clear();
    word = 0;
    assert_ok(tf_download_scalar(f.rt, f.scratch + 4, &word, 4));
    assert_int_equal(word, 0x04040404u);
    assert_string_equal(calls(),
                        "cuCtxGetCurrent,cuStreamQuery,cuMemcpyDtoHAsync,"
                        "cuStreamWriteValue32,cuStreamSynchronize");
    close_fixture(&f);
}

/* Microseconds since `t0`. */
static double us_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)(t.tv_sec - t0->tv_sec) + 1e-3 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* After 8 reads in a row as quick as on an idle stream
 * (src/transfer/scalar_read.h, NOTE [idle streak]: within 12 us) a read takes
 * the copy-and-flag path without asking cuStreamQuery.  Work queued behind
 * its back is still read after: the flag arrives late, the blocking wait
 * runs, and the next read asks again.  Where a read through the double
 * itself takes longer than 12 us (valgrind) no streak can form: skipped. */
static void idle_streak_skips_the_query_until_work_shows_up(void **state) {
    struct fixture f;
    struct timespec t0;
    uint32_t word = 0;
    double slowest = 0;
    int k;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    tfd()->tfd_set_execution(TFD_EXEC_SYNC);
    read_and_check(&f, 0, 4); /* makes the mailbox; starts the streak */
    tfd()->tfd_log_clear();
    for (k = 1; k < 8; ++k) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        read_and_check(&f, (size_t)k, 4);
        if (us_since(&t0) > slowest) slowest = us_since(&t0);
    }
    if (slowest > 6) { /* half the window: a streak is not assured */
        close_fixture(&f);
        skip();
    }
    assert_int_equal(logged("cuStreamQuery"), 7);
    tfd()->tfd_log_clear();
    read_and_check(&f, 9, 4);
    assert_string_equal(calls(), "cuCtxGetCurrent,cuMemcpyDtoHAsync,cuStreamWriteValue32");
    /* Work the guess does not know about. */
    make_busy(f.rt, f.scratch);
    tfd()->tfd_log_clear();
    assert_ok(tf_download_scalar(f.rt, f.scratch + 8, &word, 4));
    assert_int_equal(word, 0x5A5A5A5Au);
    assert_string_equal(calls(),
                        "cuCtxGetCurrent,cuMemcpyDtoHAsync,cuStreamWriteValue32,"
                        "cuStreamSynchronize");
    tfd()->tfd_set_execution(TFD_EXEC_SYNC);
    tfd()->tfd_log_clear();
    read_and_check(&f, 10, 4);
    assert_int_equal(logged("cuStreamQuery"), 1); /* asks again */
    close_fixture(&f);
}

/* The double's background thread runs the ops while the host spins: every
 * read sees its own value, on both paths, whichever way it finished. */
static void spinning_reads_see_their_own_value(void **state) {
    struct fixture f;
    uint32_t word = 0;
    int k;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    tfd()->tfd_set_execution(TFD_EXEC_BACKGROUND);
    tfd()->tfd_set_background_delay_us(5);
    for (k = 1; k <= 50; ++k) {
        queue_memset(f.rt, f.scratch, (unsigned char)k, 64);
        assert_ok(tf_download_scalar(f.rt, f.scratch + (k % 60), &word, 4));
        assert_int_equal(word, 0x01010101u * (uint32_t)k);
        word = 0;
        assert_ok(tf_download_scalar(f.rt, f.scratch + 1, &word, 2)); /* idle or nearly */
        assert_int_equal(word, 0x0101u * (uint32_t)k);
    }
    close_fixture(&f);
}

/* ---- faults and failures ---------------------------------------------------- */

/* Work ahead of the read faults: the flag never comes, the wait after the
 * spin reports the fault. */
static void fault_ahead_of_the_read_is_reported(void **state) {
    struct fixture f;
    uint32_t out = 7;
    uint64_t doomed;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    read_and_check(&f, 0, 4); /* mailbox made */
    doomed = tfd()->tfd_device_alloc(0, 64);
    tfd()->tfd_set_execution(TFD_EXEC_DEFERRED);
    queue_memset(f.rt, doomed, 1, 64);
    tfd()->tfd_device_free(doomed); /* the memset faults when it runs */
    tfd()->tfd_log_clear();
    assert_failure(tf_download_scalar(f.rt, f.d, &out, 4), TF_ERROR_DEVICE_FAULT,
                   "tf_download_scalar", "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    assert_int_equal(out, 7);
    assert_int_equal(logged("cuStreamSynchronize"), 1);
    assert_failure(tf_download_scalar(f.rt, f.d, &out, 4), TF_ERROR_DEVICE_FAULT,
                   "tf_download_scalar", "unusable");
    raw_set_current_context(NULL);
    assert_ok(tf_runtime_release(f.rt));
}

/* A failure after the read was queued abandons the mailbox (the device may
 * still write it): the next read allocates another, teardown frees only
 * that one. */
static void failure_abandons_the_mailbox(const char *entry, int busy, tf_status expected) {
    struct fixture f;
    uint32_t out = 7;
    const long reclaimed = tfd()->tfd_reclaimed(TFD_HOST_ALLOCS);
    open_fixture(&f);
    tfd()->tfd_set_execution(TFD_EXEC_SYNC);
    read_and_check(&f, 0, 4);
    if (busy) make_busy(f.rt, f.scratch);
    assert_int_equal(live(TFD_HOST_ALLOCS) - f.hosts, 1);
    INJECT(entry, 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_download_scalar(f.rt, f.d, &out, 4), expected, "tf_download_scalar", entry,
                   "failed");
    assert_string_equal(tf_last_error_call(), entry);
    assert_int_equal(out, 7);
    tfd()->tfd_log_clear();
    read_and_check(&f, 1, 4);
    assert_int_equal(logged("cuMemHostAlloc"), 1);
    assert_int_equal(live(TFD_HOST_ALLOCS) - f.hosts, 2);
    close_fixture(&f);
    /* the abandoned one was never freed: it went with the context */
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
    assert_int_equal(tfd()->tfd_reclaimed(TFD_HOST_ALLOCS) - reclaimed, 1);
}

static void flag_write_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    failure_abandons_the_mailbox("cuStreamWriteValue32", 0, TF_ERROR_CUDA);
}

static void kernel_launch_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    failure_abandons_the_mailbox("cuLaunchKernel", 1, TF_ERROR_CUDA);
}

static void fallback_wait_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    failure_abandons_the_mailbox("cuStreamSynchronize", 1, TF_ERROR_CUDA);
}

/* The query fails before anything is queued: the mailbox stays. */
static void stream_query_failure(void **state) {
    struct fixture f;
    uint32_t out = 7;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    read_and_check(&f, 0, 4);
    INJECT("cuStreamQuery", 1, CUDA_ERROR_UNKNOWN, 1);
    tfd()->tfd_log_clear();
    assert_failure(tf_download_scalar(f.rt, f.d, &out, 4), TF_ERROR_CUDA, "tf_download_scalar",
                   "cuStreamQuery failed");
    assert_int_equal(out, 7);
    assert_int_equal(logged("cuMemcpyDtoHAsync") + logged("cuLaunchKernel"), 0);
    read_and_check(&f, 2, 4);
    assert_int_equal(logged("cuMemHostAlloc"), 0);
    assert_int_equal(live(TFD_HOST_ALLOCS) - f.hosts, 1);
    close_fixture(&f);
}

/* The mailbox's device address cannot be had: the allocation is freed and
 * the next read tries again. */
static void mailbox_mapping_failure(void **state) {
    struct fixture f;
    uint32_t out = 7;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    INJECT("cuMemHostGetDevicePointer", 1, CUDA_ERROR_UNKNOWN, 1);
    assert_failure(tf_download_scalar(f.rt, f.d, &out, 4), TF_ERROR_CUDA, "tf_download_scalar",
                   "cuMemHostGetDevicePointer failed");
    assert_int_equal(out, 7);
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
    read_and_check(&f, 0, 4);
    assert_int_equal(live(TFD_HOST_ALLOCS) - f.hosts, 1);
    close_fixture(&f);
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
}

/* The kernel cannot be loaded: one warning, then every busy read copies
 * and waits; the load is not tried again. */
static void kernel_load_failure_falls_back(const char *entry) {
    struct fixture f;
    const char *warnings;
    int k;
    open_fixture(&f);
    INJECT(entry, 1, CUDA_ERROR_INVALID_PTX, 1);
    log_capture_start();
    for (k = 0; k < 3; ++k) {
        make_busy(f.rt, f.scratch);
        tfd()->tfd_log_clear();
        read_and_check(&f, (size_t)k, 4);
        assert_int_equal(logged("cuLaunchKernel") + logged("cuModuleLoadDataEx"), 0 + (k == 0));
        assert_int_equal(logged("cuStreamSynchronize"), 1);
    }
    warnings = log_capture_stop();
    assert_non_null(strstr(warnings, "tf_download_scalar: "));
    assert_non_null(strstr(warnings, entry));
    assert_non_null(strstr(warnings, "of the scalar read kernel failed"));
    assert_null(strstr(strstr(warnings, "kernel failed") + 1, "kernel failed")); /* once */
    close_fixture(&f);
    assert_int_equal(live(TFD_MODULES), 0);
}

static void module_load_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    kernel_load_failure_falls_back("cuModuleLoadDataEx");
}

static void module_function_failure(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    kernel_load_failure_falls_back("cuModuleGetFunction");
}

/* A driver without cuStreamWriteValue32 (resolved once per process, hence
 * a child): idle reads copy and wait, with one warning. */
static int child_without_write_value(void) {
    struct fixture f;
    const char *warnings;
    tfd()->tfd_hide("cuStreamWriteValue32");
    open_fixture(&f);
    tfd()->tfd_set_execution(TFD_EXEC_SYNC);
    log_capture_start();
    read_and_check(&f, 0, 4);
    tfd()->tfd_log_clear();
    read_and_check(&f, 1, 4);
    if (strcmp(calls(),
               "cuCtxGetCurrent,cuStreamQuery,cuMemcpyDtoHAsync,"
               "cuStreamSynchronize") != 0)
        return 10;
    warnings = log_capture_stop();
    if (!strstr(warnings, "no cuStreamWriteValue32")) return 11;
    if (strstr(strstr(warnings, "no cuStreamWriteValue32") + 1, "no cuStreamWriteValue32"))
        return 12;
    close_fixture(&f);
    return 0;
}

static void missing_write_value_falls_back(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(run_child("without_write_value", NULL), 0);
}

/* ---- refusals: copy and wait, once, for the runtime ----------------------------
 * A driver that has cuStreamWriteValue32 may still refuse it (stream memory
 * operations off on the platform: CUDA_ERROR_NOT_SUPPORTED), and one that
 * maps host memory may refuse a mailbox's mapping.  The first refusal
 * switches the runtime to a copy and a stream wait, with one warning; the
 * read that met it still succeeds and keeps its mailbox. */

static int occurrences(const char *text, const char *what) {
    int n = 0;
    for (; (text = strstr(text, what)) != NULL; text += strlen(what)) ++n;
    return n;
}

/* 100 reads, idle and (when `busy`) behind queued work, all right; the
 * warning once; one mailbox. */
static void hundred_reads_after_a_refusal(struct fixture *f, int busy, const char *warning) {
    const char *warnings;
    int k;
    log_capture_start();
    for (k = 0; k < 100; ++k) {
        if (busy && k % 2) make_busy(f->rt, f->scratch);
        read_and_check(f, (size_t)(k % 40), 4);
    }
    warnings = log_capture_stop();
    assert_int_equal(occurrences(warnings, "tf_download_scalar: "), 1);
    assert_non_null(strstr(warnings, warning));
    assert_non_null(strstr(warnings, "a copy and a stream wait"));
    assert_int_equal(live(TFD_HOST_ALLOCS) - f->hosts, 1);
}

static void refused_flag_write_falls_back_once(void **state) {
    struct fixture f;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    INJECT("cuStreamWriteValue32", 1, CUDA_ERROR_NOT_SUPPORTED, 0);
    tfd()->tfd_log_clear();
    hundred_reads_after_a_refusal(&f, 0, "cuStreamWriteValue32 was refused");
    assert_int_equal(logged("cuStreamWriteValue32"), 1); /* asked once */
    assert_int_equal(tf_last_error_status(), TF_OK);
    close_fixture(&f);
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
}

/* The double refuses stream memory operations when the device attribute
 * says they are off, as such a platform does. */
static void stream_memory_operations_off_fall_back_once(void **state) {
    struct fixture f;
    (void)state;
    REQUIRE_DOUBLE();
    tfd()->tfd_set_attribute(0, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0);
    open_fixture(&f);
    tfd()->tfd_log_clear();
    hundred_reads_after_a_refusal(&f, 1, "cuStreamWriteValue32 was refused");
    assert_int_equal(logged("cuStreamWriteValue32"), 1);
    assert_true(logged("cuLaunchKernel") > 0); /* the busy path is the kernel still */
    close_fixture(&f);
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
}

static void refused_mapping_falls_back_once(void **state) {
    struct fixture f;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    INJECT("cuMemHostGetDevicePointer", 1, CUDA_ERROR_NOT_SUPPORTED, 0);
    tfd()->tfd_log_clear();
    hundred_reads_after_a_refusal(&f, 1, "cuMemHostGetDevicePointer");
    assert_int_equal(logged("cuMemHostGetDevicePointer"), 1);
    assert_int_equal(logged("cuStreamWriteValue32") + logged("cuLaunchKernel"), 0);
    close_fixture(&f);
    assert_int_equal(live(TFD_HOST_ALLOCS), f.hosts);
}

/* CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS gated the v1 stream memory
 * operations, which CUDA 12.0 (the oldest driver the library runs on)
 * removed; the v2 cuStreamWriteValue32 the library calls is on by default
 * on every platform.  So nothing is asked up front, and no attribute answer
 * can turn the flag write off: only a refusal does. */
static void stream_memory_operations_are_not_asked_up_front(void **state) {
    struct fixture f;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    tfd()->tfd_log_clear();
    read_and_check(&f, 0, 4);
    assert_int_equal(logged("cuDeviceGetAttribute"), 0);
    assert_int_equal(logged("cuStreamWriteValue32"), 1);
    close_fixture(&f);
}

/* A sticky fault the query reports: nothing queued, the runtime refuses. */
static void query_reports_a_device_fault(void **state) {
    struct fixture f;
    uint32_t out = 7;
    (void)state;
    REQUIRE_DOUBLE();
    open_fixture(&f);
    INJECT("cuStreamQuery", 1, CUDA_ERROR_ILLEGAL_ADDRESS, 1);
    assert_failure(tf_download_scalar(f.rt, f.d, &out, 4), TF_ERROR_DEVICE_FAULT,
                   "tf_download_scalar", "cuStreamQuery failed");
    assert_int_equal(out, 7);
    raw_set_current_context(NULL);
    assert_ok(tf_runtime_release(f.rt));
}

static const struct child_scenario scenarios[] = {
    {"without_write_value", child_without_write_value},
    {NULL, NULL},
};

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(idle_stream_reads_with_a_copy_and_a_flag),
        TF_TEST(busy_stream_reads_with_the_kernel),
        TF_TEST(read_is_ordered_after_deferred_work),
        TF_TEST(idle_streak_skips_the_query_until_work_shows_up),
        TF_TEST(spinning_reads_see_their_own_value),
        TF_TEST(fault_ahead_of_the_read_is_reported),
        TF_TEST(flag_write_failure),
        TF_TEST(kernel_launch_failure),
        TF_TEST(fallback_wait_failure),
        TF_TEST(stream_query_failure),
        TF_TEST(mailbox_mapping_failure),
        TF_TEST(module_load_failure),
        TF_TEST(module_function_failure),
        TF_TEST(missing_write_value_falls_back),
        TF_TEST(refused_flag_write_falls_back_once),
        TF_TEST(stream_memory_operations_off_fall_back_once),
        TF_TEST(refused_mapping_falls_back_once),
        TF_TEST(stream_memory_operations_are_not_asked_up_front),
        TF_TEST(query_reports_a_device_fault),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

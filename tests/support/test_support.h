/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Shared by the suites: mode detection, error assertions, log capture,
 * the raw driver for checking the thread's context, child processes. */
#ifndef TF_TEST_SUPPORT_H
#define TF_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
/* cmocka needs the four headers above first. */
#include <cmocka.h>

#include <cuda.h>

#include "support/double_link.h"
#include "tenferro_gpu.h"

/* ---- modes --------------------------------------------------------------- */

/* The double's control interface, or NULL against the real driver. */
#define DOUBLE() tfd()
/* Skips the calling test unless it runs against the double. */
#define REQUIRE_DOUBLE()                                               \
    do {                                                               \
        if (!tfd()) {                                                  \
            print_message("    (needs the driver double: skipped)\n"); \
            skip();                                                    \
        }                                                              \
    } while (0)
/* Fault injection through the double (cmocka's fail() macro shadows the
 * member name, hence the parentheses). */
#define INJECT(entry, nth, code, times) tfd()->tfd_fail((entry), (nth), (code), (times))
#define INJECT_AFTER(entry, nth, code, times) tfd()->tfd_fail_after((entry), (nth), (code), (times))
/* 1 when TF_TEST_MODE=gpu (tools/test/run-suites --gpu). */
int test_gpu_mode(void);

/* ---- per-test fixture ------------------------------------------------------
 *
 * Every suite lists its tests as TF_TEST(fn): each test starts from a clean
 * double and thread state and fails, by itself, when it leaves something
 * behind (docs/testing.md).  A suite with its own fixture calls test_setup
 * first in its setup and test_teardown last in its teardown:
 *
 *     static int up(void **s)   { test_setup(s); ...; return 0; }
 *     static int down(void **s) { ...; return test_teardown(s); }
 *     TF_TEST_FIXTURE(fn, up, down)
 */
#define TF_TEST(fn) cmocka_unit_test_setup_teardown(fn, test_setup, test_teardown)
#define TF_TEST_FIXTURE(fn, up, down) cmocka_unit_test_setup_teardown(fn, up, down)

/* Resets the double (tfd_reset: fault rules, counters, log, devices, and the
 * execution mode back to TFD_EXEC_DEFERRED after running queued work),
 * clears the thread's current context (through the real driver without
 * the double), restores the default log callback, clears the thread's last
 * error, and notes the objects alive now (the double only). */
int test_setup(void **state);
/* The double only: fails (returns -1 with a message naming what is left)
 * when the test left a primary context retained (a tf_runtime, tf_event or
 * tf_module not released) or a stream, event, device allocation, module,
 * cuBLAS handle, NVRTC program or context alive beyond what test_setup
 * noted; then releases the leftover primary retains so that the next test
 * starts clean.  Page-locked host blocks are not counted: the library leaks
 * them on purpose after failures (tf_download_scalar, tf_download).  In
 * every mode it clears the thread's context and restores the default log
 * callback. */
int test_teardown(void **state);
/* The older name of test_setup. */
int test_reset(void **state);
/* For a test that leaves something behind on purpose (the library's leak
 * contract: a teardown that cannot prove the device idle leaks, and so
 * on): `count` more retains of `device`'s primary context, or `count` more
 * live objects of a tfd_kind, are expected at test_teardown.  Retains are
 * compared first and then dropped, so the objects of a leaked runtime's
 * context need no declaration of their own: the context takes them along.
 * No effect without the double. */
void test_leaves_retained(int device, int count);
void test_leaves_live(int kind, long count);

/* ---- errors ------------------------------------------------------------ */

/* Asserts `st == expected` and that the thread's last error names `op` as
 * its operation and contains each of the NULL-terminated fragments. */
#define assert_failure(st, expected, op, ...) \
    assert_failure_at((st), (expected), (op), __FILE__, __LINE__, __VA_ARGS__, (const char *)0)
void assert_failure_at(tf_status st, tf_status expected, const char *op, const char *file, int line,
                       ...);
#define assert_ok(st) assert_ok_at((st), __FILE__, __LINE__)
void assert_ok_at(tf_status st, const char *file, int line);

/* Drops a status on purpose: for a call made for what it does to the
 * library's state (a thread that keeps a load or a lock busy while the test
 * forks), whose outcome the test does not judge.  Every other status is
 * asserted.  The public functions are TF_NODISCARD, and GCC's
 * warn_unused_result in C ignores a (void) cast; passing the status on is a
 * use. */
static inline void ignore_status(tf_status st) { (void)st; }

/* ---- log capture ----------------------------------------------------- */

/* Installs a log callback that collects messages (joined by '\n'). */
void log_capture_start(void);
/* Everything captured since start; restores the default callback. */
const char *log_capture_stop(void);

/* ---- the thread's current context, through whichever driver is loaded -- */

void *raw_current_context(void);
void raw_set_current_context(void *ctx);
/* A non-primary context on device 0 that is NOT left current. */
void *raw_create_context(void);
void raw_destroy_context(void *ctx);

/* Entry point `name` of the CUDA version `version` from whichever
 * libcuda.so.1 is loaded (the double or the real driver), or NULL. */
void *raw_driver_entry(const char *name, int version);
/* One retain of `device`'s primary context, or its release, through the
 * loaded driver (keeps the context, and the memory in it, alive across the
 * release of every runtime); fails the test on error. */
void raw_retain_primary(int device);
void raw_release_primary(int device);

/* ---- runtimes -------------------------------------------------------- */

/* tf_runtime_new(0) that fails the test on error. */
tf_runtime *new_runtime(void);
tf_runtime *new_runtime_with_slots(uint32_t slots);

/* ---- child processes ------------------------------------------------- */

/* In a child scenario (which returns its exit status): returns 1 after
 * printing the condition and the last error unless `cond` holds. */
#define SCENARIO_CHECK(cond)                                                                  \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, \
                    #cond, tf_last_error_message());                                          \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)

/* If this process was started by run_child, runs the named scenario from
 * `scenarios` and exits with its result; call first thing in main(). */
struct child_scenario {
    const char *name;
    int (*run)(void);
};
void child_dispatch(const struct child_scenario *scenarios);
/* Runs this executable again as scenario `name` with the extra environment
 * entries (NAME=value, NULL-terminated) and returns its exit status
 * (128 + signal if it died). */
int run_child(const char *name, const char *const *env);
/* As run_child, but started through the dynamic loader with
 * `--inhibit-cache --library-path library_path`: only the folders of
 * library_path (':'-separated) and the system's default folders are
 * searched, for this executable's libraries and for every later dlopen,
 * whatever ld.so.cache knows. */
int run_child_with_loader(const char *name, const char *const *env, const char *library_path);
/* fork()s (no exec): the child runs check(arg), at most 20 s, and exits;
 * returns 1 when check returned nonzero, 0 when it returned 0 or the child
 * died.  For what a forked child of this process may do with the
 * parent's runtimes. */
int forked_child_passes(int (*check)(void *arg), void *arg);
/* As run_child, but returns at once: the child's pid, or -1 (children that
 * must run at the same time). */
pid_t start_child(const char *name, const char *const *env);
/* Waits up to timeout_s seconds for a child of start_child and returns its
 * exit status as run_child does; -2 when the time ran out (the child was
 * killed), -1 when it could not be waited for. */
int wait_child(pid_t pid, int timeout_s);

#endif

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* A runtime used in a forked child refuses with a runtime-state error naming
 * the fork, touches no driver, and the parent is unaffected.  A fork while
 * other threads hold the library's locks, or run its one-time loads, leaves
 * no call in the child waiting for them.
 *
 * This suite defines secure_getenv (see below) to hold a load in flight. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/test_support.h"

static int32_t noop(void *user_data) {
    (void)user_data;
    return 0;
}

static void noop_release(void *resource, void *user_data) { (void)resource, (void)user_data; }

#define CHILD_CHECK(cond)                       \
    do {                                        \
        if (!(cond)) _exit(__LINE__ % 200 + 1); \
    } while (0)

static void child_refuses_parent_continues(void **state) {
    tf_runtime *rt = new_runtime();
    void *s = NULL;
    pid_t pid;
    int status = -1;
    (void)state;
    assert_ok(tf_runtime_stream(rt, &s));
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint64_t id = 0;
        if (tfd()) tfd()->tfd_log_clear();
        CHILD_CHECK(tf_with_context(rt, noop, NULL) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(strstr(tf_last_error_message(), "fork") != NULL);
        CHILD_CHECK(strcmp(tf_last_error_operation(), "tf_with_context") == 0);
        CHILD_CHECK(tf_runtime_stream(rt, &s) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(tf_runtime_sync(rt) == TF_ERROR_RUNTIME_STATE);
        CHILD_CHECK(tf_runtime_identity(rt, &id) == TF_OK && id != 0);
        CHILD_CHECK(tf_runtime_release(rt) == TF_OK);
        if (tfd()) CHILD_CHECK(tfd()->tfd_log_count() == 0); /* no driver call at all */
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_ok(tf_with_context(rt, noop, NULL));
    assert_ok(tf_runtime_sync(rt));
    assert_ok(tf_runtime_release(rt));
}

/* A runtime created in the child after the fork is the child's own. */
static void child_can_create_its_own(void **state) {
    pid_t pid;
    int status = -1;
    (void)state;
    REQUIRE_DOUBLE(); /* a real driver cannot be used in a child of an initialized parent */
    {
        tf_runtime *parent = new_runtime();
        pid = fork();
        if (pid == 0) {
            tf_runtime *mine = NULL;
            CHILD_CHECK(tf_runtime_new(0, &mine) == TF_OK);
            CHILD_CHECK(tf_with_context(mine, noop, NULL) == TF_OK);
            CHILD_CHECK(tf_with_context(parent, noop, NULL) == TF_ERROR_RUNTIME_STATE);
            CHILD_CHECK(tf_runtime_release(mine) == TF_OK);
            _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_ok(tf_runtime_release(parent));
    }
}

/* ---- fork() while other threads hold the library's locks ------------------
 * Every call in the child returns TF_ERROR_RUNTIME_STATE or works; none waits
 * for a lock or a one-time load that a thread of the parent held or ran at
 * the fork.  Each child runs under alarm(): a hang kills it with SIGALRM. */

enum { CHILD_ALARM_S = 10 };

/* Forks; the child runs `body` under alarm(), sends its result (0..127)
 * through a pipe and ends itself with SIGKILL: it inherited memory that
 * only the parent's other threads referenced, which a leak checker run at
 * its exit would report.  Returns the result, or 128 + the signal that
 * ended the child before it sent one (142: SIGALRM, it hung). */
static int in_forked_child(int (*body)(void *), void *arg) {
    int fd[2], status = 0;
    unsigned char result = 0;
    pid_t pid;
    if (pipe(fd) != 0) return -1;
    pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        alarm(CHILD_ALARM_S);
        result = (unsigned char)body(arg);
        if (write(fd[1], &result, 1) != 1) _exit(126);
        raise(SIGKILL);
    }
    close(fd[1]);
    if (read(fd[0], &result, 1) != 1) result = 255;
    close(fd[0]);
    if (waitpid(pid, &status, 0) != pid) return -1;
    if (result != 255) return result;
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 200 + WEXITSTATUS(status) % 50;
}

#define CHILD_REQUIRE(cond)                                                                   \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "child: %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    tf_last_error_message());                                                 \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)

/* A gate one thread waits at until another opens it: a pipe, so that the
 * waiting thread holds nothing of ours while it waits. */
struct gate {
    int fd[2];
};
static void gate_init(struct gate *g) { assert_int_equal(pipe(g->fd), 0); }
static void gate_open(struct gate *g) {
    if (write(g->fd[1], "x", 1) != 1) abort();
}
static void gate_wait(struct gate *g) {
    char c;
    if (read(g->fd[0], &c, 1) != 1) abort();
}
static void gate_close(struct gate *g) {
    close(g->fd[0]);
    close(g->fd[1]);
}

/* -- a log callback running on another thread -- */

static struct { struct gate entered, leave; } g_log;

static void blocking_logger(int32_t level, const char *message, void *user_data) {
    (void)level, (void)message, (void)user_data;
    gate_open(&g_log.entered);
    gate_wait(&g_log.leave);
}

/* The restore after the callback fails, which is logged. */
static void *log_from_restore(void *arg) {
    ignore_status(tf_with_context((tf_runtime *)arg, noop, NULL)); /* held in the log */
    return NULL;
}

static int child_with_the_log_lock_held(void *arg) {
    tf_runtime *rt = arg, *mine = NULL;
    CHILD_REQUIRE(tf_set_log_callback(NULL, NULL) == TF_OK); /* exclusive lock */
    CHILD_REQUIRE(tf_with_context(rt, noop, NULL) == TF_ERROR_RUNTIME_STATE);
    CHILD_REQUIRE(strstr(tf_last_error_message(), "fork") != NULL);
    CHILD_REQUIRE(tf_runtime_release(rt) == TF_OK); /* the handle quarantine's lock */
    CHILD_REQUIRE(tf_runtime_new(0, &mine) == TF_OK);
    CHILD_REQUIRE(tf_with_context(mine, noop, NULL) == TF_OK);
    CHILD_REQUIRE(tf_runtime_release(mine) == TF_OK);
    return 0;
}

static void fork_while_a_log_callback_runs(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    tf_runtime *rt = new_runtime();
    pthread_t th;
    int status;
    gate_init(&g_log.entered);
    gate_init(&g_log.leave);
    assert_ok(tf_set_log_callback(blocking_logger, NULL));
    INJECT("cuCtxSetCurrent", 2, CUDA_ERROR_UNKNOWN, 1); /* the restore */
    assert_int_equal(pthread_create(&th, NULL, log_from_restore, rt), 0);
    gate_wait(&g_log.entered); /* that thread holds the log lock now */
    status = in_forked_child(child_with_the_log_lock_held, rt);
    gate_open(&g_log.leave);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_ok(tf_set_log_callback(NULL, NULL));
    gate_close(&g_log.entered);
    gate_close(&g_log.leave);
    if (status != 0) fail_msg("the forked child failed or hung: status %d (142: SIGALRM)", status);
    assert_ok(tf_runtime_release(rt));
}

/* -- a first load of the driver, cuBLAS or NVRTC running on another thread --
 * The library reads its override variable at the start of each load, so
 * the load can be held there: this suite defines secure_getenv, which the
 * dynamic linker binds the library's calls to (the executable comes first
 * in symbol lookup), and it waits at a gate for the variables named. */

static struct {
    _Atomic(const char *) held; /* variable whose lookup waits, NULL: none */
    struct gate entered, leave;
} g_load;

char *secure_getenv(const char *name) {
    char *(*real)(const char *);
    const char *held = atomic_load(&g_load.held);
    if (held && strcmp(name, held) == 0) {
        gate_open(&g_load.entered);
        gate_wait(&g_load.leave);
    }
    *(void **)&real = dlsym(RTLD_NEXT, "secure_getenv");
    return real(name);
}

static void *count_devices(void *arg) {
    int32_t n = 0;
    (void)arg;
    ignore_status(tf_device_count(&n)); /* the load is held across the fork */
    return NULL;
}

static void *load_cublas(void *arg) {
    int32_t v = 0;
    (void)arg;
    ignore_status(tf_cublas_version(&v)); /* the load is held across the fork */
    return NULL;
}

static void *load_cublaslt(void *arg) {
    void *f = NULL;
    (void)arg;
    ignore_status(tf_cublaslt_symbol("cublasLtCreate", &f)); /* the load is held across the fork */
    return NULL;
}

static void *load_nvrtc(void *arg) {
    int32_t yes = 0;
    /* the load is held across the fork */
    ignore_status(tf_runtime_supports((tf_runtime *)arg, TF_CAP_RUNTIME_COMPILATION, &yes));
    return NULL;
}

/* Starts `load` on a thread and returns once it waits inside the load. */
static pthread_t hold_load(const char *variable, void *(*load)(void *), void *arg) {
    pthread_t th;
    atomic_store(&g_load.held, variable);
    if (pthread_create(&th, NULL, load, arg) != 0) abort();
    gate_wait(&g_load.entered);
    return th;
}

static void finish_load(pthread_t th) {
    atomic_store(&g_load.held, NULL);
    gate_open(&g_load.leave);
    if (pthread_join(th, NULL) != 0) abort();
}

static int child_without_the_driver(void *arg) {
    int32_t n = -1;
    tf_runtime *rt = NULL;
    (void)arg;
    CHILD_REQUIRE(tf_device_count(&n) == TF_ERROR_RUNTIME_STATE && n == -1);
    CHILD_REQUIRE(strstr(tf_last_error_message(),
                         "the CUDA driver was being loaded by another "
                         "thread when this process was forked"));
    CHILD_REQUIRE(tf_runtime_new(0, &rt) == TF_ERROR_RUNTIME_STATE && rt == NULL);
    CHILD_REQUIRE(tf_set_log_callback(NULL, NULL) == TF_OK);
    return 0;
}

/* The driver's load is the process's first call: a fresh process. */
static int scenario_fork_while_the_driver_loads(void) {
    pthread_t th;
    int status;
    int32_t n = 0;
    gate_init(&g_load.entered);
    gate_init(&g_load.leave);
    th = hold_load("TENFERRO_GPU_CUDA_DRIVER", count_devices, NULL);
    status = in_forked_child(child_without_the_driver, NULL);
    finish_load(th);
    SCENARIO_CHECK(tf_device_count(&n) == TF_OK && n >= 1); /* the parent's load finished */
    if (status != 0) fprintf(stderr, "forked child: status %d (142: SIGALRM)\n", status);
    return status;
}

static int child_without_the_libraries(void *arg) {
    tf_runtime *rt = arg;
    int32_t v = -1, yes = -1;
    tf_program *program = NULL;
    void *f = NULL;
    CHILD_REQUIRE(tf_cublas_version(&v) == TF_ERROR_RUNTIME_STATE && v == -1);
    CHILD_REQUIRE(strstr(tf_last_error_message(), "cuBLAS was being loaded by another thread"));
    CHILD_REQUIRE(tf_cublaslt_symbol("cublasLtCreate", &f) == TF_ERROR_RUNTIME_STATE && !f);
    CHILD_REQUIRE(strstr(tf_last_error_message(), "cuBLASLt was being loaded by another thread"));
    CHILD_REQUIRE(tf_program_compile(rt, "extern \"C\" __global__ void k() {}", NULL, &program) ==
                  TF_ERROR_RUNTIME_STATE);
    CHILD_REQUIRE(strstr(tf_last_error_message(), "NVRTC was being loaded by another thread"));
    CHILD_REQUIRE(tf_runtime_supports(rt, TF_CAP_CUBLAS, &yes) == TF_OK && yes == 0);
    CHILD_REQUIRE(tf_runtime_supports(rt, TF_CAP_RUNTIME_COMPILATION, &yes) == TF_OK && yes == 0);
    CHILD_REQUIRE(tf_runtime_release(rt) == TF_OK);
    return 0;
}

/* cuBLAS, cuBLASLt and NVRTC are loaded at their first use in the process: a fresh
 * process, whose driver is loaded first. */
static int scenario_fork_while_libraries_load(void) {
    tf_runtime *rt = NULL;
    pthread_t cublas, cublaslt, nvrtc;
    void *f = NULL;
    int status;
    int32_t v = 0, yes = 0;
    SCENARIO_CHECK(tf_runtime_new(0, &rt) == TF_OK);
    gate_init(&g_load.entered);
    gate_init(&g_load.leave);
    /* All three wait at the same gate, inside their loads. */
    cublas = hold_load("TENFERRO_GPU_CUBLAS", load_cublas, NULL);
    cublaslt = hold_load("TENFERRO_GPU_CUBLASLT", load_cublaslt, NULL);
    nvrtc = hold_load("TENFERRO_GPU_NVRTC", load_nvrtc, rt);
    status = in_forked_child(child_without_the_libraries, rt);
    atomic_store(&g_load.held, NULL);
    gate_open(&g_load.leave);
    gate_open(&g_load.leave);
    gate_open(&g_load.leave);
    SCENARIO_CHECK(pthread_join(cublas, NULL) == 0 && pthread_join(cublaslt, NULL) == 0 &&
                   pthread_join(nvrtc, NULL) == 0);
    SCENARIO_CHECK(tf_cublas_version(&v) == TF_OK && v > 0);
    SCENARIO_CHECK(tf_cublaslt_symbol("cublasLtCreate", &f) == TF_OK && f != NULL);
    SCENARIO_CHECK(tf_runtime_supports(rt, TF_CAP_RUNTIME_COMPILATION, &yes) == TF_OK && yes == 1);
    SCENARIO_CHECK(tf_runtime_release(rt) == TF_OK);
    if (status != 0) fprintf(stderr, "forked child: status %d (142: SIGALRM)\n", status);
    return status;
}

static void fork_while_the_driver_loads(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(run_child("fork_while_the_driver_loads", NULL), 0);
}

static void fork_while_libraries_load(void **state) {
    (void)state;
    REQUIRE_DOUBLE();
    assert_int_equal(run_child("fork_while_libraries_load", NULL), 0);
}

/* -- threads taking the handle quarantine's and the retirement locks -- *
 * Whatever a fork catches them doing, the child's calls return: the
 * statistics work, or are refused when the retirement lock was held. */

static struct {
    tf_runtime *rt;
    atomic_int stop;
} g_churn;

static void *churn_handles(void *arg) {
    (void)arg;
    while (!atomic_load(&g_churn.stop)) {
        tf_runtime *bound = NULL;
        if (tf_runtime_bind_slot(g_churn.rt, 1, &bound) == TF_OK) tf_runtime_release(bound);
    }
    return NULL;
}

static void *churn_retirements(void *arg) {
    (void)arg;
    /* keeps the retirement lock busy while the test forks */
    while (!atomic_load(&g_churn.stop)) ignore_status(tf_workspace_poll(g_churn.rt));
    return NULL;
}

/* 0: the statistics were read, 2: refused, anything else: a failure. */
static int child_after_churn(void *arg) {
    tf_runtime *bound = NULL;
    tf_retirement_stats s;
    tf_status st;
    (void)arg;
    tf_retirement_stats_init(&s, sizeof s);
    st = tf_workspace_stats(g_churn.rt, &s);
    CHILD_REQUIRE(st == TF_OK || st == TF_ERROR_RUNTIME_STATE);
    CHILD_REQUIRE(st == TF_OK || strstr(tf_last_error_message(), "retirement lock"));
    CHILD_REQUIRE(tf_runtime_bind_slot(g_churn.rt, 0, &bound) == TF_OK);
    CHILD_REQUIRE(tf_runtime_release(bound) == TF_OK);
    return st == TF_OK ? 0 : 2;
}

static void fork_while_threads_take_locks(void **state) {
    enum { FORKS = 12 };
    pthread_t handles, retirements;
    int i, refused = 0;
    (void)state;
    REQUIRE_DOUBLE();
    g_churn.rt = new_runtime_with_slots(8);
    atomic_store(&g_churn.stop, 0);
    tfd()->tfd_set_async_pending(1); /* retirements stay queued: every poll queries */
    for (i = 0; i < 8; ++i) {
        tf_runtime *bound = NULL;
        assert_ok(tf_runtime_bind_slot(g_churn.rt, i, &bound));
        assert_ok(tf_workspace_retire(bound, NULL, noop_release, NULL));
        assert_ok(tf_runtime_release(bound));
    }
    assert_int_equal(pthread_create(&handles, NULL, churn_handles, NULL), 0);
    assert_int_equal(pthread_create(&retirements, NULL, churn_retirements, NULL), 0);
    for (i = 0; i < FORKS; ++i) {
        int status = in_forked_child(child_after_churn, NULL);
        if (status == 2)
            refused++;
        else if (status != 0)
            fail_msg("fork %d: the child failed or hung: status %d (142: SIGALRM)", i, status);
    }
    atomic_store(&g_churn.stop, 1);
    assert_int_equal(pthread_join(handles, NULL), 0);
    assert_int_equal(pthread_join(retirements, NULL), 0);
    print_message("    (%d of %d children found the retirement lock held)\n", refused, FORKS);
    tfd()->tfd_set_async_pending(0);
    assert_ok(tf_runtime_release(g_churn.rt));
}

static const struct child_scenario scenarios[] = {
    {"fork_while_the_driver_loads", scenario_fork_while_the_driver_loads},
    {"fork_while_libraries_load", scenario_fork_while_libraries_load},
    {NULL, NULL},
};

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(child_refuses_parent_continues), TF_TEST(child_can_create_its_own),
        TF_TEST(fork_while_a_log_callback_runs), TF_TEST(fork_while_the_driver_loads),
        TF_TEST(fork_while_libraries_load),      TF_TEST(fork_while_threads_take_locks),
    };
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

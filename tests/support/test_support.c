/* SPDX-License-Identifier: MIT OR Apache-2.0 */
#include "support/test_support.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int test_gpu_mode(void) {
    const char *m = getenv("TF_TEST_MODE");
    return m && strcmp(m, "gpu") == 0;
}

/* ---- per-test fixture -------------------------------------------------- */

enum { MAX_DEVICES = 8 };

/* The kinds a test must not leave behind (page-locked host blocks excepted,
 * see test_teardown). */
static const struct {
    int kind;
    const char *what;
} kTracked[] = {
    {TFD_STREAMS, "stream(s)"},
    {TFD_EVENTS, "event(s)"},
    {TFD_DEVICE_ALLOCS, "device allocation(s)"},
    {TFD_MODULES, "module(s)"},
    {TFD_CUBLAS_HANDLES, "cuBLAS handle(s)"},
    {TFD_NVRTC_PROGRAMS, "NVRTC program(s)"},
    {TFD_CONTEXTS, "context(s)"},
    {TFD_GRAPHS, "graph(s)"},
    {TFD_GRAPH_EXECS, "executable graph(s)"},
    {TFD_MEM_POOLS, "memory pool(s)"},
};
#define TRACKED (sizeof kTracked / sizeof kTracked[0])

/* What test_setup saw, and what the running test declared it leaves. */
static struct {
    int primary[MAX_DEVICES];
    long live[TRACKED];
} g_noted, g_declared;

int test_setup(void **state) {
    size_t i;
    (void)state;
    memset(&g_declared, 0, sizeof g_declared);
    if (tfd()) {
        tfd()->tfd_reset();
        tfd()->tfd_set_current(NULL);
        for (i = 0; i < MAX_DEVICES; ++i) g_noted.primary[i] = tfd()->tfd_primary_refcount((int)i);
        for (i = 0; i < TRACKED; ++i) g_noted.live[i] = tfd()->tfd_live(kTracked[i].kind);
    } else {
        raw_set_current_context(NULL);
    }
    if (tf_set_log_callback(NULL, NULL) != TF_OK) {
        print_error("test_setup: tf_set_log_callback: %s\n", tf_last_error_message());
        return -1;
    }
    tf_clear_last_error();
    return 0;
}

int test_reset(void **state) { return test_setup(state); }

void test_leaves_retained(int device, int count) {
    if (device >= 0 && device < MAX_DEVICES) g_declared.primary[device] += count;
}

void test_leaves_live(int kind, long count) {
    size_t i;
    for (i = 0; i < TRACKED; ++i)
        if (kTracked[i].kind == kind) g_declared.live[i] += count;
}

/* Appends to buf (at *len) the primary retains beyond those expected;
 * returns whether there were any. */
static int unexpected_retains(char *buf, size_t cap, size_t *len) {
    int i, any = 0;
    for (i = 0; i < MAX_DEVICES; ++i) {
        int extra = tfd()->tfd_primary_refcount(i) - g_noted.primary[i] - g_declared.primary[i];
        if (extra == 0) continue;
        any = 1;
        *len += (size_t)snprintf(buf + *len, *len < cap ? cap - *len : 0,
                                 "; primary context of device %d retained %+d time(s) (a runtime, "
                                 "event or module not released?)",
                                 i, extra);
    }
    return any;
}

/* The same for the live objects. */
static int unexpected_objects(char *buf, size_t cap, size_t *len) {
    size_t i;
    int any = 0;
    for (i = 0; i < TRACKED; ++i) {
        long extra = tfd()->tfd_live(kTracked[i].kind) - g_noted.live[i] - g_declared.live[i];
        if (extra == 0) continue;
        any = 1;
        *len += (size_t)snprintf(buf + *len, *len < cap ? cap - *len : 0, "; %+ld %s", extra,
                                 kTracked[i].what);
    }
    return any;
}

/* Drops the retains the test left (expected or not), so that their
 * contexts' objects go with them and the next test starts clean. */
static void release_leftover_retains(void) {
    PFN_cuDevicePrimaryCtxRelease_v11000 release = NULL;
    void *fn = NULL;
    int i, left = 0;
    for (i = 0; i < MAX_DEVICES; ++i) left |= tfd()->tfd_primary_refcount(i) > g_noted.primary[i];
    if (!left) return;
    fn = raw_driver_entry("cuDevicePrimaryCtxRelease", 11000);
    memcpy(&release, &fn, sizeof fn);
    tfd()->tfd_set_devices(MAX_DEVICES);
    tfd()->tfd_set_initialized(1);
    tfd()->tfd_clear_faults();
    for (i = 0; i < MAX_DEVICES && release; ++i)
        while (tfd()->tfd_primary_refcount(i) > g_noted.primary[i] && release(i) == CUDA_SUCCESS) {
        }
    tfd()->tfd_reset();
}

int test_teardown(void **state) {
    char what[1024];
    size_t len = 0;
    int bad = 0;
    (void)state;
    what[0] = '\0';
    if (tfd()) {
        bad |= unexpected_retains(what, sizeof what, &len);
        release_leftover_retains();
        bad |= unexpected_objects(what, sizeof what, &len);
        if (bad) print_error("test left behind%s\n", what);
    }
    raw_set_current_context(NULL);
    if (tf_set_log_callback(NULL, NULL) != TF_OK) {
        print_error("test_teardown: tf_set_log_callback: %s\n", tf_last_error_message());
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* ---- errors ------------------------------------------------------------ */

void assert_ok_at(tf_status st, const char *file, int line) {
    if (st == TF_OK) return;
    print_error("%s:%d: status %d (%s): %s\n", file, line, (int)st, tf_status_string(st),
                tf_last_error_message());
    _fail(file, line);
}

void assert_failure_at(tf_status st, tf_status expected, const char *op, const char *file, int line,
                       ...) {
    va_list ap;
    const char *fragment;
    const char *message = tf_last_error_message();
    if (st != expected) {
        print_error("%s:%d: status %d (%s), expected %d (%s); last error: %s\n", file, line,
                    (int)st, tf_status_string(st), (int)expected, tf_status_string(expected),
                    message);
        _fail(file, line);
    }
    if (strcmp(tf_last_error_operation(), op) != 0) {
        print_error("%s:%d: operation '%s', expected '%s' (%s)\n", file, line,
                    tf_last_error_operation(), op, message);
        _fail(file, line);
    }
    va_start(ap, line);
    while ((fragment = va_arg(ap, const char *)) != NULL) {
        if (!strstr(message, fragment)) {
            print_error("%s:%d: message lacks '%s': %s\n", file, line, fragment, message);
            va_end(ap);
            _fail(file, line);
        }
    }
    va_end(ap);
}

/* ---- log capture ----------------------------------------------------- */

static char captured[16384];
static size_t captured_len;

static void capture(int32_t level, const char *message, void *user_data) {
    int n;
    (void)level;
    (void)user_data;
    n = snprintf(captured + captured_len, sizeof captured - captured_len, "%s\n", message);
    if (n > 0)
        captured_len += (size_t)n < sizeof captured - captured_len
                            ? (size_t)n
                            : sizeof captured - captured_len - 1;
}

void log_capture_start(void) {
    captured[0] = '\0';
    captured_len = 0;
    assert_int_equal(tf_set_log_callback(capture, NULL), TF_OK);
}

const char *log_capture_stop(void) {
    assert_int_equal(tf_set_log_callback(NULL, NULL), TF_OK);
    return captured;
}

/* ---- the thread's current context -------------------------------------- */

struct raw {
    PFN_cuCtxGetCurrent_v4000 get_current;
    PFN_cuCtxSetCurrent_v4000 set_current;
    PFN_cuCtxCreate_v12050 create;
    PFN_cuCtxDestroy_v4000 destroy;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuInit_v2000 init;
};

/* The real driver's entry points, for runs without the double. */
static const struct raw *raw(void) {
    static struct raw r;
    static int loaded;
    if (!loaded) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        PFN_cuGetProcAddress_v12000 gpa;
        loaded = 1;
        if (!h) return NULL;
        *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
        if (!gpa) return NULL;
        gpa("cuCtxGetCurrent", (void **)&r.get_current, 4000, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
            NULL);
        gpa("cuCtxSetCurrent", (void **)&r.set_current, 4000, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
            NULL);
        gpa("cuCtxCreate", (void **)&r.create, 12050, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
        gpa("cuCtxDestroy", (void **)&r.destroy, 4000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
        gpa("cuDeviceGet", (void **)&r.device_get, 2000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
        gpa("cuInit", (void **)&r.init, 2000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
    }
    return r.get_current ? &r : NULL;
}

void *raw_driver_entry(const char *name, int version) {
    static PFN_cuGetProcAddress_v12000 gpa;
    void *fn = NULL;
    if (!gpa) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) return NULL;
        *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
        if (!gpa) return NULL;
    }
    if (gpa(name, &fn, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL) != CUDA_SUCCESS)
        return NULL;
    return fn;
}

void raw_retain_primary(int device) {
    PFN_cuDevicePrimaryCtxRetain_v7000 retain = NULL;
    void *fn = raw_driver_entry("cuDevicePrimaryCtxRetain", 7000);
    CUcontext ctx = NULL;
    assert_non_null(fn);
    memcpy(&retain, &fn, sizeof fn);
    assert_int_equal(retain(&ctx, device), CUDA_SUCCESS);
}

void raw_release_primary(int device) {
    PFN_cuDevicePrimaryCtxRelease_v11000 release = NULL;
    void *fn = raw_driver_entry("cuDevicePrimaryCtxRelease", 11000);
    assert_non_null(fn);
    memcpy(&release, &fn, sizeof fn);
    assert_int_equal(release(device), CUDA_SUCCESS);
}

void *raw_current_context(void) {
    CUcontext c = NULL;
    if (tfd()) return tfd()->tfd_current_context();
    if (raw()) raw()->get_current(&c);
    return c;
}

void raw_set_current_context(void *ctx) {
    if (tfd()) {
        tfd()->tfd_set_current(ctx);
        return;
    }
    if (raw()) raw()->set_current((CUcontext)ctx);
}

void *raw_create_context(void) {
    CUcontext c = NULL, before;
    CUdevice dev;
    if (tfd()) return tfd()->tfd_create_context(0);
    assert_non_null(raw());
    assert_int_equal(raw()->init(0), CUDA_SUCCESS);
    assert_int_equal(raw()->device_get(&dev, 0), CUDA_SUCCESS);
    raw()->get_current(&before);
    assert_int_equal(raw()->create(&c, NULL, 0, dev), CUDA_SUCCESS);
    raw()->set_current(before); /* cuCtxCreate made it current */
    return c;
}

void raw_destroy_context(void *ctx) {
    if (tfd()) {
        tfd()->tfd_destroy_context(ctx);
        return;
    }
    raw()->destroy((CUcontext)ctx);
}

/* ---- runtimes -------------------------------------------------------- */

tf_runtime *new_runtime(void) { return new_runtime_with_slots(TF_DEFAULT_STREAM_SLOTS); }

tf_runtime *new_runtime_with_slots(uint32_t slots) {
    tf_runtime *rt = NULL;
    tf_runtime_options o;
    tf_status st;
    tf_runtime_options_init(&o, sizeof o);
    o.stream_slots = slots;
    st = tf_runtime_new_with_options(0, &o, &rt);
    if (st != TF_OK) fail_msg("tf_runtime_new: %s", tf_last_error_message());
    return rt;
}

/* ---- child processes ------------------------------------------------- */

void child_dispatch(const struct child_scenario *scenarios) {
    const char *name = getenv("TF_TEST_CHILD");
    if (!name) return;
    for (; scenarios && scenarios->name; ++scenarios)
        if (strcmp(scenarios->name, name) == 0) exit(scenarios->run());
    fprintf(stderr, "unknown child scenario %s\n", name);
    exit(120);
}

/* Starts argv[0] with argv and this process's environment plus TF_TEST_CHILD
 * and `env` (whose entries win); returns its pid, or -1. */
static pid_t start_spawn(char *const *argv, const char *name, const char *const *env) {
    char *envp[512];
    char child_var[256];
    size_t n = 0, i;
    pid_t pid;
    snprintf(child_var, sizeof child_var, "TF_TEST_CHILD=%s", name);
    envp[n++] = child_var;
    for (i = 0; env && env[i] && n < 400; ++i) envp[n++] = (char *)env[i];
    for (i = 0; environ[i] && n < 510; ++i) {
        /* Entries the caller set win over the inherited ones. */
        size_t k, key = strcspn(environ[i], "=");
        int overridden = strncmp(environ[i], "TF_TEST_CHILD=", 14) == 0;
        for (k = 0; env && env[k] && !overridden; ++k)
            overridden = strncmp(env[k], environ[i], key + 1) == 0;
        if (!overridden) envp[n++] = environ[i];
    }
    envp[n] = NULL;
    return posix_spawn(&pid, argv[0], NULL, NULL, argv, envp) == 0 ? pid : -1;
}

static int exit_status(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* As start_spawn, then waits for the child and returns its exit status. */
static int spawn_child(char *const *argv, const char *name, const char *const *env) {
    int status = 0;
    pid_t pid = start_spawn(argv, name, env);
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return exit_status(status);
}

static int self_path(char *self, size_t cap) {
    ssize_t len = readlink("/proc/self/exe", self, cap - 1);
    if (len <= 0) return -1;
    self[len] = '\0';
    return 0;
}

int run_child(const char *name, const char *const *env) {
    char self[4096];
    char *argv[] = {self, NULL};
    if (self_path(self, sizeof self) != 0) return -1;
    return spawn_child(argv, name, env);
}

/* The main program's ELF interpreter (PT_INTERP): the dynamic loader. */
static int find_interpreter(struct dl_phdr_info *info, size_t size, void *out) {
    int i;
    (void)size;
    for (i = 0; i < info->dlpi_phnum; ++i)
        if (info->dlpi_phdr[i].p_type == PT_INTERP) {
            *(const char **)out = (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
            return 1;
        }
    return 1; /* the first object is the main program: stop either way */
}

int run_child_with_loader(const char *name, const char *const *env, const char *library_path) {
    char self[4096], loader[4096];
    const char *interp = NULL;
    char *argv[] = {loader, "--inhibit-cache", "--library-path", (char *)library_path, self, NULL};
    if (self_path(self, sizeof self) != 0) return -1;
    dl_iterate_phdr(find_interpreter, &interp);
    if (!interp) return -1;
    snprintf(loader, sizeof loader, "%s", interp);
    return spawn_child(argv, name, env);
}

pid_t start_child(const char *name, const char *const *env) {
    char self[4096];
    char *argv[] = {self, NULL};
    if (self_path(self, sizeof self) != 0) return -1;
    return start_spawn(argv, name, env);
}

int wait_child(pid_t pid, int timeout_s) {
    int status = 0, waited_ms = 0;
    if (pid <= 0) return -1;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return exit_status(status);
        if (r < 0) return -1;
        if (waited_ms >= timeout_s * 1000) break;
        usleep(20 * 1000);
        waited_ms += 20;
    }
    kill(pid, SIGKILL); /* our own child, by its id */
    waitpid(pid, &status, 0);
    return -2;
}

int forked_child_passes(int (*check)(void *arg), void *arg) {
    int verdict[2], status = -1;
    char answer = 0;
    pid_t pid;
    if (pipe(verdict) != 0) return 0;
    pid = fork();
    if (pid == 0) {
        char ok;
        alarm(20);
        ok = check(arg) ? 'y' : 'n';
        if (write(verdict[1], &ok, 1) != 1) _exit(2);
        _exit(0);
    }
    close(verdict[1]);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        read(verdict[0], &answer, 1) != 1)
        answer = 0;
    close(verdict[0]);
    return answer == 'y';
}

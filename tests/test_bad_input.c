/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Bad input, table-driven: every handle and object argument (NULL, released,
 * never one), every NULL output and every out-of-range value each get their
 * documented status and a message naming the operation, never a crash.
 *
 * docs/bad-input.md lists every argument check of every public function and
 * cites the test that proves it, here or in a feature suite;
 * tools/ci/check-bad-input (make check) fails when the two drift apart.  Every
 * test here runs on a real GPU as well as on the double. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

static int32_t noop(void *user_data) {
    (void)user_data;
    return 0;
}

static int32_t noop_stream(void *stream, void *user_data) {
    (void)stream, (void)user_data;
    return 0;
}

static int32_t noop_cublas(void *handle, void *stream, void *user_data) {
    (void)handle, (void)stream, (void)user_data;
    return 0;
}

static void noop_release(void *resource, void *user_data) { (void)resource, (void)user_data; }

static const char kSource[] = "extern \"C\" __global__ void k() {}\n";

/* ---- every function that takes a runtime handle ---------------------------- */

/* One call per public function that takes a handle; returns its status. */
typedef tf_status (*handle_call)(tf_runtime *rt);
static uint64_t u64;
static int32_t i32;
static void *ptr;
static tf_runtime *out_rt;
static tf_event *out_event;
static tf_module *out_module;
static tf_program *out_program;
static tf_device_properties props;
static tf_retirement_stats stats;
static tf_launch_config config;

static tf_status call_retain(tf_runtime *rt) { return tf_runtime_retain(rt); }
static tf_status call_release(tf_runtime *rt) { return tf_runtime_release(rt); }
static tf_status call_bind(tf_runtime *rt) { return tf_runtime_bind_slot(rt, 0, &out_rt); }
static tf_status call_identity(tf_runtime *rt) { return tf_runtime_identity(rt, &u64); }
static tf_status call_domain(tf_runtime *rt) { return tf_runtime_allocation_domain(rt, &u64); }
static tf_status call_device_info(tf_runtime *rt) { return tf_runtime_device_info(rt, &props); }
static tf_status call_supports(tf_runtime *rt) {
    return tf_runtime_supports(rt, TF_CAP_RAW_STREAM, &i32);
}
static tf_status call_primary(tf_runtime *rt) { return tf_runtime_primary_context(rt, &ptr); }
static tf_status call_slot_count(tf_runtime *rt) { return tf_runtime_slot_count(rt, &i32); }
static tf_status call_current_slot(tf_runtime *rt) { return tf_runtime_current_slot(rt, &i32); }
static tf_status call_stream(tf_runtime *rt) { return tf_runtime_stream(rt, &ptr); }
static tf_status call_slot_stream(tf_runtime *rt) { return tf_runtime_slot_stream(rt, 0, &ptr); }
static tf_status call_with_context(tf_runtime *rt) { return tf_with_context(rt, noop, NULL); }
static tf_status call_sync(tf_runtime *rt) { return tf_runtime_sync(rt); }
static tf_status call_cublas(tf_runtime *rt) { return tf_cublas_enqueue(rt, 0, noop_cublas, NULL); }
static tf_status call_enqueue(tf_runtime *rt) { return tf_stream_enqueue(rt, noop_stream, NULL); }
static tf_status call_slot_wait(tf_runtime *rt) { return tf_slot_wait(rt, 0); }
static tf_status call_event_new(tf_runtime *rt) { return tf_event_new(rt, &out_event); }
static tf_status call_event_record(tf_runtime *rt) { return tf_event_record(rt, NULL); }
static tf_status call_event_wait(tf_runtime *rt) { return tf_event_wait(rt, NULL); }
static tf_status call_retire(tf_runtime *rt) {
    return tf_workspace_retire(rt, NULL, noop_release, NULL);
}
static tf_status call_poll(tf_runtime *rt) { return tf_workspace_poll(rt); }
static tf_status call_stats(tf_runtime *rt) { return tf_workspace_stats(rt, &stats); }
static tf_status call_module_load(tf_runtime *rt) {
    return tf_module_load(rt, kSource, sizeof kSource, &out_module);
}
static tf_status call_launch(tf_runtime *rt) { return tf_kernel_launch(rt, ptr, &config, NULL); }
static tf_status call_compile(tf_runtime *rt) {
    return tf_program_compile(rt, kSource, NULL, &out_program);
}
static tf_status call_alloc(tf_runtime *rt) { return tf_alloc(rt, 8, &u64); }
static tf_status call_free(tf_runtime *rt) { return tf_free(rt, 1); }
static tf_status call_upload(tf_runtime *rt) { return tf_upload(rt, &u64, 1, 8); }
static tf_status call_copy(tf_runtime *rt) { return tf_copy(rt, 1, 64, 8); }
static tf_status call_peer_available(tf_runtime *rt) {
    return tf_peer_copy_available(rt, rt, &i32);
}
static tf_status call_peer_copy(tf_runtime *rt) { return tf_peer_copy(rt, 1, rt, 64, 8); }
static tf_status call_download_scalar(tf_runtime *rt) { return tf_download_scalar(rt, 1, &u64, 8); }
static tf_status call_download(tf_runtime *rt) { return tf_download(rt, 1, &u64, 8); }
static tf_graph *out_graph;
static tf_status call_capture_begin(tf_runtime *rt) { return tf_graph_capture_begin(rt); }
static tf_status call_capture_end(tf_runtime *rt) { return tf_graph_capture_end(rt, &out_graph); }
static tf_status call_capture_update(tf_runtime *rt) {
    return tf_graph_capture_update(rt, NULL, &i32);
}
static tf_status call_capture_abort(tf_runtime *rt) { return tf_graph_capture_abort(rt); }
static tf_status call_graph_launch(tf_runtime *rt) { return tf_graph_launch(rt, NULL); }

static const struct {
    const char *op;
    handle_call call;
} calls[] = {
    {"tf_runtime_retain", call_retain},
    {"tf_runtime_release", call_release},
    {"tf_runtime_bind_slot", call_bind},
    {"tf_runtime_identity", call_identity},
    {"tf_runtime_allocation_domain", call_domain},
    {"tf_runtime_device_info", call_device_info},
    {"tf_runtime_supports", call_supports},
    {"tf_runtime_primary_context", call_primary},
    {"tf_runtime_slot_count", call_slot_count},
    {"tf_runtime_current_slot", call_current_slot},
    {"tf_runtime_stream", call_stream},
    {"tf_runtime_slot_stream", call_slot_stream},
    {"tf_with_context", call_with_context},
    {"tf_runtime_sync", call_sync},
    {"tf_cublas_enqueue", call_cublas},
    {"tf_stream_enqueue", call_enqueue},
    {"tf_slot_wait", call_slot_wait},
    {"tf_event_new", call_event_new},
    {"tf_event_record", call_event_record},
    {"tf_event_wait", call_event_wait},
    {"tf_workspace_retire", call_retire},
    {"tf_workspace_poll", call_poll},
    {"tf_workspace_stats", call_stats},
    {"tf_module_load", call_module_load},
    {"tf_kernel_launch", call_launch},
    {"tf_program_compile", call_compile},
    {"tf_alloc", call_alloc},
    {"tf_free", call_free},
    {"tf_upload", call_upload},
    {"tf_copy", call_copy},
    {"tf_peer_copy_available", call_peer_available},
    {"tf_peer_copy", call_peer_copy},
    {"tf_download_scalar", call_download_scalar},
    {"tf_download", call_download},
    {"tf_graph_capture_begin", call_capture_begin},
    {"tf_graph_capture_end", call_capture_end},
    {"tf_graph_capture_update", call_capture_update},
    {"tf_graph_capture_abort", call_capture_abort},
    {"tf_graph_launch", call_graph_launch},
};
#define NCALLS (sizeof calls / sizeof calls[0])

static void init_outputs(void) {
    tf_device_properties_init(&props, sizeof props);
    tf_retirement_stats_init(&stats, sizeof stats);
    tf_launch_config_init(&config, sizeof config);
}

static void null_handle_is_an_invalid_argument(void **state) {
    size_t i;
    (void)state;
    init_outputs();
    for (i = 0; i < NCALLS; ++i) {
        if (strcmp(calls[i].op, "tf_runtime_release") == 0) {
            assert_ok(calls[i].call(NULL)); /* release of NULL is a no-op */
            continue;
        }
        assert_failure(calls[i].call(NULL), TF_ERROR_INVALID_ARGUMENT, calls[i].op,
                       "runtime handle is NULL");
    }
}

static void released_handle_is_an_invalid_handle(void **state) {
    size_t i;
    (void)state;
    init_outputs();
    for (i = 0; i < NCALLS; ++i) {
        tf_runtime *rt = new_runtime();
        assert_ok(tf_runtime_release(rt));
        assert_failure(calls[i].call(rt), TF_ERROR_INVALID_HANDLE, calls[i].op,
                       "was already released");
    }
}

static void foreign_pointer_is_an_invalid_handle(void **state) {
    uint64_t junk[16];
    size_t i;
    (void)state;
    memset(junk, 0x5A, sizeof junk);
    init_outputs();
    for (i = 0; i < NCALLS; ++i)
        assert_failure(calls[i].call((tf_runtime *)junk), TF_ERROR_INVALID_HANDLE, calls[i].op,
                       "is not a runtime handle");
}

/* The destination runtime of the peer calls is checked like the source. */
static void second_runtime_is_checked_like_the_first(void **state) {
    tf_runtime *rt = new_runtime(), *gone = new_runtime();
    uint64_t junk[16];
    (void)state;
    memset(junk, 0x5A, sizeof junk);
    assert_ok(tf_runtime_release(gone));
    assert_failure(tf_peer_copy_available(rt, NULL, &i32), TF_ERROR_INVALID_ARGUMENT,
                   "tf_peer_copy_available", "dst_rt is NULL");
    assert_failure(tf_peer_copy(rt, 1, NULL, 64, 8), TF_ERROR_INVALID_ARGUMENT, "tf_peer_copy",
                   "dst_rt is NULL");
    assert_failure(tf_peer_copy_available(rt, gone, &i32), TF_ERROR_INVALID_HANDLE,
                   "tf_peer_copy_available", "was already released");
    assert_failure(tf_peer_copy(rt, 1, gone, 64, 8), TF_ERROR_INVALID_HANDLE, "tf_peer_copy",
                   "was already released");
    assert_failure(tf_peer_copy_available(rt, (tf_runtime *)junk, &i32), TF_ERROR_INVALID_HANDLE,
                   "tf_peer_copy_available", "is not a runtime handle");
    assert_failure(tf_peer_copy(rt, 1, (tf_runtime *)junk, 64, 8), TF_ERROR_INVALID_HANDLE,
                   "tf_peer_copy", "is not a runtime handle");
    assert_ok(tf_runtime_release(rt));
}

/* Every output pointer NULL: refused before anything happens. */
static void null_outputs_are_refused(void **state) {
    tf_runtime *rt = new_runtime();
    (void)state;
    assert_failure(tf_runtime_bind_slot(rt, 0, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_bind_slot", "out is NULL");
    assert_failure(tf_runtime_identity(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_identity",
                   "out is NULL");
    assert_failure(tf_runtime_allocation_domain(rt, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_allocation_domain", "out is NULL");
    assert_failure(tf_runtime_device_info(rt, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_device_info", "out is NULL");
    assert_failure(tf_runtime_supports(rt, TF_CAP_RAW_STREAM, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_supports", "out_supported is NULL");
    assert_failure(tf_runtime_primary_context(rt, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_primary_context", "out_context is NULL");
    assert_failure(tf_runtime_slot_count(rt, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_slot_count", "out_count is NULL");
    assert_failure(tf_runtime_current_slot(rt, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_current_slot", "out_slot is NULL");
    assert_failure(tf_runtime_stream(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_stream",
                   "out_stream is NULL");
    assert_failure(tf_runtime_slot_stream(rt, 0, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_slot_stream", "out_stream is NULL");
    assert_failure(tf_with_context(rt, NULL, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_with_context",
                   "fn is NULL");
    assert_failure(tf_alloc(rt, 8, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_alloc", "out_ptr is NULL");
    assert_failure(tf_peer_copy_available(rt, rt, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_peer_copy_available", "out_available is NULL");
    assert_failure(tf_event_new(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_event_new",
                   "out is NULL");
    assert_failure(tf_cublas_version(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_cublas_version",
                   "out_version is NULL");
    assert_failure(tf_device_count(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_device_count",
                   "out_count is NULL");
    assert_failure(tf_device_info(0, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_device_info",
                   "out is NULL");
    assert_failure(tf_runtime_new_with_options(0, NULL, NULL), TF_ERROR_INVALID_ARGUMENT,
                   "tf_runtime_new_with_options", "out is NULL");
    assert_failure(tf_last_error(NULL), TF_ERROR_INVALID_ARGUMENT, "tf_last_error", "out is NULL");
    {
        const void *image = NULL;
        const char *log = NULL;
        size_t size = 0;
        tf_device_properties small;
        assert_failure(tf_program_image(NULL, &image, &size), TF_ERROR_INVALID_ARGUMENT,
                       "tf_program_image", "program, out_image or out_size is NULL");
        assert_failure(tf_program_log(NULL, &log), TF_ERROR_INVALID_ARGUMENT, "tf_program_log",
                       "program or out_log is NULL");
        memset(&small, 0, sizeof small);
        assert_failure(tf_runtime_device_info(rt, &small), TF_ERROR_INVALID_ARGUMENT,
                       "tf_runtime_device_info", "out->struct_size 0 is too small");
    }
    assert_ok(tf_runtime_release(rt));
}

/* ---- every function that takes an event or a module ------------------------ */

/* A module that loads on a GPU and on the double (which knows the name). */
static const char kPtx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry tfd_fill_u32()\n{\n\tret;\n}\n";

typedef tf_status (*object_call)(void *object);
static tf_runtime *object_rt; /* a live runtime for the calls that take one */

static tf_status call_event_retain(void *o) { return tf_event_retain(o); }
static tf_status call_event_release(void *o) { return tf_event_release(o); }
static tf_status call_event_record_on(void *o) { return tf_event_record(object_rt, o); }
static tf_status call_event_wait_on(void *o) { return tf_event_wait(object_rt, o); }
static tf_status call_event_synchronize(void *o) { return tf_event_synchronize(o); }
static tf_status call_event_query(void *o) { return tf_event_query(o, &i32); }
static tf_status call_module_retain(void *o) { return tf_module_retain(o); }
static tf_status call_module_release(void *o) { return tf_module_release(o); }
static tf_status call_module_function(void *o) {
    return tf_module_function(o, "tfd_fill_u32", &ptr);
}
static tf_status call_set_attribute(void *o) { return tf_function_set_attribute(o, &u64, 8, 0); }
static tf_status call_graph_retain(void *o) { return tf_graph_retain(o); }
static tf_status call_graph_release(void *o) { return tf_graph_release(o); }
static tf_status call_graph_launch_on(void *o) { return tf_graph_launch(object_rt, o); }
static tf_status call_graph_update_on(void *o) {
    return tf_graph_capture_update(object_rt, o, NULL);
}

#define EVENT_NULL "event is NULL"
#define NOT_AN_EVENT "is not a live event"
#define MODULE_NULL "module is NULL"
#define NOT_A_MODULE "is not a live module"
#define GRAPH_NULL "graph is NULL"
#define NOT_A_GRAPH "is not a live graph"

static const struct {
    const char *op;
    object_call call;
    const char *if_null;    /* the message for NULL; NULL where NULL is a no-op */
    const char *if_foreign; /* the message for a pointer that never was one */
} object_calls[] = {
    {"tf_event_retain", call_event_retain, EVENT_NULL, NOT_AN_EVENT},
    {"tf_event_release", call_event_release, NULL, NOT_AN_EVENT},
    {"tf_event_record", call_event_record_on, EVENT_NULL, NOT_AN_EVENT},
    {"tf_event_wait", call_event_wait_on, EVENT_NULL, NOT_AN_EVENT},
    {"tf_event_synchronize", call_event_synchronize, EVENT_NULL, NOT_AN_EVENT},
    {"tf_event_query", call_event_query, EVENT_NULL, NOT_AN_EVENT},
    {"tf_module_retain", call_module_retain, MODULE_NULL, NOT_A_MODULE},
    {"tf_module_release", call_module_release, NULL, NOT_A_MODULE},
    {"tf_module_function", call_module_function, MODULE_NULL, NOT_A_MODULE},
    {"tf_function_set_attribute", call_set_attribute, MODULE_NULL, NOT_A_MODULE},
    {"tf_graph_retain", call_graph_retain, GRAPH_NULL, NOT_A_GRAPH},
    {"tf_graph_release", call_graph_release, NULL, NOT_A_GRAPH},
    {"tf_graph_launch", call_graph_launch_on, GRAPH_NULL, NOT_A_GRAPH},
    {"tf_graph_capture_update", call_graph_update_on, GRAPH_NULL, NOT_A_GRAPH},
};
#define NOBJECTS (sizeof object_calls / sizeof object_calls[0])

static void null_object_is_an_invalid_argument(void **state) {
    size_t i;
    (void)state;
    object_rt = new_runtime();
    for (i = 0; i < NOBJECTS; ++i) {
        if (!object_calls[i].if_null)
            assert_ok(object_calls[i].call(NULL)); /* release of NULL is a no-op */
        else
            assert_failure(object_calls[i].call(NULL), TF_ERROR_INVALID_ARGUMENT,
                           object_calls[i].op, object_calls[i].if_null);
    }
    assert_ok(tf_runtime_release(object_rt));
}

static void foreign_object_is_an_invalid_argument(void **state) {
    uint64_t junk[16];
    size_t i;
    (void)state;
    memset(junk, 0x5A, sizeof junk);
    object_rt = new_runtime();
    for (i = 0; i < NOBJECTS; ++i)
        assert_failure(object_calls[i].call(junk), TF_ERROR_INVALID_ARGUMENT, object_calls[i].op,
                       object_calls[i].if_foreign);
    assert_ok(tf_runtime_release(object_rt));
}

/* A released event or module, passed back to each call (its release
 * included: a double release), is TF_ERROR_INVALID_HANDLE, as a released
 * runtime handle is (NOTE [handle model]). */
static void released_object_is_an_invalid_handle(void **state) {
    size_t i;
    (void)state;
    object_rt = new_runtime();
    for (i = 0; i < NOBJECTS; ++i) {
        void *o = NULL;
        if (strncmp(object_calls[i].op, "tf_event", 8) == 0) {
            tf_event *ev = NULL;
            assert_ok(tf_event_new(object_rt, &ev));
            assert_ok(tf_event_release(ev));
            o = ev;
        } else if (strncmp(object_calls[i].op, "tf_graph", 8) == 0) {
            tf_graph *g = NULL; /* an empty capture */
            assert_ok(tf_graph_capture_begin(object_rt));
            assert_ok(tf_graph_capture_end(object_rt, &g));
            assert_ok(tf_graph_release(g));
            o = g;
        } else {
            tf_module *m = NULL;
            assert_ok(tf_module_load(object_rt, kPtx, sizeof kPtx, &m));
            assert_ok(tf_module_release(m));
            o = m;
        }
        assert_failure(object_calls[i].call(o), TF_ERROR_INVALID_HANDLE, object_calls[i].op,
                       "was already released");
    }
    assert_ok(tf_runtime_release(object_rt));
}

/* ---- values out of range, with a live runtime, memory, module ---------------- */

static struct fixture {
    tf_runtime *rt; /* four slots */
    uint64_t d;     /* 64 bytes of device memory */
    tf_module *module;
    void *function; /* its tfd_fill_u32 */
    unsigned char host[64];
} fx;

static int fixture_up(void **state) {
    test_setup(state);
    fx.rt = new_runtime_with_slots(4);
    if (tf_alloc(fx.rt, 64, &fx.d) != TF_OK ||
        tf_module_load(fx.rt, kPtx, sizeof kPtx, &fx.module) != TF_OK ||
        tf_module_function(fx.module, "tfd_fill_u32", &fx.function) != TF_OK)
        fail_msg("fixture: %s", tf_last_error_message());
    memset(fx.host, 0, sizeof fx.host);
    return 0;
}

static int fixture_down(void **state) {
    assert_ok(tf_module_release(fx.module));
    assert_ok(tf_free(fx.rt, fx.d));
    assert_ok(tf_runtime_release(fx.rt));
    return test_teardown(state);
}

/* Options, configurations and error records with one field wrong. */
static tf_runtime_options options_with(uint32_t struct_size, uint32_t capacity, uint32_t flags) {
    tf_runtime_options o;
    tf_runtime_options_init(&o, sizeof o);
    if (struct_size) o.struct_size = struct_size;
    if (capacity) o.retirement_capacity = capacity;
    o.flags = flags;
    return o;
}

static tf_status new_negative(void) { return tf_runtime_new_with_options(-1, NULL, &out_rt); }
static tf_status new_missing_device(void) {
    return tf_runtime_new_with_options(4096, NULL, &out_rt);
}
static tf_status new_tiny_options(void) {
    tf_runtime_options o = options_with(3, 0, 0);
    return tf_runtime_new_with_options(0, &o, &out_rt);
}
static tf_status new_capacity_over(void) {
    tf_runtime_options o = options_with(0, TF_MAX_RETIREMENT_CAPACITY + 1, 0);
    return tf_runtime_new_with_options(0, &o, &out_rt);
}
static tf_status new_flags(void) {
    tf_runtime_options o = options_with(0, 0, 4);
    return tf_runtime_new_with_options(0, &o, &out_rt);
}
static tf_status last_error_tiny(void) {
    tf_error_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = 2;
    return tf_last_error(&info);
}
static tf_status cublas_mode(void) { return tf_cublas_enqueue(fx.rt, -1, noop_cublas, NULL); }
static tf_status module_out(void) { return tf_module_load(fx.rt, kPtx, sizeof kPtx, NULL); }
static tf_status module_garbage(void) {
    static const char garbage[] = "this is not a module image";
    return tf_module_load(fx.rt, garbage, sizeof garbage, &out_module);
}
static tf_status function_name(void) { return tf_module_function(fx.module, NULL, &ptr); }
static tf_status function_out(void) { return tf_module_function(fx.module, "tfd_fill_u32", NULL); }
static tf_status attribute_function(void) {
    return tf_function_set_attribute(fx.module, NULL, 8, 0);
}
static tf_status attribute_value(void) {
    /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES of 1 GiB: no device has it. */
    return tf_function_set_attribute(fx.module, fx.function, 8, 1 << 30);
}
static tf_status launch_function(void) { return tf_kernel_launch(fx.rt, NULL, &config, NULL); }
static tf_status launch_config(void) { return tf_kernel_launch(fx.rt, fx.function, NULL, NULL); }
static tf_status launch_with(uint32_t struct_size, uint32_t block_z, int tail) {
    unsigned char buf[sizeof(tf_launch_config) + 8];
    tf_launch_config *c = (tf_launch_config *)buf;
    memset(buf, 0, sizeof buf);
    tf_launch_config_init(c, sizeof buf);
    if (struct_size) c->struct_size = struct_size;
    c->block_z = block_z;
    buf[sizeof(tf_launch_config) + 1] = (unsigned char)tail;
    return tf_kernel_launch(fx.rt, fx.function, c, NULL);
}
static tf_status launch_tiny(void) { return launch_with(4, 1, 0); }
static tf_status launch_tail(void) { return launch_with(0, 1, 1); }
static tf_status launch_zero(void) { return launch_with(0, 0, 0); }
static tf_status compile_with(int32_t arch, int tail) {
    unsigned char buf[sizeof(tf_compile_options) + 8];
    tf_compile_options *o = (tf_compile_options *)buf;
    memset(buf, 0, sizeof buf);
    tf_compile_options_init(o, sizeof buf);
    o->arch = arch;
    buf[sizeof(tf_compile_options) + 1] = (unsigned char)tail;
    return tf_program_compile(fx.rt, kSource, o, &out_program);
}
static tf_status compile_arch(void) { return compile_with(-1, 0); }
static tf_status compile_tail(void) { return compile_with(0, 1); }
static tf_status copy_to_host(void) {
    return tf_copy(fx.rt, fx.d, (uint64_t)(uintptr_t)fx.host, 8);
}
static tf_status peer_from_host(void) {
    return tf_peer_copy(fx.rt, (uint64_t)(uintptr_t)fx.host, fx.rt, fx.d, 8);
}
static tf_status peer_past_end(void) { return tf_peer_copy(fx.rt, fx.d, fx.rt, fx.d + 40, 33); }
static tf_status scalar_negative_len(void) {
    return tf_download_scalar(fx.rt, fx.d, fx.host, (size_t)-1);
}

static const struct {
    const char *op;
    tf_status (*call)(void);
    tf_status expected;
    const char *fragment, *fragment2; /* fragment2 may be NULL */
} bad_arguments[] = {
    {"tf_runtime_new_with_options", new_negative, TF_ERROR_INVALID_ARGUMENT,
     "device ordinal -1 is negative", NULL},
    {"tf_runtime_new_with_options", new_missing_device, TF_ERROR_DEVICE_UNAVAILABLE,
     "device 4096 is not available", NULL},
    {"tf_runtime_new_with_options", new_tiny_options, TF_ERROR_INVALID_ARGUMENT,
     "options->struct_size 3 is too small", NULL},
    {"tf_runtime_new_with_options", new_capacity_over, TF_ERROR_INVALID_ARGUMENT,
     "retirement_capacity 1048577 is outside 1..1048576", NULL},
    {"tf_runtime_new_with_options", new_flags, TF_ERROR_INVALID_ARGUMENT,
     "flags 0x4: no flag is defined", NULL},
    {"tf_last_error", last_error_tiny, TF_ERROR_INVALID_ARGUMENT, "out->struct_size 2 is too small",
     NULL},
    {"tf_cublas_enqueue", cublas_mode, TF_ERROR_INVALID_ARGUMENT, "pointer_mode -1 is neither",
     NULL},
    {"tf_module_load", module_out, TF_ERROR_INVALID_ARGUMENT, "image or out is NULL", NULL},
    {"tf_module_load", module_garbage, TF_ERROR_CUDA, "cuModuleLoadDataEx failed", NULL},
    {"tf_module_function", function_name, TF_ERROR_INVALID_ARGUMENT, "name or out_function is NULL",
     NULL},
    {"tf_module_function", function_out, TF_ERROR_INVALID_ARGUMENT, "name or out_function is NULL",
     NULL},
    {"tf_function_set_attribute", attribute_function, TF_ERROR_INVALID_ARGUMENT, "function is NULL",
     NULL},
    {"tf_function_set_attribute", attribute_value, TF_ERROR_CUDA, "cuFuncSetAttribute failed",
     NULL},
    {"tf_kernel_launch", launch_function, TF_ERROR_INVALID_ARGUMENT, "function or config is NULL",
     NULL},
    {"tf_kernel_launch", launch_config, TF_ERROR_INVALID_ARGUMENT, "function or config is NULL",
     NULL},
    {"tf_kernel_launch", launch_tiny, TF_ERROR_INVALID_ARGUMENT,
     "config->struct_size 4 is too small", NULL},
    {"tf_kernel_launch", launch_tail, TF_ERROR_INVALID_ARGUMENT, "config sets fields this library",
     NULL},
    {"tf_kernel_launch", launch_zero, TF_ERROR_INVALID_ARGUMENT,
     "every dimension must be at least 1", NULL},
    {"tf_program_compile", compile_arch, TF_ERROR_INVALID_ARGUMENT,
     "arch -1 and option_count 0 must not be negative", NULL},
    {"tf_program_compile", compile_tail, TF_ERROR_INVALID_ARGUMENT,
     "options set fields this library", NULL},
    {"tf_copy", copy_to_host, TF_ERROR_INVALID_ARGUMENT, "dst 0x", "is not device memory"},
    {"tf_peer_copy", peer_from_host, TF_ERROR_INVALID_ARGUMENT, "src 0x", "is not device memory"},
    {"tf_peer_copy", peer_past_end, TF_ERROR_INVALID_ARGUMENT, "dst range",
     "crosses the end of its allocation"},
    {"tf_download_scalar", scalar_negative_len, TF_ERROR_INVALID_ARGUMENT,
     "is over TF_SCALAR_DOWNLOAD_MAX_BYTES", NULL},
};
#define NBAD (sizeof bad_arguments / sizeof bad_arguments[0])

static void bad_arguments_get_their_status_and_message(void **state) {
    size_t i;
    (void)state;
    tf_launch_config_init(&config, sizeof config);
    for (i = 0; i < NBAD; ++i) {
        out_rt = NULL, out_module = NULL, out_program = NULL;
        assert_failure(bad_arguments[i].call(), bad_arguments[i].expected, bad_arguments[i].op,
                       bad_arguments[i].fragment, bad_arguments[i].fragment2);
        /* Outputs are written only on TF_OK. */
        assert_null(out_rt);
        assert_null(out_module);
        assert_null(out_program);
    }
    assert_null(raw_current_context());
}

/* ---- struct sizes above TF_MAX_STRUCT_SIZE ---------------------------------
 * A struct_size that large is garbage: every call that reads or writes a
 * struct refuses it before touching a byte past the struct. */

/* Room for a struct whose struct_size is one past the bound; zero beyond
 * what the *_init wrote, so only the size itself can be wrong. */
static unsigned char oversized[TF_MAX_STRUCT_SIZE + 64];
typedef void (*any_init)(void *, size_t);

static tf_status oversized_options(void) {
    return tf_runtime_new_with_options(0, (tf_runtime_options *)oversized, &out_rt);
}
static tf_status oversized_last_error(void) { return tf_last_error((tf_error_info *)oversized); }
static tf_status oversized_device_info(void) {
    return tf_device_info(0, (tf_device_properties *)oversized);
}
static tf_status oversized_runtime_device_info(void) {
    return tf_runtime_device_info(fx.rt, (tf_device_properties *)oversized);
}
static tf_status oversized_stats(void) {
    return tf_workspace_stats(fx.rt, (tf_retirement_stats *)oversized);
}
static tf_status oversized_launch(void) {
    tf_launch_config *c = (tf_launch_config *)oversized;
    c->block_z = 0; /* were the size accepted, the launch would still be refused */
    return tf_kernel_launch(fx.rt, fx.function, c, NULL);
}
static tf_status oversized_compile(void) {
    return tf_program_compile(fx.rt, kSource, (tf_compile_options *)oversized, &out_program);
}

static const struct {
    const char *op;
    tf_status (*call)(void);
    any_init init;
    size_t size;
    const char *name;
    int writes; /* an output struct: its bytes must stay as they were */
} oversized_calls[] = {
    {"tf_runtime_new_with_options", oversized_options, (any_init)tf_runtime_options_init,
     sizeof(tf_runtime_options), "options", 0},
    {"tf_last_error", oversized_last_error, (any_init)tf_error_info_init, sizeof(tf_error_info),
     "out", 1},
    {"tf_device_info", oversized_device_info, (any_init)tf_device_properties_init,
     sizeof(tf_device_properties), "out", 1},
    {"tf_runtime_device_info", oversized_runtime_device_info, (any_init)tf_device_properties_init,
     sizeof(tf_device_properties), "out", 1},
    {"tf_workspace_stats", oversized_stats, (any_init)tf_retirement_stats_init,
     sizeof(tf_retirement_stats), "out", 1},
    {"tf_kernel_launch", oversized_launch, (any_init)tf_launch_config_init,
     sizeof(tf_launch_config), "config", 0},
    {"tf_program_compile", oversized_compile, (any_init)tf_compile_options_init,
     sizeof(tf_compile_options), "options", 0},
};

static void check_oversized_refused(uint32_t size) {
    char fragment[128];
    unsigned char before[1024];
    size_t i, j;
    for (i = 0; i < sizeof oversized_calls / sizeof oversized_calls[0]; ++i) {
        memset(oversized, 0, sizeof oversized);
        oversized_calls[i].init(oversized, oversized_calls[i].size);
        memcpy(oversized, &size, sizeof size);
        memcpy(before, oversized, sizeof before);
        out_rt = NULL, out_program = NULL;
        snprintf(fragment, sizeof fragment, "%s->struct_size %u is over TF_MAX_STRUCT_SIZE (%d)",
                 oversized_calls[i].name, (unsigned)size, TF_MAX_STRUCT_SIZE);
        assert_failure(oversized_calls[i].call(), TF_ERROR_INVALID_ARGUMENT, oversized_calls[i].op,
                       fragment, "initialised");
        assert_null(out_rt);
        assert_null(out_program);
        if (oversized_calls[i].writes)
            for (j = 0; j < sizeof before; ++j)
                if (oversized[j] != before[j])
                    fail_msg("%s wrote byte %zu of a refused struct", oversized_calls[i].op, j);
    }
}

static void oversized_structs_are_refused(void **state) {
    (void)state;
    /* One past the bound first: zeros beyond it, so a library without the
     * bound answers (wrongly) instead of reading past the buffer. */
    check_oversized_refused(TF_MAX_STRUCT_SIZE + 1);
    check_oversized_refused(UINT32_MAX); /* garbage: 4 GiB of the caller's memory */
}

/* ---- a newer caller's struct ----------------------------------------------
 * An input struct longer than this library's is accepted only when every
 * byte past the fields it knows is zero: a newer caller that sets any of
 * them, the first included, asks for something this library cannot do. */

enum { TAIL = 8 };

/* Each builds its struct with TAIL more bytes, all zero but byte `k` of the
 * tail (none when k < 0), and makes the call. */
static tf_status options_with_tail(int k) {
    unsigned char buf[sizeof(tf_runtime_options) + TAIL];
    memset(buf, 0, sizeof buf);
    tf_runtime_options_init((tf_runtime_options *)buf, sizeof buf);
    if (k >= 0) buf[sizeof(tf_runtime_options) + k] = 0x80;
    return tf_runtime_new_with_options(0, (tf_runtime_options *)buf, &out_rt);
}
static tf_status launch_with_tail(int k) {
    unsigned char buf[sizeof(tf_launch_config) + TAIL];
    tf_launch_config *c = (tf_launch_config *)buf;
    memset(buf, 0, sizeof buf);
    tf_launch_config_init(c, sizeof buf);
    c->grid_x = 0; /* were the tail ignored, the launch would still be refused */
    if (k >= 0) buf[sizeof(tf_launch_config) + k] = 0x80;
    return tf_kernel_launch(fx.rt, fx.function, c, NULL);
}
static tf_status compile_with_tail(int k) {
    unsigned char buf[sizeof(tf_compile_options) + TAIL];
    memset(buf, 0, sizeof buf);
    tf_compile_options_init((tf_compile_options *)buf, sizeof buf);
    ((tf_compile_options *)buf)->arch = -1; /* refused too, were the tail ignored */
    if (k >= 0) buf[sizeof(tf_compile_options) + k] = 0x80;
    return tf_program_compile(fx.rt, kSource, (tf_compile_options *)buf, &out_program);
}

static const struct {
    const char *op;
    tf_status (*call)(int k);
    const char *refused;  /* the message for a nonzero tail */
    tf_status zero_tail;  /* the status with a zero tail */
    const char *accepted; /* and its message, when not TF_OK */
} tail_calls[] = {
    {"tf_runtime_new_with_options", options_with_tail, "options set fields this library", TF_OK,
     NULL},
    {"tf_kernel_launch", launch_with_tail, "config sets fields this library",
     TF_ERROR_INVALID_ARGUMENT, "every dimension must be at least 1"},
    {"tf_program_compile", compile_with_tail, "options set fields this library",
     TF_ERROR_INVALID_ARGUMENT, "must not be negative"},
};

static void every_byte_of_an_unknown_tail_is_checked(void **state) {
    size_t i;
    int k;
    (void)state;
    for (i = 0; i < sizeof tail_calls / sizeof tail_calls[0]; ++i) {
        for (k = 0; k < TAIL; ++k) {
            tf_status st;
            out_rt = NULL, out_program = NULL;
            st = tail_calls[i].call(k);
            /* Released before judging, so a wrong answer leaks nothing. */
            if (out_rt) assert_ok(tf_runtime_release(out_rt));
            if (out_program) tf_program_release(out_program);
            if (st != TF_ERROR_INVALID_ARGUMENT)
                fail_msg("%s: tail byte %d set: status %d, not TF_ERROR_INVALID_ARGUMENT",
                         tail_calls[i].op, k, (int)st);
            assert_failure(st, TF_ERROR_INVALID_ARGUMENT, tail_calls[i].op, tail_calls[i].refused);
            assert_null(out_rt);
            assert_null(out_program);
        }
        out_rt = NULL, out_program = NULL;
        if (tail_calls[i].zero_tail == TF_OK) {
            assert_ok(tail_calls[i].call(-1));
            assert_ok(tf_runtime_release(out_rt));
        } else {
            assert_failure(tail_calls[i].call(-1), tail_calls[i].zero_tail, tail_calls[i].op,
                           tail_calls[i].accepted);
        }
    }
}

/* Length 0 checks no pointer and does nothing, whatever the pointers are. */
static void zero_lengths_check_nothing(void **state) {
    (void)state;
    assert_ok(tf_upload(fx.rt, NULL, 1, 0));
    assert_ok(tf_copy(fx.rt, 1, 1, 0));
    assert_ok(tf_peer_copy(fx.rt, 1, fx.rt, 1, 0));
    assert_ok(tf_download_scalar(fx.rt, 1, NULL, 0));
    assert_ok(tf_download(fx.rt, 1, NULL, 0));
    assert_ok(tf_free(fx.rt, 0));
    u64 = 77;
    assert_ok(tf_alloc(fx.rt, 0, &u64));
    assert_int_equal(u64, 0);
}

/* ---- calls that need a slot's lock, made while holding it ----------------- */

#define NREENTRY 4
static struct reentry {
    tf_status status[NREENTRY];
    char message[NREENTRY][TF_ERROR_MESSAGE_CAPACITY];
    unsigned char *big; /* pageable, above the 64 KiB staged threshold */
    uint64_t big_device;
} re;

static void keep(int i, tf_status st) {
    re.status[i] = st;
    snprintf(re.message[i], sizeof re.message[i], "%s", tf_last_error_message());
}

/* Runs under the slot's lock: no cmocka assertion may longjmp out of here. */
static int32_t reenter_the_slot(void *stream, void *user_data) {
    unsigned char scalar[4];
    (void)stream, (void)user_data;
    keep(0, tf_stream_enqueue(fx.rt, noop_stream, NULL));
    keep(1, tf_cublas_enqueue(fx.rt, TF_CUBLAS_POINTER_MODE_HOST, noop_cublas, NULL));
    keep(2, tf_download_scalar(fx.rt, fx.d, scalar, sizeof scalar));
    keep(3, tf_download(fx.rt, re.big_device, re.big, 128 << 10));
    return 0;
}

static void slot_lock_reentry_is_refused(void **state) {
    static const char *const ops[NREENTRY] = {"tf_stream_enqueue", "tf_cublas_enqueue",
                                              "tf_download_scalar", "tf_download"};
    int i;
    (void)state;
    re.big = malloc(128 << 10);
    assert_non_null(re.big);
    assert_ok(tf_alloc(fx.rt, 128 << 10, &re.big_device));
    assert_ok(tf_stream_enqueue(fx.rt, reenter_the_slot, NULL));
    for (i = 0; i < NREENTRY; ++i) {
        if (re.status[i] != TF_ERROR_RUNTIME_STATE || !strstr(re.message[i], ops[i]) ||
            !strstr(re.message[i], "is already held by this thread"))
            fail_msg("%s from inside the slot's callback: status %d: %s", ops[i], (int)re.status[i],
                     re.message[i]);
    }
    assert_ok(tf_free(fx.rt, re.big_device));
    free(re.big);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(null_handle_is_an_invalid_argument),
        TF_TEST(released_handle_is_an_invalid_handle),
        TF_TEST(foreign_pointer_is_an_invalid_handle),
        TF_TEST(second_runtime_is_checked_like_the_first),
        TF_TEST(null_outputs_are_refused),
        TF_TEST(null_object_is_an_invalid_argument),
        TF_TEST(foreign_object_is_an_invalid_argument),
        TF_TEST(released_object_is_an_invalid_handle),
        TF_TEST_FIXTURE(bad_arguments_get_their_status_and_message, fixture_up, fixture_down),
        TF_TEST_FIXTURE(oversized_structs_are_refused, fixture_up, fixture_down),
        TF_TEST_FIXTURE(every_byte_of_an_unknown_tail_is_checked, fixture_up, fixture_down),
        TF_TEST_FIXTURE(zero_lengths_check_nothing, fixture_up, fixture_down),
        TF_TEST_FIXTURE(slot_lock_reentry_is_refused, fixture_up, fixture_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

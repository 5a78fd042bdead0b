/* Every function that takes a runtime handle: NULL, a released handle and a
 * pointer that was never a handle each get a documented status and a
 * message naming the operation, never a crash.  Every NULL output too. */
#include <string.h>

#include "support/test_support.h"

static int32_t noop(void *user_data) {
    (void)user_data;
    return 0;
}

/* One call per public function that takes a handle; returns its status. */
typedef tf_status (*handle_call)(tf_runtime *rt);
static uint64_t u64;
static int32_t i32;
static void *ptr;
static tf_runtime *out_rt;
static tf_device_properties props;

static tf_status call_retain(tf_runtime *rt) { return tf_runtime_retain(rt); }
static tf_status call_release(tf_runtime *rt) { return tf_runtime_release(rt); }
static tf_status call_bind(tf_runtime *rt) { return tf_runtime_bind_slot(rt, 0, &out_rt); }
static tf_status call_identity(tf_runtime *rt) { return tf_runtime_identity(rt, &u64); }
static tf_status call_domain(tf_runtime *rt) { return tf_runtime_allocation_domain(rt, &u64); }
static tf_status call_device_info(tf_runtime *rt) { return tf_runtime_device_info(rt, &props); }
static tf_status call_supports(tf_runtime *rt) { return tf_runtime_supports(rt, TF_CAP_RAW_STREAM, &i32); }
static tf_status call_primary(tf_runtime *rt) { return tf_runtime_primary_context(rt, &ptr); }
static tf_status call_slot_count(tf_runtime *rt) { return tf_runtime_slot_count(rt, &i32); }
static tf_status call_current_slot(tf_runtime *rt) { return tf_runtime_current_slot(rt, &i32); }
static tf_status call_stream(tf_runtime *rt) { return tf_runtime_stream(rt, &ptr); }
static tf_status call_slot_stream(tf_runtime *rt) { return tf_runtime_slot_stream(rt, 0, &ptr); }
static tf_status call_with_context(tf_runtime *rt) { return tf_with_context(rt, noop, NULL); }
static tf_status call_sync(tf_runtime *rt) { return tf_runtime_sync(rt); }
static tf_status call_alloc(tf_runtime *rt) { return tf_alloc(rt, 8, &u64); }
static tf_status call_free(tf_runtime *rt) { return tf_free(rt, 1); }
static tf_status call_upload(tf_runtime *rt) { return tf_upload(rt, &u64, 1, 8); }
static tf_status call_copy(tf_runtime *rt) { return tf_copy(rt, 1, 64, 8); }
static tf_status call_peer_available(tf_runtime *rt) { return tf_peer_copy_available(rt, rt, &i32); }
static tf_status call_peer_copy(tf_runtime *rt) { return tf_peer_copy(rt, 1, rt, 64, 8); }
static tf_status call_download_scalar(tf_runtime *rt) { return tf_download_scalar(rt, 1, &u64, 8); }
static tf_status call_download(tf_runtime *rt) { return tf_download(rt, 1, &u64, 8); }

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
    {"tf_alloc", call_alloc},
    {"tf_free", call_free},
    {"tf_upload", call_upload},
    {"tf_copy", call_copy},
    {"tf_peer_copy_available", call_peer_available},
    {"tf_peer_copy", call_peer_copy},
    {"tf_download_scalar", call_download_scalar},
    {"tf_download", call_download},
};
#define NCALLS (sizeof calls / sizeof calls[0])

static void null_handle_is_an_invalid_argument(void **state) {
    size_t i;
    (void)state;
    tf_device_properties_init(&props, sizeof props);
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
    tf_device_properties_init(&props, sizeof props);
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
    tf_device_properties_init(&props, sizeof props);
    for (i = 0; i < NCALLS; ++i)
        assert_failure(calls[i].call((tf_runtime *)junk), TF_ERROR_INVALID_HANDLE, calls[i].op,
                       "is not a runtime handle");
}

/* Every output pointer NULL: refused before anything happens. */
static void null_outputs_are_refused(void **state) {
    tf_runtime *rt = new_runtime();
    (void)state;
    assert_failure(tf_runtime_bind_slot(rt, 0, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_bind_slot", "NULL");
    assert_failure(tf_runtime_identity(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_identity", "NULL");
    assert_failure(tf_runtime_allocation_domain(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_allocation_domain", "NULL");
    assert_failure(tf_runtime_device_info(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_device_info", "NULL");
    assert_failure(tf_runtime_supports(rt, TF_CAP_RAW_STREAM, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_supports", "NULL");
    assert_failure(tf_runtime_primary_context(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_primary_context", "NULL");
    assert_failure(tf_runtime_slot_count(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_slot_count", "NULL");
    assert_failure(tf_runtime_current_slot(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_current_slot", "NULL");
    assert_failure(tf_runtime_stream(rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_stream", "NULL");
    assert_failure(tf_runtime_slot_stream(rt, 0, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_runtime_slot_stream", "NULL");
    assert_failure(tf_with_context(rt, NULL, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_with_context", "NULL");
    assert_failure(tf_alloc(rt, 8, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_alloc", "NULL");
    assert_failure(tf_peer_copy_available(rt, rt, NULL), TF_ERROR_INVALID_ARGUMENT, "tf_peer_copy_available", "NULL");
    {
        tf_device_properties small;
        memset(&small, 0, sizeof small);
        assert_failure(tf_runtime_device_info(rt, &small), TF_ERROR_INVALID_ARGUMENT,
                       "tf_runtime_device_info", "struct_size 0");
    }
    assert_ok(tf_runtime_release(rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(null_handle_is_an_invalid_argument, test_reset),
        cmocka_unit_test_setup(released_handle_is_an_invalid_handle, test_reset),
        cmocka_unit_test_setup(foreign_pointer_is_an_invalid_handle, test_reset),
        cmocka_unit_test_setup(null_outputs_are_refused, test_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

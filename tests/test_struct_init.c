/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The *_init functions write exactly the caller's struct: an older caller
 * (smaller struct_size) never sees a byte written past its struct, a newer
 * one (larger struct_size) gets zeros past the fields this library knows. */
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

typedef void (*init_fn)(void *p, size_t size);

static const struct {
    const char *name;
    init_fn init;
    size_t size;
} inits[] = {
    {"tf_error_info_init", (init_fn)tf_error_info_init, sizeof(tf_error_info)},
    {"tf_device_properties_init", (init_fn)tf_device_properties_init, sizeof(tf_device_properties)},
    {"tf_runtime_options_init", (init_fn)tf_runtime_options_init, sizeof(tf_runtime_options)},
    {"tf_retirement_stats_init", (init_fn)tf_retirement_stats_init, sizeof(tf_retirement_stats)},
    {"tf_launch_config_init", (init_fn)tf_launch_config_init, sizeof(tf_launch_config)},
    {"tf_compile_options_init", (init_fn)tf_compile_options_init, sizeof(tf_compile_options)},
};

static uint32_t struct_size_of(const unsigned char *buf) {
    uint32_t v;
    memcpy(&v, buf, sizeof v);
    return v;
}

static void older_caller_gets_nothing_past_its_struct(void **state) {
    unsigned char buf[1024];
    size_t i, j;
    (void)state;
    for (i = 0; i < sizeof inits / sizeof inits[0]; ++i) {
        const size_t small = 8;
        memset(buf, 0xAB, sizeof buf);
        inits[i].init(buf, small);
        assert_int_equal(struct_size_of(buf), small);
        for (j = small; j < sizeof buf; ++j)
            if (buf[j] != 0xAB)
                fail_msg("%s wrote byte %zu of an %zu-byte struct", inits[i].name, j, small);
    }
}

static void newer_caller_gets_zeros_past_known_fields(void **state) {
    unsigned char buf[1024];
    size_t i, j;
    (void)state;
    for (i = 0; i < sizeof inits / sizeof inits[0]; ++i) {
        const size_t big = inits[i].size + 24;
        memset(buf, 0xAB, sizeof buf);
        inits[i].init(buf, big);
        assert_int_equal(struct_size_of(buf), big);
        for (j = inits[i].size; j < big; ++j)
            if (buf[j] != 0) fail_msg("%s left byte %zu of the newer tail unset", inits[i].name, j);
        for (j = big; j < sizeof buf; ++j) assert_int_equal(buf[j], 0xAB);
    }
}

static void null_and_tiny_sizes_are_ignored(void **state) {
    unsigned char buf[8];
    size_t i;
    (void)state;
    for (i = 0; i < sizeof inits / sizeof inits[0]; ++i) {
        memset(buf, 0xAB, sizeof buf);
        inits[i].init(NULL, inits[i].size);
        inits[i].init(buf, 3);
        assert_int_equal(buf[0], 0xAB);
    }
}

/* A size above TF_MAX_STRUCT_SIZE is garbage (an uninitialised size
 * variable): ignored, nothing written.  The bound itself is a valid size. */
static void sizes_over_the_bound_are_ignored(void **state) {
    unsigned char *buf = malloc(TF_MAX_STRUCT_SIZE + 64);
    size_t i, j;
    (void)state;
    assert_non_null(buf);
    for (i = 0; i < sizeof inits / sizeof inits[0]; ++i) {
        memset(buf, 0xAB, TF_MAX_STRUCT_SIZE + 64);
        inits[i].init(buf, (size_t)TF_MAX_STRUCT_SIZE + 1);
        inits[i].init(buf, (size_t)UINT32_MAX + 1);
        for (j = 0; j < TF_MAX_STRUCT_SIZE + 64; ++j)
            if (buf[j] != 0xAB)
                fail_msg("%s wrote byte %zu for a size over TF_MAX_STRUCT_SIZE", inits[i].name, j);
        inits[i].init(buf, TF_MAX_STRUCT_SIZE);
        assert_int_equal(struct_size_of(buf), TF_MAX_STRUCT_SIZE);
        assert_int_equal(buf[TF_MAX_STRUCT_SIZE - 1], 0);
        assert_int_equal(buf[TF_MAX_STRUCT_SIZE], 0xAB);
    }
    free(buf);
}

/* Defaults come through the size-aware path: an options struct as old as
 * the first release still creates a runtime with the documented defaults. */
static void defaults_survive_a_partial_struct(void **state) {
    tf_runtime_options o;
    int32_t n = 0;
    tf_runtime *rt = NULL;
    (void)state;
    tf_runtime_options_init(&o, offsetof(tf_runtime_options, cublas_workspace_bytes));
    assert_int_equal(o.stream_slots, TF_DEFAULT_STREAM_SLOTS);
    assert_ok(tf_runtime_new_with_options(0, &o, &rt));
    assert_ok(tf_runtime_slot_count(rt, &n));
    assert_int_equal(n, TF_DEFAULT_STREAM_SLOTS);
    assert_ok(tf_runtime_release(rt));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(older_caller_gets_nothing_past_its_struct),
        TF_TEST(newer_caller_gets_zeros_past_known_fields),
        TF_TEST(null_and_tiny_sizes_are_ignored),
        TF_TEST(sizes_over_the_bound_are_ignored),
        TF_TEST(defaults_survive_a_partial_struct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

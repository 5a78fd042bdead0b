/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The first program to run: list the CUDA devices, create a runtime on
 * device 0, run a callback with its primary context current, synchronize and
 * release.  Without a usable GPU it says why and exits with status 1; without
 * a driver at all it also says how to run it against the CUDA driver double.
 *
 *   make run-example
 *   make double && LD_LIBRARY_PATH=build/double build/examples/hello
 */
#include <stdio.h>

#include "tenferro_gpu.h"

static int32_t inside_context(void *user_data) {
    tf_runtime *rt = (tf_runtime *)user_data;
    void *stream = NULL;
    int32_t slot = -1;
    /* Anything that needs the device's context goes here: a cuBLAS call,
     * a kernel launch from another library, ... */
    if (tf_runtime_stream(rt, &stream) != TF_OK) return 1;
    if (tf_runtime_current_slot(rt, &slot) != TF_OK) return 1;
    printf("callback ran with the primary context current; stream slot %d, stream %p\n", (int)slot,
           stream);
    return 0;
}

static int cannot_run(const char *what) {
    tf_status st = tf_last_error_status();
    fprintf(stderr, "hello: cannot run on this machine: %s failed: %s (%s)\n", what,
            tf_status_string(st), tf_last_error_message());
    if (st == TF_ERROR_DRIVER_NOT_FOUND)
        fprintf(stderr,
                "hello: no GPU here? Run it against the CUDA driver double instead:\n"
                "  make double && LD_LIBRARY_PATH=build/double build/examples/hello\n"
                "(or `make install-double` for your own programs: docs/testing.md)\n");
    return 1;
}

int main(void) {
    int32_t count = 0, i;
    tf_runtime *rt = NULL;
    tf_status st;

    printf("tenferro-gpu %s\n", tf_version_string());
    if (tf_device_count(&count) != TF_OK) return cannot_run("tf_device_count");
    if (count == 0) {
        fprintf(stderr, "hello: cannot run on this machine: the driver reports no CUDA device\n");
        return 1;
    }
    for (i = 0; i < count; ++i) {
        tf_device_properties p;
        tf_device_properties_init(&p, sizeof p);
        if (tf_device_info(i, &p) != TF_OK) return cannot_run("tf_device_info");
        printf("device %d: %s, compute capability %d.%d, %.1f GiB\n", (int)i, p.name,
               (int)p.compute_capability_major, (int)p.compute_capability_minor,
               (double)p.total_memory_bytes / (1024.0 * 1024.0 * 1024.0));
    }
    if (tf_runtime_new(0, &rt) != TF_OK) return cannot_run("tf_runtime_new");
    st = tf_with_context(rt, inside_context, rt);
    if (st == TF_OK) st = tf_runtime_sync(rt);
    if (st != TF_OK) {
        cannot_run("the runtime");
        tf_runtime_release(rt);
        return 1;
    }
    tf_runtime_release(rt);
    printf("ok\n");
    return 0;
}

/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* A program built the way users build against an installed tenferro-gpu:
 *
 *   cc consumer.c $(pkg-config --cflags --libs tenferro_gpu)
 *
 * tools/ci/check-package builds it against a staged `make install` with
 * -Wall -Wextra -Werror and runs it.  It checks that the library it loaded is
 * the one its header describes, then drives the device: on a machine without
 * a CUDA driver it reports the driver missing and exits 0 (that is the
 * library working as documented); against the driver double or a real GPU
 * it creates a runtime, runs a callback in its context, synchronizes and
 * releases it.  Any other failure exits 1 with the library's message.
 *
 * Output lines, for the script: "library <path>", "version <x.y.z>", then
 * "driver missing: <message>" or "devices <n>" and "runtime ok".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <tenferro_gpu.h>

static int failed(const char *what) {
    fprintf(stderr, "consumer: %s failed: %s: %s\n", what, tf_status_string(tf_last_error_status()),
            tf_last_error_message());
    return 1;
}

static int32_t in_context(void *user_data) {
    int *ran = (int *)user_data;
    *ran = 1;
    return 0;
}

static int loaded_library_matches_header(void) {
    /* A union, not a cast: ISO C has no conversion from function pointer to
     * void *, and this builds under -pedantic too. */
    union {
        uint32_t (*fn)(void);
        void *address;
    } version;
    Dl_info where;
    version.fn = tf_version;
    if (!dladdr(version.address, &where) || !where.dli_fname) {
        fprintf(stderr, "consumer: cannot tell which library holds tf_version\n");
        return 0;
    }
    printf("library %s\n", where.dli_fname);
    printf("version %s\n", tf_version_string());
    if (tf_version() != TF_VERSION_NUMBER || strcmp(tf_version_string(), TF_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: the library is %s (%u) but the header says %s (%d)\n",
                tf_version_string(), (unsigned)tf_version(), TF_VERSION_STRING, TF_VERSION_NUMBER);
        return 0;
    }
    return 1;
}

int main(void) {
    int32_t count = 0;
    int ran = 0;
    tf_runtime *rt = NULL;
    tf_status st;

    if (!loaded_library_matches_header()) return 1;
    st = tf_device_count(&count);
    if (st == TF_ERROR_DRIVER_NOT_FOUND) {
        printf("driver missing: %s\n", tf_last_error_message());
        return 0;
    }
    if (st != TF_OK) return failed("tf_device_count");
    printf("devices %d\n", (int)count);
    if (count < 1) return 0;
    if (tf_runtime_new(0, &rt) != TF_OK) return failed("tf_runtime_new");
    if (tf_with_context(rt, in_context, &ran) != TF_OK || !ran) {
        failed("tf_with_context");
        tf_runtime_release(rt);
        return 1;
    }
    if (tf_runtime_sync(rt) != TF_OK) {
        failed("tf_runtime_sync");
        tf_runtime_release(rt);
        return 1;
    }
    if (tf_runtime_release(rt) != TF_OK) return failed("tf_runtime_release");
    printf("runtime ok\n");
    return 0;
}

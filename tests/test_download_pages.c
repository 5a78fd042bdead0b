/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Bulk downloads into pageable memory whose pages are not all there yet:
 * never touched (the library faults them in ahead of its copy threads),
 * partly touched, shared, or a private mapping of a file.  The bytes
 * downloaded arrive, and no byte outside the destination changes, even in
 * the pages the destination shares with its neighbours.  Runs on the double
 * and on a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support/test_support.h"
#include "support/transfer_support.h"

#define MiB ((size_t)1 << 20)
#define PAGE ((size_t)4096)

static const size_t sizes[] = {(64 << 10) + 1, MiB + 17, 5 * MiB + 3, 64 * MiB};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static unsigned char *map_fresh(size_t bytes, int flags) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

static void assert_bytes(const unsigned char *p, size_t n, unsigned char value) {
    size_t i;
    for (i = 0; i < n; ++i)
        if (p[i] != value) fail_msg("byte %zu is 0x%02x, not 0x%02x", i, p[i], value);
}

/* dst starts 7 bytes before the end of the mapping's first page, whose
 * other bytes hold a guard (so that page is touched and every later one is
 * fresh); after dst comes the untouched rest of its last page, then a page
 * with a guard at its end. */
static void fresh_round_trip(tf_runtime *rt, size_t n, int map_flags, uint32_t seed) {
    const size_t lead = PAGE - 7, bytes = lead + n + 2 * PAGE;
    const size_t tail = bytes - lead - n;
    unsigned char *src = malloc(n), *map = map_fresh(bytes, map_flags), *dst = map + lead;
    uint64_t d = lib_alloc(rt, n);
    assert_non_null(src);
    fill_pattern(src, n, seed);
    assert_ok(tf_upload(rt, src, d, n));
    memset(map, 0xA5, lead);
    memset(map + bytes - 8, 0x5A, 8);
    assert_ok(tf_download(rt, d, dst, n));
    assert_pattern(dst, n, seed);
    assert_bytes(map, lead, 0xA5);
    assert_bytes(dst + n, tail - 8, 0);
    assert_bytes(map + bytes - 8, 8, 0x5A);
    lib_free(rt, d);
    assert_int_equal(munmap(map, bytes), 0);
    free(src);
}

static void fresh_round_trips(tf_runtime *rt, int map_flags) {
    size_t i;
    for (i = 0; i < NSIZES; ++i) fresh_round_trip(rt, sizes[i], map_flags, (uint32_t)i + 40);
    assert_null(raw_current_context());
    assert_ok(tf_runtime_release(rt));
}

static void fresh_private_memory_with_defaults(void **state) {
    (void)state;
    fresh_round_trips(new_runtime(), MAP_PRIVATE);
}

/* 64 KiB chunks, 3 threads: many steps, each split over the pool. */
static void fresh_private_memory_in_small_chunks(void **state) {
    (void)state;
    fresh_round_trips(runtime_with(1, 3, 64 << 10), MAP_PRIVATE);
}

/* One thread: the caller faults in and copies every step itself. */
static void fresh_private_memory_with_one_thread(void **state) {
    (void)state;
    fresh_round_trips(runtime_with(1, 1, 1 << 20), MAP_PRIVATE);
}

static void fresh_shared_memory(void **state) {
    (void)state;
    fresh_round_trips(runtime_with(1, 4, 256 << 10), MAP_SHARED);
}

/* Every other 64 KiB block touched: steps start on touched and on fresh
 * pages alike. */
static void partly_touched_memory(void **state) {
    const size_t n = 6 * MiB + 5, block = 64 << 10;
    tf_runtime *rt = runtime_with(1, 4, 512 << 10);
    unsigned char *src = malloc(n), *dst = map_fresh(n, MAP_PRIVATE);
    uint64_t d = lib_alloc(rt, n);
    size_t off;
    (void)state;
    assert_non_null(src);
    fill_pattern(src, n, 9);
    assert_ok(tf_upload(rt, src, d, n));
    for (off = 0; off < n; off += 2 * block) dst[off] = 1;
    assert_ok(tf_download(rt, d, dst, n));
    assert_pattern(dst, n, 9);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    assert_int_equal(munmap(dst, n), 0);
    free(src);
}

/* A private mapping of a file takes the bytes; the file keeps its own. */
static void private_file_mapping_keeps_the_file(void **state) {
    const size_t n = 3 * MiB + 100;
    tf_runtime *rt = new_runtime();
    unsigned char *src = malloc(n), *back = malloc(n), *dst;
    char path[] = "/tmp/tf-download-pages-XXXXXX";
    const int fd = mkstemp(path);
    uint64_t d = lib_alloc(rt, n);
    (void)state;
    assert_true(fd >= 0);
    unlink(path);
    assert_non_null(src);
    assert_non_null(back);
    fill_pattern(src, n, 11);
    assert_int_equal(write(fd, src, n), (ssize_t)n); /* the file holds seed 11 */
    fill_pattern(src, n, 12);
    assert_ok(tf_upload(rt, src, d, n)); /* the device holds seed 12 */
    dst = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    assert_true(dst != MAP_FAILED);
    assert_ok(tf_download(rt, d, dst, n));
    assert_pattern(dst, n, 12);
    assert_int_equal(pread(fd, back, n, 0), (ssize_t)n);
    assert_pattern(back, n, 11);
    assert_int_equal(munmap(dst, n), 0);
    close(fd);
    lib_free(rt, d);
    assert_ok(tf_runtime_release(rt));
    free(back);
    free(src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(fresh_private_memory_with_defaults),
        TF_TEST(fresh_private_memory_in_small_chunks),
        TF_TEST(fresh_private_memory_with_one_thread),
        TF_TEST(fresh_shared_memory),
        TF_TEST(partly_touched_memory),
        TF_TEST(private_file_mapping_keeps_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

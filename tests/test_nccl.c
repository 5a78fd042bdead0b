/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* NCCL on the runtimes' slot streams: an all-reduce across two GPUs whose
 * work is queued with tf_stream_enqueue, in the two ways programs drive
 * NCCL:
 *  - one process per GPU: each creates a runtime on its device, joins the
 *    communicator (ncclCommInitRank inside tf_with_context) and queues the
 *    all-reduce on its slot stream between an upload and a download;
 *  - one process driving both GPUs: the ranks are joined and the
 *    all-reduces queued inside ncclGroupStart/ncclGroupEnd, one
 *    tf_stream_enqueue per runtime, while the caller keeps a context of its
 *    own current, which must be current again after every step.
 *
 * NCCL is loaded here at run time (dlopen "libnccl.so.2", or the path in
 * TF_TEST_NCCL); the library never links it.  Against the driver double the
 * loader finds the double's libnccl.so.2 beside its libcuda.so.1
 * (tests/cuda_double/nccl_double.cpp: ranks meet in shared memory, across
 * processes too) and every process is given two devices; on the real
 * driver, with fewer than two GPUs or without NCCL the tests skip and say
 * why.  NVLink multicast stays off (NCCL_NVLS_ENABLE=0), and each scenario
 * runs in its own process with a time limit, so a hanging NCCL fails the
 * test instead of hanging the suite. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

/* ---- the few NCCL declarations used (nccl.h is not needed to build) ---- */

#define NCCL_ID_BYTES 128
typedef struct {
    char internal[NCCL_ID_BYTES];
} nccl_id;
typedef void *nccl_comm;
typedef int nccl_result; /* ncclResult_t: 0 is ncclSuccess */
#define NCCL_FLOAT32 7   /* ncclFloat32 */
#define NCCL_SUM 0       /* ncclSum */

#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>
/* Where the toolkit has the header, hold these declarations to it. */
_Static_assert(sizeof(ncclUniqueId) == sizeof(nccl_id), "ncclUniqueId size");
_Static_assert(ncclSuccess == 0 && ncclFloat32 == NCCL_FLOAT32 && ncclSum == NCCL_SUM,
               "NCCL enum values");
#endif
#endif

struct nccl {
    nccl_result (*get_version)(int *version);
    nccl_result (*get_unique_id)(nccl_id *id);
    nccl_result (*comm_init_rank)(nccl_comm *comm, int nranks, nccl_id id, int rank);
    nccl_result (*all_reduce)(const void *send, void *recv, size_t count, int type, int op,
                              nccl_comm comm, void *stream);
    nccl_result (*group_start)(void);
    nccl_result (*group_end)(void);
    nccl_result (*comm_destroy)(nccl_comm comm);
    const char *(*error_string)(nccl_result result);
};

/* NCCL's functions, or NULL with the reason in `why`. */
static const struct nccl *load_nccl(char *why, size_t cap) {
    static struct nccl n;
    const char *path = getenv("TF_TEST_NCCL");
    void *h;
    if (!path || !*path) path = "libnccl.so.2";
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, cap,
                 "cannot load %s (%s); put its folder on LD_LIBRARY_PATH or set "
                 "TF_TEST_NCCL to its path",
                 path, dlerror());
        return NULL;
    }
#define NCCL_SYM(field, name)                          \
    if (!(*(void **)&n.field = dlsym(h, name))) {      \
        snprintf(why, cap, "%s lacks %s", path, name); \
        return NULL;                                   \
    }
    NCCL_SYM(get_version, "ncclGetVersion")
    NCCL_SYM(get_unique_id, "ncclGetUniqueId")
    NCCL_SYM(comm_init_rank, "ncclCommInitRank")
    NCCL_SYM(all_reduce, "ncclAllReduce")
    NCCL_SYM(group_start, "ncclGroupStart")
    NCCL_SYM(group_end, "ncclGroupEnd")
    NCCL_SYM(comm_destroy, "ncclCommDestroy")
    NCCL_SYM(error_string, "ncclGetErrorString")
#undef NCCL_SYM
    return &n;
}

static const struct nccl *nccl_or_report(void) {
    char why[512];
    const struct nccl *n = load_nccl(why, sizeof why);
    if (!n) fprintf(stderr, "%s\n", why);
    return n;
}

/* What NCCL said, on stderr; returns r. */
static nccl_result nccl_said(const struct nccl *n, const char *call, nccl_result r) {
    if (r != 0) fprintf(stderr, "%s failed: %d (%s)\n", call, r, n->error_string(r));
    return r;
}

/* ---- one rank's data ------------------------------------------------- */

enum { RANKS = 2, TIME_LIMIT_S = 100 };
/* Odd, so the reduction's last piece is partial. */
static const size_t count = ((size_t)1 << 22) + 3;

/* Rank r's input: small integers, so every sum is exact in float. */
static float input(int rank, size_t i) { return (float)((rank + 1) * (int)(i % 997)); }
static float sum_of_ranks(size_t i) { return (float)(RANKS * (RANKS + 1) / 2 * (int)(i % 997)); }

struct rank {
    const struct nccl *n;
    tf_runtime *rt;
    nccl_id id;
    int index;
    nccl_comm comm;
    uint64_t buf;
    float *host;
};

/* A runtime on the rank's device, its buffer allocated and the input upload
 * queued on the slot stream (not waited for: the all-reduce is queued after
 * it on the same stream). */
static int open_rank(struct rank *r) {
    size_t i;
    r->host = malloc(count * sizeof(float));
    SCENARIO_CHECK(r->host != NULL);
    SCENARIO_CHECK(tf_runtime_new(r->index, &r->rt) == TF_OK);
    SCENARIO_CHECK(tf_alloc(r->rt, count * sizeof(float), &r->buf) == TF_OK);
    for (i = 0; i < count; ++i) r->host[i] = input(r->index, i);
    SCENARIO_CHECK(tf_upload(r->rt, r->host, r->buf, count * sizeof(float)) == TF_OK);
    return 0;
}

static int32_t join(void *arg) {
    struct rank *r = arg;
    return nccl_said(r->n, "ncclCommInitRank",
                     r->n->comm_init_rank(&r->comm, RANKS, r->id, r->index));
}

static int32_t all_reduce(void *stream, void *arg) {
    struct rank *r = arg;
    void *p = (void *)(uintptr_t)r->buf;
    return nccl_said(r->n, "ncclAllReduce",
                     r->n->all_reduce(p, p, count, NCCL_FLOAT32, NCCL_SUM, r->comm, stream));
}

static int32_t leave(void *arg) {
    struct rank *r = arg;
    return nccl_said(r->n, "ncclCommDestroy", r->n->comm_destroy(r->comm));
}

/* The download, queued after the all-reduce on the slot stream, holds the
 * sum of every rank's input. */
static int check_sum(struct rank *r) {
    size_t i;
    memset(r->host, 0, count * sizeof(float));
    SCENARIO_CHECK(tf_download(r->rt, r->buf, r->host, count * sizeof(float)) == TF_OK);
    for (i = 0; i < count; ++i)
        if (r->host[i] != sum_of_ranks(i)) {
            fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", r->index, i,
                    (double)r->host[i], (double)sum_of_ranks(i));
            return 1;
        }
    return 0;
}

/* After every rank of the process has left (ncclCommDestroy): the last
 * one to leave frees what NCCL holds in every rank's context, so no
 * runtime is released before that. */
static int close_rank(struct rank *r) {
    SCENARIO_CHECK(tf_free(r->rt, r->buf) == TF_OK);
    SCENARIO_CHECK(tf_runtime_sync(r->rt) == TF_OK);
    SCENARIO_CHECK(tf_runtime_release(r->rt) == TF_OK);
    free(r->host);
    return 0;
}

/* ---- the unique id travels to the rank processes in hex ------------------ */

static void id_to_hex(const nccl_id *id, char *hex) {
    size_t i;
    for (i = 0; i < NCCL_ID_BYTES; ++i)
        sprintf(hex + 2 * i, "%02x", (unsigned)(unsigned char)id->internal[i]);
}

static int hex_to_id(const char *hex, nccl_id *id) {
    size_t i;
    if (!hex || strlen(hex) != 2 * NCCL_ID_BYTES) return -1;
    for (i = 0; i < NCCL_ID_BYTES; ++i) {
        unsigned v = 0;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
        id->internal[i] = (char)v;
    }
    return 0;
}

/* ---- scenarios (each in a fresh process) ---------------------------------- */

/* The double shows each process two devices (the real driver what it has). */
static void two_devices_on_the_double(void) {
    if (tfd()) tfd()->tfd_set_devices(RANKS);
}

/* One rank of a communicator spread over processes: TF_NCCL_RANK and
 * TF_NCCL_ID (the parent's ncclGetUniqueId in hex). */
static int child_rank(void) {
    struct rank r;
    two_devices_on_the_double();
    memset(&r, 0, sizeof r);
    SCENARIO_CHECK((r.n = nccl_or_report()) != NULL);
    SCENARIO_CHECK(getenv("TF_NCCL_RANK") != NULL);
    r.index = atoi(getenv("TF_NCCL_RANK"));
    SCENARIO_CHECK(hex_to_id(getenv("TF_NCCL_ID"), &r.id) == 0);
    if (open_rank(&r)) return 1;
    SCENARIO_CHECK(tf_with_context(r.rt, join, &r) == TF_OK);
    SCENARIO_CHECK(raw_current_context() == NULL);
    SCENARIO_CHECK(tf_stream_enqueue(r.rt, all_reduce, &r) == TF_OK);
    SCENARIO_CHECK(raw_current_context() == NULL);
    if (check_sum(&r)) return 1;
    SCENARIO_CHECK(tf_with_context(r.rt, leave, &r) == TF_OK);
    if (close_rank(&r)) return 1;
    SCENARIO_CHECK(raw_current_context() == NULL);
    return 0;
}

static int32_t group_end(void *arg) {
    const struct nccl *n = arg;
    return nccl_said(n, "ncclGroupEnd", n->group_end());
}

/* One process, both GPUs, one thread: joins and all-reduces grouped.
 * ncclGroupEnd switches devices itself; it runs inside tf_with_context so
 * that the caller's own context (another context of device 0) is current
 * again afterwards, which is checked after every step. */
static int child_both(void) {
    struct rank r[RANKS];
    const struct nccl *n;
    nccl_id id;
    void *mine;
    int i;
    two_devices_on_the_double();
    memset(r, 0, sizeof r);
    SCENARIO_CHECK((n = nccl_or_report()) != NULL);
    SCENARIO_CHECK(nccl_said(n, "ncclGetUniqueId", n->get_unique_id(&id)) == 0);
    mine = raw_create_context();
    raw_set_current_context(mine);
    for (i = 0; i < RANKS; ++i) {
        r[i].n = n;
        r[i].id = id;
        r[i].index = i;
        if (open_rank(&r[i])) return 1;
    }
    SCENARIO_CHECK(raw_current_context() == mine);
    SCENARIO_CHECK(nccl_said(n, "ncclGroupStart", n->group_start()) == 0);
    for (i = 0; i < RANKS; ++i) SCENARIO_CHECK(tf_with_context(r[i].rt, join, &r[i]) == TF_OK);
    SCENARIO_CHECK(tf_with_context(r[0].rt, group_end, (void *)n) == TF_OK);
    SCENARIO_CHECK(raw_current_context() == mine);
    SCENARIO_CHECK(nccl_said(n, "ncclGroupStart", n->group_start()) == 0);
    for (i = 0; i < RANKS; ++i)
        SCENARIO_CHECK(tf_stream_enqueue(r[i].rt, all_reduce, &r[i]) == TF_OK);
    SCENARIO_CHECK(tf_with_context(r[0].rt, group_end, (void *)n) == TF_OK);
    SCENARIO_CHECK(raw_current_context() == mine);
    for (i = 0; i < RANKS; ++i)
        if (check_sum(&r[i])) return 1;
    for (i = 0; i < RANKS; ++i) SCENARIO_CHECK(tf_with_context(r[i].rt, leave, &r[i]) == TF_OK);
    SCENARIO_CHECK(raw_current_context() == mine);
    for (i = 0; i < RANKS; ++i)
        if (close_rank(&r[i])) return 1;
    SCENARIO_CHECK(raw_current_context() == mine);
    raw_set_current_context(NULL);
    raw_destroy_context(mine);
    return 0;
}

/* ---- the tests ------------------------------------------------------------ */

/* Skips unless the driver shows two GPUs and NCCL loads (the double always
 * does, with its own NCCL). */
static const struct nccl *require_nccl_and_two_gpus(void) {
    char why[512];
    int32_t gpus = 0;
    int version = 0;
    const struct nccl *n;
    two_devices_on_the_double();
    if (tf_device_count(&gpus) != TF_OK || gpus < RANKS) {
        print_message("    (needs %d GPUs, found %d: skipped)\n", RANKS, (int)gpus);
        skip();
    }
    if (!(n = load_nccl(why, sizeof why))) {
        print_message("    (NCCL not found: %s: skipped)\n", why);
        skip();
    }
    n->get_version(&version);
    print_message("    NCCL %d, %d GPUs, NCCL_NVLS_ENABLE=%s\n", version, (int)gpus,
                  getenv("NCCL_NVLS_ENABLE"));
    return n;
}

static void all_reduce_one_process_per_gpu(void **state) {
    const struct nccl *n;
    nccl_id id;
    char id_var[16 + 2 * NCCL_ID_BYTES + 1], rank_var[RANKS][32];
    const char *env[RANKS][3];
    pid_t pid[RANKS];
    int i, rc[RANKS];
    (void)state;
    n = require_nccl_and_two_gpus();
    /* The root of the bootstrap lives here, while the ranks connect to it. */
    assert_int_equal(nccl_said(n, "ncclGetUniqueId", n->get_unique_id(&id)), 0);
    strcpy(id_var, "TF_NCCL_ID=");
    id_to_hex(&id, id_var + strlen(id_var));
    for (i = 0; i < RANKS; ++i) {
        snprintf(rank_var[i], sizeof rank_var[i], "TF_NCCL_RANK=%d", i);
        env[i][0] = id_var;
        env[i][1] = rank_var[i];
        env[i][2] = NULL;
        pid[i] = start_child("rank", env[i]);
        assert_true(pid[i] > 0);
    }
    for (i = 0; i < RANKS; ++i) rc[i] = wait_child(pid[i], TIME_LIMIT_S);
    for (i = 0; i < RANKS; ++i) {
        if (rc[i] == -2) print_error("rank %d ran past %d s and was killed\n", i, TIME_LIMIT_S);
        assert_int_equal(rc[i], 0);
    }
}

static void all_reduce_one_process_both_gpus(void **state) {
    int rc;
    (void)state;
    require_nccl_and_two_gpus();
    rc = wait_child(start_child("both", NULL), TIME_LIMIT_S);
    if (rc == -2) print_error("the scenario ran past %d s and was killed\n", TIME_LIMIT_S);
    assert_int_equal(rc, 0);
}

static const struct child_scenario scenarios[] = {
    {"rank", child_rank},
    {"both", child_both},
    {NULL, NULL},
};

int main(void) {
    const struct CMUnitTest tests[] = {
        TF_TEST(all_reduce_one_process_per_gpu),
        TF_TEST(all_reduce_one_process_both_gpus),
    };
    /* Set before NCCL is loaded, here and in every child: NVLink multicast
     * stays off; the bootstrap talks over loopback unless told otherwise;
     * NCCL says why when it fails. */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    setenv("NCCL_DEBUG", "WARN", 0);
    child_dispatch(scenarios);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

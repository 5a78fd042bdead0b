// SPDX-License-Identifier: MIT OR Apache-2.0
// Samples of the process's resources, taken while the workers are paused.
#include <dirent.h>

#include <cstring>
#include <fstream>

#include "soak.h"

namespace soak {
namespace {

long rss_kib() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.compare(0, 6, "VmRSS:") == 0) return std::atol(line.c_str() + 6);
    return -1;
}

// Entries of a /proc folder, and how many of them satisfy `pick`.
template <class Pick>
long count_entries(const char *dir, Pick &&pick) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    long n = 0;
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.' && pick(e->d_name)) ++n;
    closedir(d);
    return n;
}

bool is_copy_thread(const char *tid) {
    std::ifstream in(std::string("/proc/self/task/") + tid + "/comm");
    std::string name;
    std::getline(in, name);
    return name == "tf-download";
}

struct MemInfo {
    World *w;
    long used_mib;
};

int32_t device_used(void *user_data) {
    MemInfo *m = static_cast<MemInfo *>(user_data);
    size_t free_b = 0, total_b = 0;
    if (m->w->raw.cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS) return 1;
    m->used_mib = static_cast<long>((total_b - free_b) >> 20);
    return 0;
}

}  // namespace

Sample take_sample(World &w, double t) {
    Sample s;
    s.t = t;
    // Finish everything queued on every slot and run the retirements it
    // completed, so that what remains is only what the runtime caches.
    for (int32_t slot = 0; slot < w.slots; ++slot) {
        tf_runtime *bound = nullptr;
        if (!ok(w, "tf_runtime_bind_slot", tf_runtime_bind_slot(w.shared, slot, &bound))) continue;
        ok(w, "tf_runtime_sync", tf_runtime_sync(bound));
        ok(w, "tf_runtime_release", tf_runtime_release(bound));
    }
    ok(w, "tf_workspace_poll", tf_workspace_poll(w.shared));
    tf_retirement_stats_init(&s.retire, sizeof s.retire);
    ok(w, "tf_workspace_stats", tf_workspace_stats(w.shared, &s.retire));
    if (s.retire.in_flight != 0 || w.shared_tally.accepted.load() != w.shared_tally.released.load())
        mismatch(w, "retirement accounting",
                 "after syncing every slot: in_flight " + std::to_string(s.retire.in_flight) +
                     ", accepted " + std::to_string(w.shared_tally.accepted.load()) +
                     ", released " + std::to_string(w.shared_tally.released.load()));
    if (s.retire.leaked != 0)
        mismatch(w, "retirement accounting", std::to_string(s.retire.leaked) + " leaked");
    if (w.raw.cuMemGetInfo) {
        MemInfo m{&w, -1};
        if (ok(w, "tf_with_context (cuMemGetInfo)", tf_with_context(w.shared, device_used, &m)))
            s.device_used_mib = m.used_mib;
    }
    s.rss_kib = rss_kib();
    s.threads = count_entries("/proc/self/task", [](const char *) { return true; });
    s.copy_threads = count_entries("/proc/self/task", is_copy_thread);
    s.fds = count_entries("/proc/self/fd", [](const char *) { return true; }) - 1;  // our own
    tf_memory_pool_stats_init(&s.pool, sizeof s.pool);
    ok(w, "tf_memory_stats", tf_memory_stats(w.shared, &s.pool));
    for (int k = 0; k < 4 && w.raw.tfcd_live; ++k) s.shim[k] = w.raw.tfcd_live(k);
    for (int k = 0; k < 8 && w.raw.tfd_live; ++k) s.dbl[k] = w.raw.tfd_live(k);
    for (int k = 0; k < K_KIND_COUNT; ++k) s.ops += w.ops[k].load();
    s.errors = w.errors.total();
    return s;
}

void print_sample(const char *label, const Sample &s) {
    std::printf("sample %-6s t=%6.1fs  ops %ld  errors %ld\n", label, s.t, s.ops, s.errors);
    std::printf("  process: rss %.1f MiB, threads %ld (tf-download %ld), fds %ld",
                s.rss_kib / 1024.0, s.threads, s.copy_threads, s.fds);
    if (s.device_used_mib >= 0)
        std::printf(", device memory in use %ld MiB (cuMemGetInfo)\n", s.device_used_mib);
    else
        std::printf(", device memory in use: n/a (the driver has no cuMemGetInfo)\n");
    if (s.shim[0] >= 0)
        std::printf(
            "  library through the counting shim: streams %ld, events %ld, page-locked %ld, "
            "device allocations %ld\n",
            s.shim[0], s.shim[1], s.shim[2], s.shim[3]);
    if (s.dbl[0] >= 0)
        std::printf(
            "  driver double (tfd_live): streams %ld, events %ld, device allocations %ld, "
            "page-locked %ld, modules %ld, cuBLAS handles %ld, NVRTC programs %ld\n",
            s.dbl[0], s.dbl[1], s.dbl[2], s.dbl[3], s.dbl[4], s.dbl[5], s.dbl[6]);
    std::printf(
        "  device pool: reserved %.1f MiB (peak %.1f), in use %.1f MiB (peak %.1f), "
        "allocations %llu, frees %llu, out-of-memory retries %llu\n",
        s.pool.reserved_bytes / 1048576.0, s.pool.reserved_peak / 1048576.0,
        s.pool.in_use_bytes / 1048576.0, s.pool.in_use_peak / 1048576.0,
        (unsigned long long)s.pool.allocations, (unsigned long long)s.pool.frees,
        (unsigned long long)s.pool.oom_retries);
    std::printf(
        "  shared runtime's retirements: deferred %llu, released %llu, barrier fallbacks "
        "%llu, leaked %llu, in flight %llu (most %llu)\n",
        (unsigned long long)s.retire.deferred, (unsigned long long)s.retire.released,
        (unsigned long long)s.retire.barrier_fallbacks, (unsigned long long)s.retire.leaked,
        (unsigned long long)s.retire.in_flight, (unsigned long long)s.retire.max_in_flight);
    std::fflush(stdout);
}

}  // namespace soak

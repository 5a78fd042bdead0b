// SPDX-License-Identifier: MIT OR Apache-2.0
// NCCL double (libnccl.so.2): the few entry points a program needs for an
// all-reduce on its streams -- ncclGetVersion, ncclGetUniqueId,
// ncclCommInitRank, ncclGroupStart/End, ncclAllReduce (sum of int32, float
// or double), ncclCommDestroy, ncclGetErrorString.  Calls are logged, counted
// and fault-injected through the driver double (tfd_enter_ex).
//
// A collective is queued on its stream (tfd_enqueue) and runs when the
// stream runs it: the rank puts its send buffer into a segment shared by
// the clique (a file in /dev/shm named after the unique id and the
// collective's number), waits until every rank has put its own, writes the
// sum into its receive buffer and leaves; the last to leave removes the
// segment.  Ranks may live in other processes (one process per GPU) or in
// this one (one process driving several GPUs): a rank of this process that
// has not arrived yet is made to arrive by running its stream up to its
// collective (tfd_advance), since the double's streams run only when made
// to.  So in one process every rank's collective must be queued before any
// of them runs -- as in NCCL, where a lone rank's collective never ends.
// A collective that cannot complete (a rank of this process with nothing
// queued, a rank elsewhere that does not arrive within kArrivalTimeout)
// faults its context with CUDA_ERROR_LAUNCH_TIMEOUT instead of hanging.
//
// ncclCommInitRank never blocks (ranks meet at their first collective);
// groups only nest.
#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "companion.h"

namespace tfd {
namespace {

// The values of nccl.h (not needed to build).
enum Result {
    kSuccess = 0,
    kSystemError = 2,
    kInternalError = 3,
    kInvalidArgument = 4,
    kInvalidUsage = 5,
};
enum DataType { kInt32 = 2, kFloat32 = 7, kFloat64 = 8 };
constexpr int kSum = 0;
constexpr int kVersion = 22305;  // NCCL 2.23.5, NCCL_VERSION's encoding
constexpr size_t kIdBytes = 128;
constexpr char kIdMagic[] = "tfd-nccl1:";
constexpr auto kArrivalTimeout = std::chrono::seconds(60);

struct UniqueId {
    char internal[kIdBytes];
};

template <class Body>
int run(const char *entry, Body body)
{
    return run_companion(entry, int(kSystemError), int(kInternalError), body);
}

// ---- communicators ----------------------------------------------------------

struct Comm {
    std::string clique;  // from the unique id
    int nranks = 0;
    int rank = 0;
    uint64_t next = 0;  // number of its next collective
};

// The ranks of this process in one collective: queued (not run yet, and
// where each sits), started (arrived, or arriving further up the stack),
// and how many of those finished.
struct Pending {
    std::map<int, tfd_ticket> queued;
    std::set<int> started;
    size_t finished = 0;
};
using CollectiveKey = std::pair<std::string, uint64_t>;  // clique, number

// Everything under the driver double's mutex (Locked / run_companion, or
// the mutex a queued op runs under).
struct Registry {
    std::map<Comm *, std::unique_ptr<Comm>> comms;
    std::map<CollectiveKey, Pending> collectives;
    int group_depth = 0;
};

Registry &registry()
{
    static Registry *r = new Registry();  // never destroyed, like the double's state
    return *r;
}

bool in_this_process(const std::string &clique, int rank)
{
    for (const auto &c : registry().comms)
        if (c.second->clique == clique && c.second->rank == rank)
            return true;
    return false;
}

// ---- the shared segment of one collective -----------------------------------

struct Header {
    uint32_t arrived;
    uint32_t left;
    uint64_t bytes;  // per rank
};

class Segment {
public:
    ~Segment()
    {
        if (base_ != MAP_FAILED)
            munmap(base_, size_);
    }
    // Opens (creating if needed) the segment for nranks * bytes.
    bool open(const std::string &name, int nranks, size_t bytes)
    {
        name_ = name;
        size_ = sizeof(Header) + size_t(nranks) * bytes;
        int fd = shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
        if (fd < 0)
            return false;
        // Every rank sizes it alike; a rank that finds another size has a
        // different count (an error).
        struct stat st;
        bool ok = fstat(fd, &st) == 0 && (size_t(st.st_size) == size_ ||
                                          (st.st_size == 0 && ftruncate(fd, off_t(size_)) == 0));
        if (ok)
            base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        return ok && base_ != MAP_FAILED;
    }
    Header &header()
    {
        return *static_cast<Header *>(base_);
    }
    unsigned char *slot(int rank, size_t bytes)
    {
        return static_cast<unsigned char *>(base_) + sizeof(Header) + size_t(rank) * bytes;
    }
    // Removes the name: the collective failed here.
    void abandon()
    {
        shm_unlink(name_.c_str());
    }
    // The last rank to leave removes the name (mappings stay valid).
    void leave(int nranks)
    {
        if (__atomic_add_fetch(&header().left, 1, __ATOMIC_ACQ_REL) == uint32_t(nranks))
            shm_unlink(name_.c_str());
    }

private:
    std::string name_;
    size_t size_ = 0;
    void *base_ = MAP_FAILED;
};

// ---- a queued all-reduce ------------------------------------------------------

struct AllReduce {
    std::string clique;
    uint64_t number;
    int nranks, rank, type;
    uint64_t send, recv;
    size_t count;
};

size_t element_bytes(int type)
{
    return type == kFloat64 ? 8 : 4;
}

template <class T>
void add_into(unsigned char *out, const unsigned char *in, size_t count)
{
    for (size_t i = 0; i < count; ++i) {
        T a, b;
        std::memcpy(&a, out + i * sizeof(T), sizeof(T));
        std::memcpy(&b, in + i * sizeof(T), sizeof(T));
        a += b;
        std::memcpy(out + i * sizeof(T), &a, sizeof(T));
    }
}

// Forgets the collective once no rank of this process has a part in it.
void settle(const CollectiveKey &key)
{
    auto it = registry().collectives.find(key);
    if (it != registry().collectives.end() && it->second.queued.empty() &&
        it->second.finished == it->second.started.size())
        registry().collectives.erase(it);
}

// Until every rank has arrived: ranks of this process are made to arrive,
// others are waited for.  False when that cannot happen.
bool wait_for_all(const AllReduce &a, Segment &seg)
{
    const CollectiveKey key(a.clique, a.number);
    for (int r = 0; r < a.nranks; ++r) {
        if (r == a.rank || !in_this_process(a.clique, r))
            continue;
        Pending &p = registry().collectives[key];
        if (p.started.count(r) != 0)
            continue;  // arrived already
        auto it = p.queued.find(r);
        if (it == p.queued.end())
            return false;  // a rank of this process with nothing queued: never arrives
        tfd_ticket t = it->second;
        // It may still not arrive: dropped (its context faulted), or its
        // stream needs this one first (a cycle).
        if (tfd_advance(&t) != 0 || registry().collectives[key].started.count(r) == 0)
            return false;
    }
    auto until = std::chrono::steady_clock::now() + kArrivalTimeout;
    while (__atomic_load_n(&seg.header().arrived, __ATOMIC_ACQUIRE) < uint32_t(a.nranks)) {
        if (std::chrono::steady_clock::now() > until)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

int reduce(const AllReduce &a)
{
    const size_t bytes = a.count * element_bytes(a.type);
    const unsigned char *send = static_cast<const unsigned char *>(tfd_translate(a.send, bytes));
    unsigned char *recv = static_cast<unsigned char *>(tfd_translate(a.recv, bytes));
    if (send == nullptr || recv == nullptr)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    Segment seg;
    if (!seg.open("/" + a.clique + "-" + std::to_string(a.number), a.nranks, bytes))
        return CUDA_ERROR_OPERATING_SYSTEM;
    std::memcpy(seg.slot(a.rank, bytes), send, bytes);
    __atomic_add_fetch(&seg.header().arrived, 1, __ATOMIC_ACQ_REL);
    if (!wait_for_all(a, seg)) {
        seg.abandon();  // a rank coming later meets no one and times out too
        return CUDA_ERROR_LAUNCH_TIMEOUT;
    }
    std::memcpy(recv, seg.slot(0, bytes), bytes);
    for (int r = 1; r < a.nranks; ++r) {
        if (a.type == kInt32)
            add_into<int32_t>(recv, seg.slot(r, bytes), a.count);
        else if (a.type == kFloat32)
            add_into<float>(recv, seg.slot(r, bytes), a.count);
        else
            add_into<double>(recv, seg.slot(r, bytes), a.count);
    }
    seg.leave(a.nranks);
    return 0;
}

int run_all_reduce(void *arg)
{
    const AllReduce &a = *static_cast<const AllReduce *>(arg);
    const CollectiveKey key(a.clique, a.number);
    Pending &p = registry().collectives[key];
    p.queued.erase(a.rank);
    p.started.insert(a.rank);
    int rc = reduce(a);
    ++registry().collectives[key].finished;
    settle(key);
    return rc;
}

// After the op ran, or instead of it (its context faulted).
void drop_all_reduce(void *arg)
{
    std::unique_ptr<AllReduce> a(static_cast<AllReduce *>(arg));
    const CollectiveKey key(a->clique, a->number);
    auto it = registry().collectives.find(key);
    if (it != registry().collectives.end())
        it->second.queued.erase(a->rank);
    settle(key);
}

Comm *find_comm(void *comm)
{
    auto it = registry().comms.find(static_cast<Comm *>(comm));
    return it == registry().comms.end() ? nullptr : it->second.get();
}

bool clique_of(const UniqueId &id, std::string *out)
{
    if (std::memcmp(id.internal, kIdMagic, sizeof kIdMagic - 1) != 0)
        return false;
    const char *rest = id.internal + sizeof kIdMagic - 1;
    size_t n = strnlen(rest, kIdBytes - (sizeof kIdMagic - 1));
    if (n == 0 || n == kIdBytes - (sizeof kIdMagic - 1))
        return false;
    *out = "tfd-nccl-" + std::string(rest, n);
    return true;
}

int all_reduce(const void *send, void *recv, size_t count, int type, int op, void *comm,
               void *stream)
{
    Comm *c = find_comm(comm);
    if (c == nullptr)
        return kInvalidArgument;
    if ((type != kInt32 && type != kFloat32 && type != kFloat64) || op != kSum)
        return kInvalidArgument;
    const size_t bytes = count * element_bytes(type);
    uint64_t s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
    if (count == 0)
        return kSuccess;
    if (tfd_translate(s, bytes) == nullptr || tfd_translate(r, bytes) == nullptr)
        return kInvalidArgument;
    auto *a = new AllReduce{c->clique, c->next, c->nranks, c->rank, type, s, r, count};
    tfd_ticket ticket = {0, 0};
    if (tfd_enqueue(stream, "ncclAllReduce", run_all_reduce, a, drop_all_reduce, &ticket) != 0) {
        delete a;
        return 1;  // ncclUnhandledCudaError
    }
    // Not run yet (sync mode runs it inside tfd_enqueue).
    if (!tfd_reached(&ticket))
        registry().collectives[CollectiveKey(c->clique, c->next)].queued[c->rank] = ticket;
    ++c->next;
    return kSuccess;
}

const char *result_string(int r)
{
    switch (r) {
        case 0: return "no error";
        case 1: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case 2: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case 3: return "internal error - please report this issue to the NCCL developers";
        case 4: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case 5: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        default: return "unknown result code";
    }
}

}  // namespace
}  // namespace tfd

using namespace tfd;

extern "C" {

int ncclGetVersion(int *version)
{
    return run("ncclGetVersion", [&] {
        if (version == nullptr)
            return int(kInvalidArgument);
        *version = kVersion;
        return int(kSuccess);
    });
}

int ncclGetUniqueId(UniqueId *id)
{
    return run("ncclGetUniqueId", [&] {
        if (id == nullptr)
            return int(kInvalidArgument);
        std::random_device rd;
        char name[40];
        std::snprintf(name, sizeof name, "%08x%08x%08x", rd(), rd(), unsigned(getpid()));
        std::memset(id->internal, 0, kIdBytes);
        std::snprintf(id->internal, kIdBytes, "%s%s", kIdMagic, name);
        return int(kSuccess);
    });
}

int ncclCommInitRank(void **comm, int nranks, UniqueId id, int rank)
{
    return run("ncclCommInitRank", [&] {
        std::string clique;
        if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks || !clique_of(id, &clique))
            return int(kInvalidArgument);
        if (tfd_context_status() != 0)
            return 1;  // ncclUnhandledCudaError: no usable current context
        if (in_this_process(clique, rank))
            return int(kInvalidUsage);
        auto c = std::make_unique<Comm>();
        c->clique = clique;
        c->nranks = nranks;
        c->rank = rank;
        Comm *raw = c.get();
        registry().comms[raw] = std::move(c);
        *comm = raw;
        return int(kSuccess);
    });
}

int ncclCommDestroy(void *comm)
{
    return run("ncclCommDestroy", [&] {
        return registry().comms.erase(static_cast<Comm *>(comm)) == 1 ? int(kSuccess)
                                                                      : int(kInvalidArgument);
    });
}

int ncclGroupStart(void)
{
    return run("ncclGroupStart", [&] {
        ++registry().group_depth;
        return int(kSuccess);
    });
}

int ncclGroupEnd(void)
{
    return run("ncclGroupEnd", [&] {
        if (registry().group_depth == 0)
            return int(kInvalidUsage);
        --registry().group_depth;
        return int(kSuccess);
    });
}

int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, void *comm,
                  void *stream)
{
    return run("ncclAllReduce",
               [&] { return all_reduce(send, recv, count, type, op, comm, stream); });
}

const char *ncclGetErrorString(int result)
{
    if (tfd_enter("ncclGetErrorString") != 0)
        return nullptr;
    return result_string(result);
}

}  // extern "C"

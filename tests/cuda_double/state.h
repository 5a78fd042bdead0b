/* SPDX-License-Identifier: MIT OR Apache-2.0 */
// Shared state of the CUDA driver double: the registry of every object, the
// one mutex that guards it, fault rules, counters and the call log.
//
// Invariants (hold whenever the mutex is not held by someone else):
//  * Every handle the double gives out (context, stream, event, module,
//    function, cuBLAS handle) is a non-canonical x86-64 address built by
//    make_handle() from a tag and an id that is never reused.  A library that
//    dereferences a handle crashes at once, and a stale handle can never alias
//    a newer object.
//  * Device memory lives at kDeviceBase and up, also non-canonical; addresses
//    are handed out by a bump pointer and never reused.
//  * Objects of a context (streams, events, modules, device allocations made
//    through the driver, cuMemHostAlloc blocks and cuMemHostRegister
//    registrations) are reclaimed when the context is destroyed: a
//    primary context whose retain count drops to 0, or a test context
//    destroyed with tfd_destroy_context.  Their handles then become invalid.
//    The context's streams run their queued work first (queue.h).
#ifndef TFD_STATE_H
#define TFD_STATE_H

#include <cuda.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph.h"
#include "queue.h"
#include "raw_enum.h"
#include "tfd_control.h"

namespace tfd {

constexpr int kMaxDevices = 8;
constexpr int kDriverVersion = 13000;
constexpr uint64_t kDeviceBase = 0x1000000000000000ull;
constexpr uint64_t kDeviceAlign = 256;
constexpr uint64_t kDeviceGap = 4096;
constexpr size_t kDefaultTotalMem = size_t(80) << 30;
// Default limit of dynamic shared memory per launch without opting in.
constexpr unsigned kDefaultDynamicShared = 48 * 1024;
// Opt-in limit of shared memory per block on compute capability 9.0.
constexpr int kMaxSharedOptin = 232448;
// The call log keeps this many entries after a clear; later calls are still
// counted but not logged, so a library stuck in a loop cannot exhaust memory.
constexpr size_t kMaxLog = size_t(1) << 22;

enum class Tag : uint64_t {
    context = 0x2,
    stream = 0x3,
    event = 0x4,
    module = 0x5,
    function = 0x6,
    cublas = 0x7,
    graph = 0x8,
    graph_exec = 0x9,
    mem_pool = 0xa,
};

uint64_t make_handle(Tag tag);
inline uint64_t handle_of(const void *p)
{
    return reinterpret_cast<uintptr_t>(p);
}
template <class T>
T handle_ptr(uint64_t h)
{
    return reinterpret_cast<T>(static_cast<uintptr_t>(h));
}

struct Context {
    uint64_t handle = 0;
    int device = 0;
    bool primary = false;
    int refcount = 0;          // primary contexts only
    unsigned flags = 0;        // primary context flags (cuDevicePrimaryCtxGetState)
    int poison = 0;            // sticky error, 0 when healthy
    std::set<uint64_t> peers;  // contexts this one enabled peer access to
    bool active() const
    {
        return !primary || refcount > 0;
    }
};

struct Stream {
    uint64_t ctx = 0;
    unsigned flags = 0;
};

// An event is complete when the stream of its latest record has run the
// record's marker op (or it was never recorded).
struct Event {
    uint64_t ctx = 0;
    unsigned flags = 0;
    bool recorded = false;
    uint64_t stream_key = 0;  // stream of the latest record (see use_stream)
    uint64_t seq = 0;         // the record's position in that stream
    uint64_t captured = 0;    // the capture its latest record went into (graph.h), 0: none
};

struct Module {
    uint64_t ctx = 0;
    std::set<std::string> entries;              // ".entry" names in the image
    std::map<std::string, uint64_t> functions;  // name -> function handle
};

enum class Kernel { fill_u32, add_f32, illegal_address, read_scalar, spin, cg_dot, cg_xr, cg_p };

struct Function {
    uint64_t module = 0;
    uint64_t ctx = 0;
    Kernel kernel = Kernel::fill_u32;
    std::map<int, int> attributes;
};

struct DeviceAlloc {
    uint64_t size = 0;
    bool free_queued = false;       // cuMemFreeAsync queued, not run yet
    unsigned char *host = nullptr;  // backing store
    size_t mapped = 0;              // bytes mapped for the backing store (0: a pool's block)
    int device = 0;
    uint64_t ctx = 0;     // 0 for tfd_device_alloc memory (never reclaimed)
    uint64_t pool = 0;    // the memory pool it came from (mem_pool.cpp), 0 for cuMemAlloc
    uint64_t serial = 0;  // tells a reused block's allocations apart
    // A graph allocation (graph.h): the captures, graphs and executable
    // graphs whose allocation node made it (it goes with the last), and
    // whether a launch left it allocated (no free node in the graph).
    int graph_holders = 0;
    bool graph_outstanding = false;
};

// A memory pool (mem_pool.cpp): the device's default pool or one made with
// cuMemPoolCreate.  Its memory is reserved in blocks, each backing one
// allocation at a time; a freed block stays reserved until a trim, a
// synchronizing call above the release threshold, or the pool's end.
struct PoolBlock {
    uint64_t capacity = 0;          // bytes reserved
    unsigned char *host = nullptr;  // backing store (mmap of capacity bytes)
    uint64_t owner = 0;             // serial of the allocation holding it, 0 when free
    uint64_t freed_on = 0;          // stream key of a queued free not run yet, else 0
};
struct MemPool {
    int device = 0;
    bool is_default = false;
    bool destroyed = false;  // cuMemPoolDestroy: goes once its last allocation is freed
    int handle_types = 0;
    uint64_t threshold = 0;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
    uint64_t max_size = 0;   // CUmemPoolProps::maxSize, 0: none
    uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
    unsigned long attribute_sets = 0, allocations = 0, trims = 0;
    std::map<uint64_t, PoolBlock> blocks;  // by base address
};

struct HostAlloc {
    size_t size = 0;
    unsigned flags = 0;
    uint64_t ctx = 0;
};

struct FaultRule {
    std::string entry;  // canonical name or "*"
    unsigned long nth = 1;
    unsigned long times = 0;
    unsigned long seen = 0;  // matching calls since the rule was made
    int code = 0;
    bool after = false;
};

struct DeviceConfig {
    std::map<int, int> attributes;  // overrides
    size_t total_mem = kDefaultTotalMem;
    bool peer[kMaxDevices] = {};
};

struct State {
    std::recursive_mutex mu;

    bool initialized = false;
    int driver_version = kDriverVersion;  // what cuDriverGetVersion reports
    int device_count = 1;
    // Execution of stream work (tfd_set_execution); see queue.h.
    int exec = TFD_EXEC_DEFERRED;
    unsigned long query_progress = 0;
    std::chrono::microseconds background_delay{1000};
    std::map<uint64_t, Queue> queues;  // by stream key
    std::condition_variable_any background_cv;
    bool background_started = false;
    DeviceConfig devices[kMaxDevices];
    std::map<int, int> all_attributes;  // tfd_set_attribute(-1, ...)

    std::map<uint64_t, Context> contexts;
    uint64_t primary[kMaxDevices] = {};
    std::map<uint64_t, Stream> streams;
    std::map<uint64_t, Event> events;
    std::map<uint64_t, Module> modules;
    std::map<uint64_t, Function> functions;
    std::map<uint64_t, DeviceAlloc> device_allocs;   // keyed by base address
    std::map<uint64_t, MemPool> pools;               // by handle (mem_pool.cpp)
    uint64_t default_pool[kMaxDevices] = {};         // handles, made on first use
    std::map<uintptr_t, HostAlloc> host_allocs;      // keyed by host address
    std::map<uintptr_t, HostAlloc> host_registered;  // cuMemHostRegister ranges, likewise
    std::map<uint64_t, tfd_cublas_info> cublas;
    // Stream capture and graphs (graph.h).
    std::map<uint64_t, Capture> captures;  // by the capturing stream's key
    std::map<uint64_t, Graph> graphs;
    std::map<uint64_t, GraphExec> graph_execs;
    uint64_t next_capture_id = 1;

    std::vector<FaultRule> rules;
    std::map<std::string, unsigned long> delays;  // by entry (tfd_set_entry_delay_us)
    std::set<std::string> hidden;
    std::set<std::string> names;  // interned entry names
    std::vector<const char *> log;
    std::unordered_map<std::string, unsigned long> calls;
    std::map<std::string, int> requested_version;
    std::map<std::string, long long> requested_flags;
    long live[TFD_KIND_COUNT] = {};
    long reclaimed[TFD_KIND_COUNT] = {};

    uint64_t next_id = 1;
    uint64_t next_device_addr = kDeviceBase;
    uint64_t next_alloc_serial = 1;
    uint64_t device_used[kMaxDevices] = {};  // bytes allocated per device
};

// The one instance; never destroyed, so late calls from other threads at
// process exit stay safe.
State &state();
using Lock = std::unique_lock<std::recursive_mutex>;

// Canonical spelling of an entry name ("cuGetProcAddress_v2" is counted as
// "cuGetProcAddress").
std::string canonical(const char *entry);
// Driver entries are matched by the "*" fault wildcard; cuBLAS, NVRTC and
// NCCL entries are not.
bool is_driver_entry(const std::string &name);

// Log and count one call of `entry` and evaluate the fault rules.  Must be
// called with the mutex held.  *before receives the code to return at once
// (no effect), *after the code to return after the call took effect.  Never
// throws: if the bookkeeping cannot allocate, the call goes unrecorded.
void enter_locked(const char *entry, int *before, int *after) noexcept;

// Sleeps for the delay tfd_set_entry_delay_us set for `entry`, if any,
// without the mutex: other threads keep calling the double meanwhile.
void delay_entry(const char *entry) noexcept;
// Sets (0: removes) the delay of `entry`.
void set_entry_delay(const char *entry, unsigned long microseconds);
// Removes every delay (tfd_reset).
void clear_entry_delays();

// Runs one driver entry point: sleeps for its delay (if any), logs it,
// applies fault rules, then runs body under the mutex.  A fault-after code
// replaces a successful result only.
// No exception leaves an entry point (they are called from C): running out
// of host memory is CUDA_ERROR_OUT_OF_MEMORY.  A host function (queued with
// cuLaunchHostFunc) must not call the driver, as in CUDA: such a call is
// CUDA_ERROR_NOT_PERMITTED and not logged.
template <class Body>
CUresult run(const char *entry, Body body) noexcept
{
    if (in_host_function())
        return CUDA_ERROR_NOT_PERMITTED;
    delay_entry(entry);
    Lock lock(state().mu);
    int before = 0, after = 0;
    enter_locked(entry, &before, &after);
    if (before != 0)
        return static_cast<CUresult>(before);
    CUresult rc = CUDA_ERROR_UNKNOWN;
    try {
        rc = body();
    } catch (const std::bad_alloc &) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    } catch (...) {
        return CUDA_ERROR_UNKNOWN;
    }
    if (rc == CUDA_SUCCESS && after != 0)
        return static_cast<CUresult>(after);
    return rc;
}

// ---- checks shared by the entry points (mutex held) --------------------

CUresult need_init();
// Thread's current context handle (0: none).
uint64_t current_handle();
void set_current_handle(uint64_t ctx);
Context *find_context(uint64_t handle);
// A call that needs a context: initialized, a current context that exists,
// is active and is not poisoned.
CUresult need_context(Context **out);
// Validate a stream for use from `cur`: NULL / CU_STREAM_LEGACY /
// CU_STREAM_PER_THREAD mean the context's default stream.  *key identifies
// the stream for event bookkeeping.
// A stream whose capture was invalidated is CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
// (graph.h).
CUresult use_stream(CUstream stream, const Context &cur, uint64_t *key);
// use_stream without the capture's verdict (the capture calls themselves).
CUresult lookup_stream(CUstream stream, const Context &cur, uint64_t *key);
// Stream key of the default (legacy) stream of a context.
inline uint64_t legacy_key(uint64_t ctx)
{
    return ctx | 1;
}
// Destroy a context's objects (streams, events, modules, driver-made
// allocations) and forget its poison and peers.  Its streams first run
// what is queued on them (the ops of a faulted context are dropped).
void reclaim_context(Context &ctx);

// ---- device memory (mutex held) ----------------------------------------

// Allocation that wholly contains [dptr, dptr+bytes), or nullptr.
DeviceAlloc *find_alloc(uint64_t dptr, uint64_t bytes, uint64_t *base = nullptr);
// Host view of a device range inside one allocation (find_alloc), or of
// page-locked host memory (mapped_range), or nullptr.
unsigned char *device_range(CUdeviceptr dptr, size_t bytes);
// Page-locked host memory seen from the device: with unified addressing a
// cuMemHostAlloc block is mapped at its host address.  nullptr otherwise.
unsigned char *mapped_range(CUdeviceptr dptr, size_t bytes);
// Page-locked host memory containing `p` (a cuMemHostAlloc block or a
// cuMemHostRegister range), or nullptr.
const HostAlloc *find_host(uintptr_t p, uintptr_t *base);
// Whether [p, p+bytes) lies in page-locked host memory the double knows
// (a cuMemHostAlloc block or a registered range); other host memory is
// pageable.
bool page_locked(const void *p, size_t bytes);
// Prologue of every stream-ordered call: a usable context and stream; *key
// (may be NULL) receives the stream key.
CUresult need_stream(CUstream stream, Context **cur, uint64_t *key);
// Create an allocation; returns CUDA_ERROR_OUT_OF_MEMORY when the device's
// total would be exceeded or no backing store can be mapped.
CUresult create_alloc(int device, uint64_t ctx, uint64_t bytes, CUdeviceptr *dptr);
void release_alloc(std::map<uint64_t, DeviceAlloc>::iterator it);

// ---- memory pools (mem_pool.cpp, mutex held) ----------------------------

// Allocates from the pool `pool` for stream `key` of context `ctx`: a free
// block that fits (or one freed on the same stream, in stream order), else
// a new reservation.  CUDA_ERROR_OUT_OF_MEMORY when the pool's maxSize or the
// device's total memory would be exceeded.
CUresult pool_alloc(uint64_t pool, uint64_t ctx, uint64_t key, uint64_t bytes, CUdeviceptr *dptr);
// The device's default pool (made on first use).
uint64_t default_pool(int device);
// A cuMemFreeAsync of a pool allocation was queued on stream `key`.
void pool_free_queued(const DeviceAlloc &a, uint64_t base, uint64_t key);
// A pool allocation goes (its free ran, or its context went): its block is
// free again, or released if the pool was destroyed.
void pool_release(const DeviceAlloc &a, uint64_t base);
// Host view of [dptr, dptr+bytes) inside a block a pool holds, whoever
// owns it now (nullptr outside every block): pool memory stays mapped while
// reserved, so work that runs after a free, or after the block went to
// another allocation, reads and writes it as on a GPU.
unsigned char *pool_block_range(uint64_t dptr, uint64_t bytes);
// After a synchronizing call on `device`: every pool of the device gives
// free blocks back until it holds at most its release threshold.
void pools_after_sync(int device);
// tfd_reset: the pools' call counters (tfd_mem_pool_info) back to 0.
void pools_reset_counters();
// ---- devices -----------------------------------------------------------

int device_attribute(int device, int attribute);
bool valid_device(int device);

}  // namespace tfd

#endif

/*
 * tenferro-gpu: drive one CUDA device's runtime from any language.
 *
 * This header is the whole manual.  It compiles as C89, C99, C11 and C++ and
 * includes nothing but <stddef.h> and <stdint.h>.  CUDA objects cross the ABI
 * as void* (CUcontext, CUstream, cublasHandle_t) and device addresses as
 * uint64_t (CUdeviceptr); no CUDA header is needed to use it.
 *
 * Conventions, for every function unless its comment says otherwise:
 *
 *  - Fallible functions return a tf_status.  TF_OK is 0.  On failure they
 *    also record a thread-local error (tf_last_error_message() and friends)
 *    naming the operation, the failing call and the numeric code of the
 *    CUDA, cuBLAS or NVRTC result.  A successful call leaves the record alone.
 *  - Output parameters are written only on TF_OK.
 *  - A NULL pointer where an object is required returns
 *    TF_ERROR_INVALID_ARGUMENT; it never crashes.
 *  - A runtime handle that was already released returns
 *    TF_ERROR_INVALID_HANDLE when the library can still tell (it keeps the
 *    last few thousand released handles quarantined); do not rely on it.
 *  - No function leaves the calling thread's current CUDA context changed:
 *    whatever context was current (NULL included) is current again on return,
 *    on every path.
 *  - No C++ exception ever leaves the library.
 *  - Structs passed in or out start with uint32_t struct_size, which the
 *    caller sets with the struct's *_init function.  Structs only ever grow
 *    at the end, so a program built against an older header keeps working.
 *
 * Thread safety: every function may be called from any thread.  A runtime
 * handle may be shared by threads; each function documents what it
 * serializes on.  See docs/threading.md.
 */
#ifndef TENFERRO_GPU_H
#define TENFERRO_GPU_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define TF_API __attribute__((visibility("default")))
#else
#define TF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup version Version
 * @{
 */

/** Major version: changes only when the ABI breaks (it is the SONAME's number). */
#define TF_VERSION_MAJOR 1
/** Minor version: new functions, enum values or struct fields at the end. */
#define TF_VERSION_MINOR 0
/** Patch version: fixes that change no interface. */
#define TF_VERSION_PATCH 0
/** The version as one number: major * 10000 + minor * 100 + patch. */
#define TF_VERSION_NUMBER \
    (TF_VERSION_MAJOR * 10000 + TF_VERSION_MINOR * 100 + TF_VERSION_PATCH)
/** The version as "major.minor.patch". */
#define TF_VERSION_STRING "1.0.0"

/**
 * Version of the loaded library as TF_VERSION_NUMBER computes it.
 *
 * Compare it with TF_VERSION_NUMBER to detect a library older than the
 * header a program was built with.  Never fails; thread-safe.
 */
TF_API uint32_t tf_version(void);

/** Version of the loaded library as a static "major.minor.patch" string. */
TF_API const char *tf_version_string(void);

/** @} */

/**
 * @defgroup errors Statuses and errors
 * @{
 */

/**
 * Result of every fallible function.  Values are never renumbered; a retired
 * value is never reused.
 */
typedef int32_t tf_status;

/** Every status a function of this library returns. */
enum tf_status_code {
    /** Success. */
    TF_OK = 0,
    /** An argument is invalid: NULL where an object is needed, a size out
     * of range, an unknown option, a device range that does not fit. */
    TF_ERROR_INVALID_ARGUMENT = 1,
    /** The runtime handle was already released, or is not a runtime handle. */
    TF_ERROR_INVALID_HANDLE = 2,
    /** The CUDA driver (libcuda.so.1) could not be loaded. */
    TF_ERROR_DRIVER_NOT_FOUND = 3,
    /** The loaded libcuda.so.1 is the toolkit's stub, not a real driver. */
    TF_ERROR_DRIVER_STUB = 4,
    /** A driver is installed but reports no CUDA device. */
    TF_ERROR_NO_DEVICE = 5,
    /** The requested device ordinal does not exist (the message lists the
     * devices that do). */
    TF_ERROR_DEVICE_UNAVAILABLE = 6,
    /** The driver is older than this library needs (CUDA 12.0). */
    TF_ERROR_DRIVER_TOO_OLD = 7,
    /** A CUDA driver call failed; tf_last_error_code() is its CUresult. */
    TF_ERROR_CUDA = 8,
    /** The driver or device lacks what the call needs (a missing entry
     * point, an unsupported feature). */
    TF_ERROR_NOT_SUPPORTED = 9,
    /** cuBLAS or NVRTC could not be loaded; the message says what to add to
     * LD_LIBRARY_PATH. */
    TF_ERROR_LIBRARY_NOT_FOUND = 10,
    /** A vendor library (cuBLAS, NVRTC) returned a failure status; the code
     * is that status. */
    TF_ERROR_PROVIDER = 11,
    /** A caller's callback returned nonzero (the code is that value) or
     * threw a C++ exception. */
    TF_ERROR_CALLBACK = 12,
    /** Host or device memory is exhausted. */
    TF_ERROR_OUT_OF_MEMORY = 13,
    /** The runtime cannot serve the call in its present state: used in a
     * forked child, a callback re-entering the stream slot it holds, a log
     * callback calling tf_set_log_callback. */
    TF_ERROR_RUNTIME_STATE = 14,
    /** The device reported a sticky fault (an illegal address, a trap, a
     * launch failure); the runtime's context is unusable.  Release the
     * runtime; its resources are leaked quietly. */
    TF_ERROR_DEVICE_FAULT = 15,
    /** NVRTC rejected the source; the log is available to the caller. */
    TF_ERROR_COMPILE = 16,
    /** A bug in this library (an unexpected C++ exception was caught). */
    TF_ERROR_INTERNAL = 17
};

/** What the numeric code of the last error means (tf_last_error_code_domain). */
enum tf_code_domain {
    /** No numeric code: the error came from the library itself. */
    TF_CODE_NONE = 0,
    /** A CUresult of the CUDA driver. */
    TF_CODE_CUDA = 1,
    /** A cublasStatus_t. */
    TF_CODE_CUBLAS = 2,
    /** An nvrtcResult. */
    TF_CODE_NVRTC = 3,
    /** The nonzero value a caller's callback returned. */
    TF_CODE_CALLBACK = 4,
    /** An errno value of the operating system. */
    TF_CODE_SYSTEM = 5
};

/**
 * A static, human-readable description of a status ("invalid argument").
 * Never NULL; an unknown value gives "unknown status".  Thread-safe.
 */
TF_API const char *tf_status_string(tf_status status);

/**
 * Message of the last failure on the calling thread, for example
 * "tf_runtime_sync: cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS
 * (700): an illegal memory access was encountered".
 *
 * Never NULL ("" when this thread has seen no failure).  The pointer refers
 * to thread-local storage: it stays valid, unchanged, until the next failing
 * call of this library on the same thread, tf_clear_last_error(), or the
 * thread's exit.  Copy it to keep it.
 */
TF_API const char *tf_last_error_message(void);

/** The public function that failed ("tf_runtime_sync"), or "". Lifetime as
 * tf_last_error_message(). */
TF_API const char *tf_last_error_operation(void);

/** The call inside it that failed ("cuStreamSynchronize", "cublasCreate_v2",
 * "callback"), or "" when the library itself refused.  Lifetime as
 * tf_last_error_message(). */
TF_API const char *tf_last_error_call(void);

/** Numeric code of the last failure (a CUresult, cublasStatus_t, nvrtcResult,
 * callback value or errno, per tf_last_error_code_domain()), or 0. */
TF_API int32_t tf_last_error_code(void);

/** Domain of tf_last_error_code(), one of enum tf_code_domain. */
TF_API int32_t tf_last_error_code_domain(void);

/** Status of the last failure on the calling thread, or TF_OK if none. */
TF_API tf_status tf_last_error_status(void);

/** Forget the calling thread's last error. */
TF_API void tf_clear_last_error(void);

/** Maximum bytes of tf_error_info::operation and ::call, terminator included. */
#define TF_ERROR_NAME_CAPACITY 64
/** Maximum bytes of tf_error_info::message, terminator included; longer
 * messages are truncated. */
#define TF_ERROR_MESSAGE_CAPACITY 512

/**
 * A copy of one thread's last error, for callers that cannot read
 * thread-local state on the thread that failed (see tf_last_error()).
 */
typedef struct tf_error_info {
    uint32_t struct_size;  /**< in: sizeof(tf_error_info), set by tf_error_info_init */
    tf_status status;      /**< out: the failing status, TF_OK if none */
    int32_t code_domain;   /**< out: enum tf_code_domain */
    int32_t code;          /**< out: the numeric code */
    char operation[TF_ERROR_NAME_CAPACITY]; /**< out: the public function */
    char call[TF_ERROR_NAME_CAPACITY];      /**< out: the failing call */
    char message[TF_ERROR_MESSAGE_CAPACITY]; /**< out: the full message */
} tf_error_info;

/** Zero @p info and set its struct_size. NULL is ignored. */
TF_API void tf_error_info_init(tf_error_info *info);

/**
 * Copy the calling thread's last error into @p out.
 *
 * Go and Julia callers whose code can move between OS threads call this in
 * the same foreign call as the failing function (see docs/threading.md).
 *
 * @param[out] out initialised with tf_error_info_init.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT if @p out is NULL or its
 *         struct_size is smaller than the first field.
 */
TF_API tf_status tf_last_error(tf_error_info *out);

/** @} */

/**
 * @defgroup logging Logging
 * @{
 */

/** Severity of a log message. */
enum tf_log_level {
    TF_LOG_WARNING = 2, /**< something was leaked or could not be restored */
    TF_LOG_ERROR = 3    /**< a failure nobody else can be told about */
};

/**
 * Receives the library's warnings: a caller's context that could not be
 * restored, resources leaked at teardown and why.  Such failures have no
 * caller to return a status to, so the callback returns nothing.
 *
 * @param level     enum tf_log_level.
 * @param message   one line without a trailing newline, valid only during
 *                  the call.
 * @param user_data as given to tf_set_log_callback.
 *
 * It may be called from any thread the library runs on, concurrently.
 */
typedef void (*tf_log_fn)(int32_t level, const char *message, void *user_data);

/**
 * Route log messages to @p fn, or back to the default (stderr, each line
 * prefixed "tenferro-gpu: ") when @p fn is NULL.  To silence the library,
 * install a callback that ignores its arguments.
 *
 * Once this returns, the previous callback is never called again, so its
 * user_data may be freed.  It waits for calls of the previous callback in
 * progress on other threads.
 *
 * @return TF_OK; TF_ERROR_RUNTIME_STATE when called from inside a log
 *         callback (which would deadlock).
 */
TF_API tf_status tf_set_log_callback(tf_log_fn fn, void *user_data);

/** @} */

/**
 * @defgroup devices Devices
 * @{
 */

/** Capacity of tf_device_properties::name, terminator included. */
#define TF_DEVICE_NAME_CAPACITY 256

/** What the driver reports about one device. */
typedef struct tf_device_properties {
    uint32_t struct_size;            /**< in: set by tf_device_properties_init */
    int32_t ordinal;                 /**< the device ordinal */
    char name[TF_DEVICE_NAME_CAPACITY]; /**< e.g. "NVIDIA H200" */
    uint8_t uuid[16];                /**< the device UUID (as nvidia-smi's GPU-...) */
    int32_t compute_capability_major; /**< e.g. 9 */
    int32_t compute_capability_minor; /**< e.g. 0 */
    uint64_t total_memory_bytes;     /**< device memory */
    int32_t multiprocessor_count;    /**< streaming multiprocessors */
    int32_t pci_domain_id;           /**< PCI domain */
    int32_t pci_bus_id;              /**< PCI bus */
    int32_t pci_device_id;           /**< PCI device */
} tf_device_properties;

/** Zero @p info and set its struct_size. NULL is ignored. */
TF_API void tf_device_properties_init(tf_device_properties *info);

/**
 * Whether this process can use a CUDA device: the driver loads, reports a
 * device, a runtime on device 0 can be created and synchronized.
 *
 * @return 1 or 0.  Never fails, never prints, leaves the thread's last error
 *         as it was.  The probe's runtime is released before it returns.
 *         Use it to skip GPU work on machines without one.
 */
TF_API int32_t tf_gpu_available(void);

/**
 * Number of CUDA devices.  Creates no context.
 *
 * @param[out] out_count number of devices; 0 when the driver reports none.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out_count);
 *         TF_ERROR_DRIVER_NOT_FOUND; TF_ERROR_DRIVER_STUB;
 *         TF_ERROR_DRIVER_TOO_OLD; TF_ERROR_NOT_SUPPORTED (the driver lacks
 *         an entry point this needs); TF_ERROR_CUDA.
 */
TF_API tf_status tf_device_count(int32_t *out_count);

/**
 * Describe one device.  Creates no context; all fields are queried before
 * any is written, so a failure leaves @p out untouched.
 *
 * @param ordinal   0 .. tf_device_count() - 1.
 * @param[in,out] out initialised with tf_device_properties_init; fields past its
 *                  struct_size are not written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, struct_size too small,
 *         negative ordinal); TF_ERROR_DEVICE_UNAVAILABLE (no such ordinal;
 *         the message lists the devices); TF_ERROR_NO_DEVICE; and the
 *         driver-loading statuses of tf_device_count().
 */
TF_API tf_status tf_device_info(int32_t ordinal, tf_device_properties *out);

/** @} */

/**
 * @defgroup runtime Runtime
 *
 * A runtime owns one retained primary context of one device, a fixed number
 * of stream slots and what hangs off them.  The calling thread's slot is its
 * sequence number (threads are numbered as they first call the library)
 * modulo the slot count; a slot's stream is created at its first use, as a
 * non-blocking stream, and never replaced while the runtime lives.
 * @{
 */

/** Opaque, reference-counted runtime handle. */
typedef struct tf_runtime tf_runtime;

/** Default number of stream slots. */
#define TF_DEFAULT_STREAM_SLOTS 8
/** Largest accepted number of stream slots. */
#define TF_MAX_STREAM_SLOTS 256
/** Default cuBLAS workspace per slot: 32 MiB, what cuBLAS recommends for Hopper. */
#define TF_DEFAULT_CUBLAS_WORKSPACE_BYTES ((uint64_t)32 << 20)
/** Default bound of the workspace retirement queue. */
#define TF_DEFAULT_RETIREMENT_CAPACITY 1024
/** Largest accepted retirement queue bound. */
#define TF_MAX_RETIREMENT_CAPACITY 1048576
/** Default of tf_runtime_options::download_threads (0 selects it). */
#define TF_DEFAULT_DOWNLOAD_THREADS 8
/** Largest accepted tf_runtime_options::download_threads. */
#define TF_MAX_DOWNLOAD_THREADS 64
/** Default of tf_runtime_options::download_chunk_bytes (0 selects it). */
#define TF_DEFAULT_DOWNLOAD_CHUNK_BYTES ((uint32_t)8 << 20)
/** Smallest accepted tf_runtime_options::download_chunk_bytes. */
#define TF_MIN_DOWNLOAD_CHUNK_BYTES ((uint32_t)64 << 10)
/** Largest accepted tf_runtime_options::download_chunk_bytes. */
#define TF_MAX_DOWNLOAD_CHUNK_BYTES ((uint32_t)256 << 20)

/** Options of tf_runtime_new_with_options(). */
typedef struct tf_runtime_options {
    uint32_t struct_size;   /**< set by tf_runtime_options_init */
    /** Number of stream slots, 1 .. TF_MAX_STREAM_SLOTS
     * (default TF_DEFAULT_STREAM_SLOTS). */
    uint32_t stream_slots;
    /** Bytes of device memory given to each slot's cuBLAS handle as its
     * workspace, allocated when the handle is created; 0 runs cuBLAS without
     * a workspace (default TF_DEFAULT_CUBLAS_WORKSPACE_BYTES). */
    uint64_t cublas_workspace_bytes;
    /** Most workspace retirements kept in flight before a retirement waits
     * for its stream instead, 1 .. TF_MAX_RETIREMENT_CAPACITY
     * (default TF_DEFAULT_RETIREMENT_CAPACITY). */
    uint32_t retirement_capacity;
    /** Reserved; must be 0. */
    uint32_t flags;
    /** Host threads that copy a bulk download into pageable memory (see
     * tf_download()), the calling thread included,
     * 1 .. TF_MAX_DOWNLOAD_THREADS; 0 picks TF_DEFAULT_DOWNLOAD_THREADS, or
     * the number of CPUs the process may run on if that is smaller.  The
     * other threads are started at the runtime's first such download and
     * joined when the runtime is torn down. */
    uint32_t download_threads;
    /** Bytes of each of the two page-locked staging buffers a stream slot
     * uses for bulk downloads into pageable memory: a multiple of 4096 in
     * TF_MIN_DOWNLOAD_CHUNK_BYTES .. TF_MAX_DOWNLOAD_CHUNK_BYTES; 0 picks
     * TF_DEFAULT_DOWNLOAD_CHUNK_BYTES.  Allocated at the slot's first such
     * download, freed at teardown. */
    uint32_t download_chunk_bytes;
} tf_runtime_options;

/** Set @p options to the defaults and its struct_size. NULL is ignored. */
TF_API void tf_runtime_options_init(tf_runtime_options *options);

/**
 * Create a runtime on device @p ordinal with default options.
 * Same as tf_runtime_new_with_options(ordinal, NULL, out).
 */
TF_API tf_status tf_runtime_new(int32_t ordinal, tf_runtime **out);

/**
 * Create a runtime on device @p ordinal.
 *
 * In order: load and initialize the driver, look the device up, retain its
 * primary context, read the device's description.  A failure after the
 * retain releases the primary context again.  No stream, handle or memory is
 * created yet; each is made at first use.
 *
 * @param ordinal  device ordinal.
 * @param options  NULL for the defaults, or initialised with
 *                 tf_runtime_options_init.  A struct_size larger than this
 *                 library knows is accepted when the unknown tail is zero.
 * @param[out] out the new handle with one reference; release it with
 *                 tf_runtime_release().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out, negative ordinal,
 *         an option out of range, nonzero unknown option bytes);
 *         TF_ERROR_DEVICE_UNAVAILABLE (no such ordinal; the message lists
 *         the devices found); TF_ERROR_NO_DEVICE; TF_ERROR_DRIVER_NOT_FOUND;
 *         TF_ERROR_DRIVER_STUB; TF_ERROR_DRIVER_TOO_OLD;
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_OUT_OF_MEMORY; TF_ERROR_CUDA.
 */
TF_API tf_status tf_runtime_new_with_options(int32_t ordinal,
                                             const tf_runtime_options *options,
                                             tf_runtime **out);

/**
 * Add a reference to @p rt.  The same pointer then needs one more
 * tf_runtime_release().  Retained handles share identity and state.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL); TF_ERROR_INVALID_HANDLE.
 */
TF_API tf_status tf_runtime_retain(tf_runtime *rt);

/**
 * Drop a reference to @p rt.  NULL is a no-op.
 *
 * When the last reference to the runtime's state goes (bound handles from
 * tf_runtime_bind_slot() hold it too), the runtime is torn down on the
 * calling thread:
 *  1. every stream that was created is synchronized;
 *  2. only if all of them synchronized: pending workspace retirements run,
 *     cuBLAS handles and their workspaces, staging buffers and streams are
 *     destroyed; otherwise all of those are leaked on purpose, because the
 *     device may still use them, and a warning is logged;
 *  3. the primary context is released;
 *  4. the caller's current context is what it was before the call.
 * After a device fault (TF_ERROR_DEVICE_FAULT) or in a forked child, steps 1
 * and 2 are skipped and the resources leaked without a warning; a driver
 * that reports deinitialization (at process exit) is treated the same way.
 * Teardown failures go to the log, never to the status.
 *
 * @return TF_OK; TF_ERROR_INVALID_HANDLE when @p rt was already released
 *         (detected as for every function).
 */
TF_API tf_status tf_runtime_release(tf_runtime *rt);

/**
 * A handle on the same runtime whose calls always use stream slot @p slot,
 * whatever thread makes them.  For callers whose code moves between OS
 * threads (goroutines, Julia tasks) and needs one stable stream.
 *
 * The bound handle shares identity, allocation domain and state with @p rt
 * and keeps the runtime alive until released with tf_runtime_release().
 * Binding a bound handle rebinds to @p slot.
 *
 * @param slot      0 .. slot count - 1.
 * @param[out] out  the bound handle, with one reference.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, slot out of range);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY.
 */
TF_API tf_status tf_runtime_bind_slot(tf_runtime *rt, int32_t slot, tf_runtime **out);

/**
 * Identity of the runtime: a number fresh for every tf_runtime_new() in this
 * process and equal for every handle retained or bound from it.  Use it as a
 * cache key; it grants nothing.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 */
TF_API tf_status tf_runtime_identity(const tf_runtime *rt, uint64_t *out);

/**
 * Allocation domain of the runtime: device memory made through one runtime
 * belongs to its domain.  Fresh per tf_runtime_new(), equal across retained
 * and bound handles, never equal to any identity.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 */
TF_API tf_status tf_runtime_allocation_domain(const tf_runtime *rt, uint64_t *out);

/**
 * The runtime's device, as read when it was created (no driver call).
 *
 * @param[in,out] out initialised with tf_device_properties_init.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 */
TF_API tf_status tf_runtime_device_info(const tf_runtime *rt, tf_device_properties *out);

/** Capabilities tf_runtime_supports() answers for. */
enum tf_capability {
    /** Load PTX, CUBIN and fatbin images and launch their kernels. */
    TF_CAP_NATIVE_MODULES = 1,
    /** Compile CUDA C++ at run time (NVRTC can be loaded). */
    TF_CAP_RUNTIME_COMPILATION = 2,
    /** Hand out the slot's raw CUstream. */
    TF_CAP_RAW_STREAM = 3,
    /** Device-to-device copies on one device. */
    TF_CAP_SAME_DEVICE_COPY = 4,
    /** Peer copies: always 0 here, because it depends on the pair of
     * devices; ask tf_peer_copy_available() per source and destination. */
    TF_CAP_PEER_COPY = 5,
    /** cuBLAS can be loaded. */
    TF_CAP_CUBLAS = 6,
    /** Stream-ordered allocation from the device's memory pool. */
    TF_CAP_STREAM_ORDERED_ALLOC = 7
};

/**
 * Whether the runtime supports @p capability.
 *
 * @param capability enum tf_capability; a value this library does not know
 *                   is answered with 0, so newer programs run on older
 *                   libraries.
 * @param[out] out_supported 1 or 0.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 */
TF_API tf_status tf_runtime_supports(const tf_runtime *rt, int32_t capability,
                                     int32_t *out_supported);

/**
 * The device's primary context (a CUcontext) this runtime retains.  It stays
 * valid while the runtime lives.  Prefer tf_with_context() to making it
 * current yourself.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 */
TF_API tf_status tf_runtime_primary_context(const tf_runtime *rt, void **out_context);

/** Number of stream slots of the runtime.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE. */
TF_API tf_status tf_runtime_slot_count(const tf_runtime *rt, int32_t *out_count);

/** Stream slot the calling thread uses with @p rt (the bound slot for a
 * handle from tf_runtime_bind_slot()).  No driver call.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE. */
TF_API tf_status tf_runtime_current_slot(const tf_runtime *rt, int32_t *out_slot);

/**
 * The calling thread's slot stream (a CUstream), created on first use.  It
 * stays valid while the runtime lives and is never replaced.  Work the
 * caller enqueues on it is ordered with the library's own work on that slot.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE (forked child); TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_CUDA (stream creation, context switch).
 */
TF_API tf_status tf_runtime_stream(tf_runtime *rt, void **out_stream);

/** As tf_runtime_stream() for an explicit slot 0 .. slot count - 1
 * (TF_ERROR_INVALID_ARGUMENT otherwise). */
TF_API tf_status tf_runtime_slot_stream(tf_runtime *rt, int32_t slot, void **out_stream);

/**
 * Run @p fn with the runtime's primary context current on the calling thread.
 *
 * The caller's exact current context (NULL included) is saved, the primary
 * context made current, @p fn called, and the saved context made current
 * again: after a normal return, a nonzero return and a C++ exception thrown
 * by @p fn alike.  If the primary context is already current this costs one
 * driver call and changes nothing.  A failure to restore is logged, never
 * returned.  @p fn may call this library, this function included.
 *
 * @param fn        called once; its nonzero return becomes
 *                  TF_ERROR_CALLBACK with the value as the code.  A C++
 *                  exception it throws becomes TF_ERROR_CALLBACK too.
 * @param user_data passed to @p fn.
 * @return TF_OK; TF_ERROR_CALLBACK; TF_ERROR_INVALID_ARGUMENT;
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE (forked child);
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (the context could not be
 *         read or activated; the caller's context is left as it was).
 */
TF_API tf_status tf_with_context(tf_runtime *rt, int32_t (*fn)(void *user_data),
                                 void *user_data);

/**
 * Wait until the work queued on the calling thread's slot stream is done,
 * then run the workspace retirements the device has passed.  Other slots are
 * not waited for.  A slot whose stream was never created returns at once.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT (the wait reported
 *         a sticky fault); TF_ERROR_CUDA.
 */
TF_API tf_status tf_runtime_sync(tf_runtime *rt);

/** @} */

/* ==== Work on the slot streams: cuBLAS, any library, kernels, retirement ==== */

/* ==== Device memory and transfers ==== */

/**
 * @defgroup transfers Device memory and transfers
 *
 * Device memory is named by its address, a CUdeviceptr passed as uint64_t.
 *
 * Checked addresses.  Before anything is queued, every device address a
 * caller passes is looked up (cuMemGetAddressRange; where the process sees
 * more than one device, also the allocation's device with
 * cuPointerGetAttribute): it must lie in a live allocation of the runtime's
 * device, and the whole range [address, address + len) must fit in that one
 * allocation.  An address that is not device memory, a range that
 * crosses the end of its allocation, or memory of another device is
 * TF_ERROR_INVALID_ARGUMENT; then nothing was queued and nothing written.
 * The message names the check and, where the driver answered, its code.
 * A length of 0 is accepted everywhere: it checks no pointer and does
 * nothing.
 *
 * Ordering.  Work is queued on the calling thread's slot stream (the bound
 * slot for a handle from tf_runtime_bind_slot()) after whatever is already
 * queued there, so a transfer sees the results of earlier work on the same
 * slot, the caller's own work on tf_runtime_stream() included.  Work on other
 * slots is not waited for: finish it first (tf_runtime_sync() on that slot).
 *
 * Failure.  A failed download may leave its destination partly written,
 * and the device may still be writing it: see tf_download().  Staging memory
 * the device may still touch after a failure is leaked, never freed or
 * reused; the next call allocates fresh staging.
 *
 * Thread safety: all of these may be called from any number of threads at
 * once.  Calls on one stream slot serialize on that slot's lock only where
 * they use the slot's staging (tf_download_scalar(), and tf_download() into
 * pageable memory); calls on different slots never wait for each other's
 * lock, though concurrent bulk downloads share the runtime's copy threads.
 * @{
 */

/** Largest length tf_download_scalar() accepts: the widest scalar, a
 * complex double. */
#define TF_SCALAR_DOWNLOAD_MAX_BYTES 16

/**
 * Allocate @p bytes of device memory on the runtime's device, in order on
 * the calling thread's slot stream.
 *
 * Where the device has memory pools (tf_runtime_supports() with
 * TF_CAP_STREAM_ORDERED_ALLOC answers 1) the memory comes from the device's
 * default pool (cuMemAllocAsync): work queued later on the same slot may use
 * it at once; other slots, other runtimes and the host only after
 * tf_runtime_sync() on this slot.  Otherwise it is a plain cuMemAlloc and
 * usable everywhere on return.  Either way it is aligned for any type, as
 * cuMemAlloc documents, and not initialized.
 *
 * @param bytes        size; 0 gives *out_ptr = 0 (no driver call), which
 *                     every transfer accepts with length 0 and tf_free()
 *                     ignores.
 * @param[out] out_ptr the device address; release it with tf_free().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out_ptr);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY (device memory
 *         exhausted); TF_ERROR_RUNTIME_STATE (forked child);
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_NOT_SUPPORTED (the driver lacks
 *         cuMemAlloc); TF_ERROR_CUDA.
 */
TF_API tf_status tf_alloc(tf_runtime *rt, size_t bytes, uint64_t *out_ptr);

/**
 * Free device memory that tf_alloc() returned (through any runtime of the
 * same device), in order on the calling thread's slot stream: work queued
 * earlier on this slot may still use it; work on other slots that uses it
 * must be finished before.  With memory pools this is cuMemFreeAsync and
 * returns at once; otherwise cuMemFree, which waits for the device.
 *
 * @param ptr  the address tf_alloc() returned; 0 is a no-op.  Freeing an
 *             address twice is a bug the library reports only when the
 *             driver notices it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (@p ptr is not the start of an
 *         allocation of the runtime's device); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 */
TF_API tf_status tf_free(tf_runtime *rt, uint64_t ptr);

/**
 * Copy @p len bytes of host memory at @p src to device memory at @p dst, in
 * order on the calling thread's slot stream.
 *
 * @p src may be reused or freed as soon as this returns: pageable memory is
 * staged by the driver before it returns; page-locked memory (allocated or
 * registered with CUDA) is copied directly, and then the call waits for the
 * slot's stream to finish the copy.  Work queued later on the same slot sees
 * the data; other slots, runtimes and the host see it after
 * tf_runtime_sync() on this slot.
 *
 * @param src  host memory readable for @p len bytes.
 * @param dst  device memory of the runtime's device (checked, see above).
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p src, @p dst not device
 *         memory of the runtime's device, the range crosses the end of its
 *         allocation); TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 *         On failure the device may still write @p dst's range.
 */
TF_API tf_status tf_upload(tf_runtime *rt, const void *src, uint64_t dst, size_t len);

/**
 * Copy @p len bytes from @p src to @p dst, both device memory of the
 * runtime's device, in order on the calling thread's slot stream.  Returns
 * once the copy is queued; work queued later on the slot sees the result.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (either address unchecked, see
 *         above, or the two ranges overlap); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 */
TF_API tf_status tf_copy(tf_runtime *rt, uint64_t src, uint64_t dst, size_t len);

/**
 * Whether a copy from @p src_rt's device to @p dst_rt's device runs
 * directly (NVLink or PCIe peer-to-peer: the source device can access the
 * destination's memory), which is what TF_CAP_PEER_COPY cannot say.  Always
 * 1 when both runtimes are on the same device.  tf_peer_copy() works either
 * way; without direct access the driver stages the copy through host
 * memory.
 *
 * @param[out] out_available 1 or 0.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_NOT_SUPPORTED (the driver lacks cuDeviceCanAccessPeer);
 *         TF_ERROR_CUDA.
 */
TF_API tf_status tf_peer_copy_available(tf_runtime *src_rt, tf_runtime *dst_rt,
                                        int32_t *out_available);

/**
 * Copy @p len bytes from device memory of @p src_rt's device to device
 * memory of @p dst_rt's device, in order on the calling thread's slot stream
 * of @p src_rt: after the work queued there.  Returns once the copy is
 * queued.  @p dst_rt's streams do not wait for it: before work on them uses
 * @p dst, call tf_runtime_sync(src_rt) from the same slot; and work queued on
 * @p dst_rt that still uses @p dst must be finished before this call.
 *
 * When tf_peer_copy_available() says 1 for different devices, the first
 * such copy enables peer access from @p src_rt's primary context to
 * @p dst_rt's (cuCtxEnablePeerAccess, which stays enabled for that
 * context); if the driver refuses, the copy still runs, staged, and a
 * warning is logged.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, an address unchecked for
 *         its runtime's device, see above); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 */
TF_API tf_status tf_peer_copy(tf_runtime *src_rt, uint64_t src, tf_runtime *dst_rt,
                              uint64_t dst, size_t len);

/**
 * Read a small value (a scalar result, a flag) from device memory at @p src
 * into @p out, after the work queued on the calling thread's slot.
 *
 * The bytes go through a page-locked staging buffer that belongs to the
 * slot (allocated at the slot's first call, not write-combined, so the host
 * reads it at full speed): an asynchronous copy on the slot's stream, then a
 * wait for that stream only.  The cost is that of the raw driver copy plus
 * the address check, one context check and the slot's lock.
 *
 * @param src  device memory of the runtime's device (checked, see above).
 * @param out  host memory writable for @p len bytes; written only on TF_OK.
 * @param len  0 .. TF_SCALAR_DOWNLOAD_MAX_BYTES.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out, @p len over
 *         TF_SCALAR_DOWNLOAD_MAX_BYTES, @p src unchecked);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY (no page-locked
 *         memory for the staging buffer); TF_ERROR_RUNTIME_STATE (forked
 *         child, or the calling thread already holds the slot, from a
 *         callback); TF_ERROR_DEVICE_FAULT (the wait reported a sticky
 *         fault of earlier work); TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 *         After a failed copy or wait the slot's staging buffer is leaked
 *         (the device may still write it) and the next call allocates
 *         another.
 */
TF_API tf_status tf_download_scalar(tf_runtime *rt, uint64_t src, void *out, size_t len);

/**
 * Copy @p len bytes of device memory at @p src into host memory at @p dst,
 * after the work queued on the calling thread's slot.  When it returns
 * TF_OK, @p dst holds the data.
 *
 * Page-locked destinations (allocated or registered with CUDA, detected with
 * cuPointerGetAttribute) are written by the device directly.  Ordinary
 * (pageable) destinations above 64 KiB are copied faster than the driver's
 * own pageable path: the device copies chunks into the slot's two
 * page-locked staging buffers while host threads copy the previous chunk out
 * in parallel (tf_runtime_options::download_threads and
 * ::download_chunk_bytes tune it).  Smaller pageable destinations use the
 * driver's copy.  If the operating system refuses to start a copy thread,
 * downloads use the threads that did start (at least the caller) and a
 * warning is logged once.
 *
 * @param src  device memory of the runtime's device (checked, see above).
 * @param dst  host memory writable for @p len bytes, not device memory.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p dst, @p dst is device
 *         memory, @p src unchecked; nothing was written);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY (no page-locked
 *         memory for the staging buffers); TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 *
 * On any other failure @p dst may be partly written, and for a page-locked
 * @p dst the device may still be writing it: do not free or reuse @p dst
 * until a later tf_runtime_sync() from the same slot returns TF_OK (the
 * device is then done with it); if none does, leak it.  The library's host
 * threads never touch @p dst after the call returns.
 */
TF_API tf_status tf_download(tf_runtime *rt, uint64_t src, void *dst, size_t len);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TENFERRO_GPU_H */

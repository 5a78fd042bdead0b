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
 * then run the workspace retirements the device has passed (all of this
 * slot's made before the call; other slots' as tf_workspace_poll() does).
 * Other slots are not waited for.  A slot whose stream was never created
 * returns at once.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT (the wait reported
 *         a sticky fault); TF_ERROR_CUDA (the wait, or a retirement leaked as
 *         tf_workspace_poll() describes).
 */
TF_API tf_status tf_runtime_sync(tf_runtime *rt);

/** @} */

/* ==== Work on the slot streams: cuBLAS, any library, kernels, retirement ==== */

/**
 * @defgroup stream_work Work on the slot streams
 *
 * Everything here runs on the calling thread's stream slot (the bound slot
 * for a handle from tf_runtime_bind_slot()), creating its stream at first
 * use, with the runtime's primary context current, and puts the caller's
 * context back on return.  Work queued on one slot is ordered with
 * everything else queued on that slot; to order two slots use
 * tf_slot_wait() or a tf_event.
 *
 * Besides the statuses each function lists, any call that needs a driver
 * entry point the loaded driver lacks returns TF_ERROR_NOT_SUPPORTED, and
 * every call that takes a runtime returns TF_ERROR_RUNTIME_STATE in a forked
 * child and TF_ERROR_DEVICE_FAULT after a sticky fault.
 * @{
 */

/** cuBLAS pointer modes for tf_cublas_enqueue() (the values of
 * cublasPointerMode_t). */
enum tf_cublas_pointer_mode {
    /** alpha, beta and scalar results live in host memory. */
    TF_CUBLAS_POINTER_MODE_HOST = 0,
    /** alpha, beta and scalar results live in device memory. */
    TF_CUBLAS_POINTER_MODE_DEVICE = 1
};

/**
 * Enqueues cuBLAS work: the callback receives the cuBLAS handle of the
 * calling thread's slot (a cublasHandle_t) and the slot's stream (a
 * CUstream), and makes its cuBLAS calls with them.
 *
 * The slot's handle is created at the slot's first call: cuBLAS is loaded
 * (libcublas.so.13, else libcublas.so.12, or the absolute path in the
 * environment variable TENFERRO_GPU_CUBLAS), a handle is created in the
 * primary context, bound to the slot's stream once, and given a workspace of
 * tf_runtime_options::cublas_workspace_bytes of device memory that the
 * runtime allocates (none when 0).  Handle, stream binding and workspace
 * stay until the runtime is torn down.  Before every call the handle's
 * pointer mode is set to @p pointer_mode.
 *
 * The slot's lock is held from the pointer-mode selection until @p fn
 * returns, so threads sharing a slot never interleave their configuration
 * and enqueues.  Calls on other slots run in parallel.  When the primary
 * context is already current, the call adds one cuCtxGetCurrent, the slot
 * lock and cublasSetPointerMode to what @p fn does; no system call, no
 * allocation, no lock shared between slots.
 *
 * @p fn must not keep the handle after it returns, change its stream or
 * workspace, or destroy it.  It may call this library, but a call that needs
 * the slot it runs on (tf_cublas_enqueue(), tf_stream_enqueue() on the same
 * slot) fails with TF_ERROR_RUNTIME_STATE instead of deadlocking.
 *
 * @param rt           the runtime; the calling thread's (or the bound) slot is used.
 * @param pointer_mode enum tf_cublas_pointer_mode.
 * @param fn           returns a cublasStatus_t: 0 (CUBLAS_STATUS_SUCCESS) or
 *                     the failing status, which becomes TF_ERROR_PROVIDER
 *                     with code domain TF_CODE_CUBLAS and a message naming
 *                     the status ("CUBLAS_STATUS_INVALID_VALUE (7)").  A C++
 *                     exception it throws becomes TF_ERROR_CALLBACK.
 * @param user_data    passed to @p fn.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p fn, unknown pointer
 *         mode); TF_ERROR_INVALID_HANDLE; TF_ERROR_LIBRARY_NOT_FOUND (no
 *         cuBLAS; the message says what to add to LD_LIBRARY_PATH);
 *         TF_ERROR_NOT_SUPPORTED (the cuBLAS found lacks a function this
 *         needs); TF_ERROR_PROVIDER (cublasCreate_v2, cublasSetStream_v2,
 *         cublasSetWorkspace_v2, cublasSetPointerMode_v2 or @p fn failed;
 *         a handle that was not completely set up is destroyed again and the
 *         next call starts over); TF_ERROR_OUT_OF_MEMORY (the workspace);
 *         TF_ERROR_CALLBACK; TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_CUDA.
 */
TF_API tf_status tf_cublas_enqueue(tf_runtime *rt, int32_t pointer_mode,
                                   int32_t (*fn)(void *cublas_handle, void *stream,
                                                 void *user_data),
                                   void *user_data);

/**
 * A cuBLAS function of the cuBLAS this library loaded, by its exported name
 * ("cublasSgemm_v2", "cublasLtMatmul"), so a binding calls the same cuBLAS
 * instance that made the handles and needs no cuBLAS of its own.  Loads
 * cuBLAS on first use, as tf_cublas_enqueue() does.  Thread-safe.
 *
 * @param name     the symbol; it must start with "cublas".
 * @param[out] out_function the function's address (cast it to its type).
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, a name not starting with
 *         "cublas"); TF_ERROR_LIBRARY_NOT_FOUND; TF_ERROR_NOT_SUPPORTED
 *         (the loaded cuBLAS has no such symbol).
 */
TF_API tf_status tf_cublas_symbol(const char *name, void **out_function);

/**
 * Version of the cuBLAS this library loaded, as major * 10000 + minor * 100
 * + patch (CUBLAS_VERSION's encoding: 130100 for 13.1.0).  Loads cuBLAS on
 * first use.  Thread-safe.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_LIBRARY_NOT_FOUND;
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_PROVIDER (cublasGetProperty).
 */
TF_API tf_status tf_cublas_version(int32_t *out_version);

/**
 * Enqueues work of any library (NCCL, cuFFT, cuSOLVER, your own driver
 * calls) on the calling thread's slot stream: @p fn runs with the primary
 * context current and receives the slot's stream (a CUstream).  The caller's
 * context is current again afterwards, also when @p fn throws.
 *
 * As tf_cublas_enqueue(), it holds the slot's lock while @p fn runs, so the
 * enqueues of threads sharing a slot do not interleave; a call from @p fn
 * that needs the same slot's lock fails with TF_ERROR_RUNTIME_STATE.
 *
 * @param rt        the runtime; the calling thread's (or the bound) slot is used.
 * @param fn        its nonzero return becomes TF_ERROR_CALLBACK with that
 *                  value as the code (TF_CODE_CALLBACK); a C++ exception it
 *                  throws becomes TF_ERROR_CALLBACK too.
 * @param user_data passed to @p fn.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p fn);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_CALLBACK; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (context, stream creation).
 */
TF_API tf_status tf_stream_enqueue(tf_runtime *rt,
                                   int32_t (*fn)(void *stream, void *user_data),
                                   void *user_data);

/**
 * Makes the calling thread's slot stream wait, on the device, for all work
 * queued on slot @p other_slot's stream before this call; the host does not
 * wait.  Work queued later on @p other_slot is not waited for.  Uses one
 * event per slot (recorded on @p other_slot, waited on here), never a
 * device-wide synchronization.
 *
 * A slot whose stream was never created has nothing queued: the call
 * returns at once, as it does when @p other_slot is the caller's own slot.
 * No slot lock is taken, so it may be called from inside
 * tf_cublas_enqueue() and tf_stream_enqueue() callbacks.
 *
 * @param rt         the runtime; the calling thread's (or the bound) slot waits.
 * @param other_slot 0 .. slot count - 1.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (slot out of range);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (cuEventCreate, cuEventRecord,
 *         cuStreamWaitEvent).
 */
TF_API tf_status tf_slot_wait(tf_runtime *rt, int32_t other_slot);

/**
 * Opaque, reference-counted CUDA event of one runtime, for explicit
 * ordering: a producer records it on its slot, consumers wait for it on
 * theirs (or on the host).  An event keeps its runtime alive until its last
 * release.  Thread-safe: any thread may record, wait for, query or
 * synchronize it; waits use the latest record made before them.
 */
typedef struct tf_event tf_event;

/**
 * Creates an event (timing disabled) in the runtime's primary context.
 * Until its first record, waiting for it returns at once.
 *
 * @param rt      the runtime whose primary context holds the event.
 * @param[out] out the event with one reference; release it with
 *                 tf_event_release().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_OUT_OF_MEMORY; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (cuEventCreate).
 */
TF_API tf_status tf_event_new(tf_runtime *rt, tf_event **out);

/** Adds a reference to @p event.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not an event). */
TF_API tf_status tf_event_retain(tf_event *event);

/**
 * Drops a reference; the last one destroys the event (with its runtime's
 * context current; a failure is logged) and then drops the event's
 * reference to its runtime, which may tear the runtime down.  NULL is a
 * no-op.  Using an event after its last release is undefined.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (not an event).
 */
TF_API tf_status tf_event_release(tf_event *event);

/**
 * Records @p event on the calling thread's slot stream of @p rt: it
 * completes when the work queued there before this call is done.
 *
 * @param rt a handle of the runtime the event was made with (or of another
 *           runtime on the same device, which shares its primary context).
 * @param event the event.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, an event of another
 *         device); TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (cuEventRecord).
 */
TF_API tf_status tf_event_record(tf_runtime *rt, tf_event *event);

/**
 * Makes the calling thread's slot stream of @p rt wait, on the device, for
 * the latest record of @p event (any runtime's event).  The host does not
 * wait.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_CUDA (cuStreamWaitEvent).
 */
TF_API tf_status tf_event_wait(tf_runtime *rt, tf_event *event);

/**
 * Blocks the calling thread until the latest record of @p event is done.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT (a sticky fault, which also marks the
 *         event's runtime unusable); TF_ERROR_CUDA (cuEventSynchronize).
 */
TF_API tf_status tf_event_synchronize(tf_event *event);

/**
 * Whether the latest record of @p event is done, without waiting.
 *
 * @param event the event.
 * @param[out] out_done 1 when done (or never recorded), 0 when not yet.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (cuEventQuery).
 */
TF_API tf_status tf_event_query(tf_event *event, int32_t *out_done);

/**
 * Releases a resource (typically device memory that queued work still
 * reads or writes: a library's workspace) once the device has finished
 * everything queued on the calling thread's slot stream before this call,
 * without making the host wait for it.
 *
 * An event is recorded on the slot's stream (events are pooled and reused)
 * and @p release runs once the stream has passed it.  Completed
 * retirements are found, and their releases run, on later calls of
 * tf_workspace_retire() and tf_workspace_poll() on any slot, on
 * tf_runtime_sync(), and at the runtime's teardown (the last release, once
 * every stream is synchronized; if a stream cannot be synchronized, or
 * after a device fault, pending releases never run: their resources leak).
 *
 * The queue holds at most tf_runtime_options::retirement_capacity
 * retirements.  When it is full, or an event cannot be created or recorded,
 * the call falls back to a barrier: it waits for the slot's stream and runs
 * @p release before returning.  When the device's progress cannot be proven
 * (a failed event query and a failed stream wait, or a failed barrier), the
 * resource is leaked and counted, never released early.
 *
 * Where @p release runs: on the thread of the call that found the
 * retirement complete (one of the calls above), with the runtime's primary
 * context current and no lock of this library held, so it may free device
 * memory and call this library (but not the runtime being torn down, when
 * it runs from the last release).  Releases found by one call run in the
 * order of their retirements on each slot; releases found by calls on
 * different threads may run concurrently.  A C++ exception it throws is
 * logged and dropped.
 *
 * @param rt        the runtime; the calling thread's (or the bound) slot is used.
 * @param resource  passed to @p release; may be NULL.
 * @param release   called exactly once, or never if the resource leaks.
 * @param user_data passed to @p release.
 * @return TF_OK (queued, or released by the barrier fallback);
 *         TF_ERROR_INVALID_ARGUMENT (NULL @p release) and
 *         TF_ERROR_INVALID_HANDLE: nothing happened, the resource is still
 *         the caller's.  Any other failure means @p release will not run
 *         and the device may still use the resource: leak it.  These are
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA
 *         (context, stream creation, or the barrier fallback's
 *         cuStreamSynchronize, in which case the runtime counted it as
 *         leaked); TF_ERROR_OUT_OF_MEMORY (host memory for the queue).
 */
TF_API tf_status tf_workspace_retire(tf_runtime *rt, void *resource,
                                     void (*release)(void *resource, void *user_data),
                                     void *user_data);

/**
 * Runs the releases of every retirement whose event the device has passed
 * (on all slots), without waiting for anything, except for a retirement
 * whose event query fails: that one waits for its stream (a barrier
 * fallback).  See tf_workspace_retire() for where releases run.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (the
 *         context could not be activated, or a retirement's event query and
 *         stream wait both failed: that resource was leaked, counted and
 *         logged; the error is the wait's).
 */
TF_API tf_status tf_workspace_poll(tf_runtime *rt);

/** Counters of a runtime's workspace retirements.  Every accepted
 * retirement is, at any time, in exactly one of released, leaked and
 * in_flight. */
typedef struct tf_retirement_stats {
    uint32_t struct_size;   /**< in: set by tf_retirement_stats_init */
    uint32_t capacity;      /**< out: the queue bound (retirement_capacity) */
    uint64_t deferred;      /**< out: retirements queued behind an event */
    uint64_t released;      /**< out: releases started */
    uint64_t barrier_fallbacks; /**< out: retirements resolved by waiting for
                                 * their stream instead (queue full, event
                                 * creation, record or query failed) */
    uint64_t leaked;        /**< out: resources never released because the
                             * device's progress could not be proven */
    uint64_t in_flight;     /**< out: retirements queued now */
    uint64_t max_in_flight; /**< out: the most ever queued at once */
} tf_retirement_stats;

/** Zero @p stats and set its struct_size. NULL is ignored. */
TF_API void tf_retirement_stats_init(tf_retirement_stats *stats);

/**
 * A consistent snapshot of the runtime's retirement counters.  No driver
 * call; serializes briefly with retirements on the runtime.
 *
 * @param rt the runtime.
 * @param[in,out] out initialised with tf_retirement_stats_init; fields past
 *                its struct_size are not written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 */
TF_API tf_status tf_workspace_stats(const tf_runtime *rt, tf_retirement_stats *out);

/** Opaque, reference-counted loaded module (a CUmodule) of one runtime. */
typedef struct tf_module tf_module;

/**
 * Loads a module image into the runtime's primary context: PTX text (which
 * the driver compiles for the device), a CUBIN (ELF) or a fatbin.  The
 * module keeps its runtime alive until its last release.
 *
 * @param rt    the runtime whose primary context receives the module.
 * @param image the image; @p size bytes are read.  PTX need not end with a
 *              NUL byte (the library adds one when it is missing).
 * @param size  bytes of @p image, at least 1.
 * @param[out] out the module with one reference.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, size 0);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT; TF_ERROR_NOT_SUPPORTED;
 *         TF_ERROR_CUDA (cuModuleLoadDataEx; the message carries the start
 *         of the driver's JIT error log, e.g. for PTX of a newer target).
 */
TF_API tf_status tf_module_load(tf_runtime *rt, const void *image, size_t size,
                                tf_module **out);

/** Adds a reference to @p module.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not a module). */
TF_API tf_status tf_module_retain(tf_module *module);

/**
 * Drops a reference; the last one unloads the module with its runtime's
 * context current (a failure is logged; after a device fault or in a forked
 * child it is leaked quietly), then drops its reference to the runtime.
 * Functions of the module are invalid afterwards.  NULL is a no-op.
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (not a module).
 */
TF_API tf_status tf_module_release(tf_module *module);

/**
 * A kernel of @p module by its name as it appears in the image: the plain
 * name for an extern "C" kernel, the mangled one for a C++ kernel.
 *
 * @param module the module.
 * @param name   the kernel's name.
 * @param[out] out_function a CUfunction, valid until the module's last
 *             release.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, not a module);
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA
 *         (cuModuleGetFunction: CUDA_ERROR_NOT_FOUND when the image has no
 *         such kernel).
 */
TF_API tf_status tf_module_function(tf_module *module, const char *name, void **out_function);

/**
 * Sets an attribute of a kernel of @p module (cuFuncSetAttribute; e.g.
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8, needed before
 * launching with more than 48 KiB of dynamic shared memory).
 *
 * @param module    the module the function belongs to.
 * @param function  a function from tf_module_function().
 * @param attribute a CUfunction_attribute value.
 * @param value     the attribute's new value.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA.
 */
TF_API tf_status tf_function_set_attribute(tf_module *module, void *function,
                                           int32_t attribute, int32_t value);

/** Shape of a kernel launch. */
typedef struct tf_launch_config {
    uint32_t struct_size;  /**< in: set by tf_launch_config_init */
    uint32_t grid_x;       /**< blocks in x (default 1) */
    uint32_t grid_y;       /**< blocks in y (default 1) */
    uint32_t grid_z;       /**< blocks in z (default 1) */
    uint32_t block_x;      /**< threads per block in x (default 1) */
    uint32_t block_y;      /**< threads per block in y (default 1) */
    uint32_t block_z;      /**< threads per block in z (default 1) */
    uint32_t shared_memory_bytes; /**< dynamic shared memory (default 0) */
} tf_launch_config;

/** Set @p config to one block of one thread and its struct_size. NULL is ignored. */
TF_API void tf_launch_config_init(tf_launch_config *config);

/**
 * Launches @p function (from tf_module_function()) on the calling thread's
 * slot stream.  Returns once the launch is queued; errors the kernel meets
 * while running show up in later calls (a sticky fault as
 * TF_ERROR_DEVICE_FAULT).  Takes no slot lock, so it may be called from
 * inside tf_cublas_enqueue() and tf_stream_enqueue() callbacks.
 *
 * @param rt     the runtime; the calling thread's (or the bound) slot is used.
 * @param function a function from tf_module_function() of a module of this
 *               runtime's device.
 * @param config initialised with tf_launch_config_init; every dimension at
 *               least 1.
 * @param args   one pointer per kernel parameter, to a value of the
 *               parameter's type (cuLaunchKernel's kernelParams); NULL for
 *               a kernel without parameters.  Read during the call only.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, a zero dimension,
 *         struct_size too small); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_CUDA (cuLaunchKernel: a function of another context,
 *         too many threads, too much shared memory, ...).
 */
TF_API tf_status tf_kernel_launch(tf_runtime *rt, void *function,
                                  const tf_launch_config *config, void **args);

/** What tf_program_compile() produces. */
enum tf_compile_target {
    /** PTX text for compute_XY, which tf_module_load() JIT-compiles. */
    TF_COMPILE_PTX = 0,
    /** A CUBIN for sm_XY, loaded without JIT. */
    TF_COMPILE_CUBIN = 1
};

/** Options of tf_program_compile(). */
typedef struct tf_compile_options {
    uint32_t struct_size;   /**< set by tf_compile_options_init */
    int32_t target;         /**< enum tf_compile_target (default TF_COMPILE_PTX) */
    /** Architecture as 10 * major + minor (90 for compute_90 / sm_90); 0
     * (default) for the runtime's device.  Ignored when options
     * already has an -arch / --gpu-architecture option. */
    int32_t arch;
    int32_t option_count;   /**< entries of options (default 0) */
    /** Further NVRTC options ("-std=c++17", "-default-device", "-I/path"),
     * read during the call only; NULL when option_count is 0. */
    const char *const *options;
    /** Name of the program in the log ("kernels.cu"); NULL for
     * "tenferro_program.cu". */
    const char *name;
} tf_compile_options;

/** Set @p options to the defaults and its struct_size. NULL is ignored. */
TF_API void tf_compile_options_init(tf_compile_options *options);

/** Opaque result of tf_program_compile(): the compiled image and NVRTC's log. */
typedef struct tf_program tf_program;

/**
 * Compiles CUDA C++ @p source with NVRTC for the runtime's device (or
 * options->arch).  NVRTC is loaded at first use: libnvrtc.so.13, else
 * libnvrtc.so.12, or the absolute path in the environment variable
 * TENFERRO_GPU_NVRTC.  No context or device work; thread-safe.
 *
 * Kernels to be found by their plain name with tf_module_function() must be
 * declared extern "C".
 *
 * Getting the log: on TF_OK and on TF_ERROR_COMPILE (and only then), *out
 * receives a program, which the caller releases with tf_program_release().
 * tf_program_log() returns NVRTC's whole log (the errors on
 * TF_ERROR_COMPILE, warnings on TF_OK); tf_program_image() the image on
 * TF_OK.  The thread's last error message on TF_ERROR_COMPILE also carries
 * the start of the log.
 *
 * @param rt     the runtime whose device is the default target.
 * @param source NUL-terminated CUDA C++.
 * @param options NULL for the defaults, or initialised with
 *                tf_compile_options_init.
 * @param[out] out the program (see above); untouched on other failures.
 * @return TF_OK; TF_ERROR_COMPILE (NVRTC rejected the source or an option;
 *         code domain TF_CODE_NVRTC); TF_ERROR_INVALID_ARGUMENT (NULL,
 *         unknown target, negative option_count, options NULL with a count,
 *         nonzero unknown option bytes); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_LIBRARY_NOT_FOUND (no NVRTC; the message says what to
 *         add to LD_LIBRARY_PATH); TF_ERROR_NOT_SUPPORTED (the NVRTC found
 *         lacks a function this needs); TF_ERROR_PROVIDER (another NVRTC
 *         failure); TF_ERROR_OUT_OF_MEMORY.
 */
TF_API tf_status tf_program_compile(tf_runtime *rt, const char *source,
                                    const tf_compile_options *options, tf_program **out);

/**
 * The compiled image of @p program (PTX text including its NUL byte, or a
 * CUBIN), valid until tf_program_release(); pass it to tf_module_load().
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, or a program that did not
 *         compile and so has no image).
 */
TF_API tf_status tf_program_image(const tf_program *program, const void **out_image,
                                  size_t *out_size);

/**
 * NVRTC's log for @p program, NUL-terminated ("" when NVRTC wrote none),
 * valid until tf_program_release().
 *
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT.
 */
TF_API tf_status tf_program_log(const tf_program *program, const char **out_log);

/** Frees @p program, its image and its log.  NULL is a no-op. */
TF_API void tf_program_release(tf_program *program);

/** @} */

/* ==== Device memory and transfers ==== */

#ifdef __cplusplus
}
#endif

#endif /* TENFERRO_GPU_H */

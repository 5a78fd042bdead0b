/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file tenferro_gpu.h
 * @brief tenferro-gpu: drive one CUDA device's runtime from any language.
 *
 * The contract of libtenferro_gpu.so.1.  It compiles as C89 or later and
 * C++98 or later, and includes only <stddef.h> and <stdint.h>.  CUDA objects
 * cross as void* (CUcontext, CUstream, CUfunction, cublasHandle_t,
 * cublasLtHandle_t), device
 * addresses as uint64_t (CUdeviceptr).  docs/ explains how it works.
 *
 * Conventions, for every function unless its comment says otherwise:
 *  - Fallible functions return a tf_status (TF_OK is 0) and list what they
 *    return.  Any may also return TF_ERROR_OUT_OF_MEMORY (host memory) and
 *    TF_ERROR_INTERNAL (a bug here).  A failed driver call returns the status
 *    its CUresult maps to (enum tf_status_code).
 *  - "The device statuses" are TF_ERROR_RUNTIME_STATE (the runtime was made
 *    by a process this one was forked from), TF_ERROR_DEVICE_FAULT (it saw a
 *    sticky fault: release it), TF_ERROR_NOT_SUPPORTED (the driver lacks an
 *    entry point) and TF_ERROR_CUDA (a driver call failed; the code says
 *    which): any call that works on the device may return them.
 *  - A failure records the calling thread's last error (tf_last_error()).  A
 *    call that returns TF_OK leaves that record as it was, also when a step
 *    inside it failed and it answered anyway; only failing calls made by the
 *    caller's own callbacks (tf_with_context(), tf_cublas_enqueue(),
 *    tf_cublaslt_enqueue(), tf_stream_enqueue(), a log callback) leave
 *    records.
 *  - Outputs are written only on TF_OK.  A NULL where an object is required
 *    is TF_ERROR_INVALID_ARGUMENT, never a crash.
 *  - "On failure" says what the caller must do: free, leak, retry.  Unless it
 *    says otherwise, a failed call leaves nothing to undo.
 *  - Pointers handed out (strings, contexts, streams, images) are borrowed,
 *    for as long as each comment says.  Pointers passed in are used during
 *    the call only, unless the comment says the library keeps them.
 *  - A released handle (runtime, event, module or program) is usually, not
 *    always, refused with TF_ERROR_INVALID_HANDLE (docs/bad-input.md says
 *    when).
 *  - No call leaves the thread's current CUDA context changed (NULL
 *    included), even when a callback it ran changed it; no C++ exception
 *    leaves the library.
 *  - Versioned structs start with uint32_t struct_size, set by their *_init
 *    from the caller's sizeof: tf_runtime_options_init(&o, sizeof o).  They
 *    grow only at the end and the library never reads or writes past
 *    struct_size, so older and newer programs and libraries mix.
 *
 * Thread safety: every function may be called from any thread, and every
 * handle shared.  Each "Thread safety" line says what may run concurrently
 * and what blocks, in these terms:
 *  - slot: one of a runtime's streams.  A thread's calls use one slot
 *    (tf_runtime_current_slot()), a bound handle's calls one fixed slot.
 *  - slot-exclusive: tf_cublas_enqueue(), tf_cublaslt_enqueue(),
 *    tf_stream_enqueue(),
 *    tf_download_scalar(), tf_download() into pageable memory above 64 KiB
 *    and tf_upload() from pageable memory above 256 KiB.  Those on one
 *    slot run one at a time, callbacks included; other
 *    slots never wait for them.  Inside an enqueue callback, a slot-exclusive
 *    call on the same slot returns TF_ERROR_RUNTIME_STATE.
 *  - first use: the first call that needs a slot's stream, the driver,
 *    cuBLAS, cuBLASLt or NVRTC creates or loads it; concurrent first callers
 *    wait.
 * docs/threading.md names the locks behind these rules.
 *
 * Graph capture (1.2): while a slot captures (tf_graph_capture_begin()), the
 * calls that only queue work on it are captured into the graph, and the calls
 * that would wait for the device, or promise what a launch cannot repeat,
 * return TF_ERROR_RUNTIME_STATE and leave the capture intact; each says so.
 * See the graph capture group and docs/graphs.md.
 *
 * fork(): every call returns in a child, whatever the parent's other threads
 * were doing; a runtime inherited from the parent refuses device work with
 * TF_ERROR_RUNTIME_STATE, as does a call that needs a load the parent had in
 * flight.  See docs/teardown.md.
 *
 * Stability: everything declared here is stable (docs/abi-stability.md);
 * there is no experimental section.  The TF_DEFAULT_* values are those of
 * the library this header ships with: a minor release may retune the
 * download defaults, and a field left 0 always gets the running library's.
 * Each function says since which version it exists (@since).
 */
#ifndef TENFERRO_GPU_H
#define TENFERRO_GPU_H

#include <stddef.h>
#include <stdint.h>

/* ==== Attributes =========================================================== */

/**
 * @def TF_NODISCARD
 * Warns when a caller ignores the returned tf_status: [[nodiscard]] in
 * C++17 and C23, warn_unused_result with GCC and Clang otherwise, nothing
 * elsewhere or when the program defines TF_NO_NODISCARD.  It marks every
 * function returning tf_status except the *_release functions, whose only
 * failure is a handle that is not live: cleanup code ignores their status,
 * and GCC's C warning cannot be silenced with a (void) cast.  A function
 * returning tf_status added later carries it unless it releases.
 */
#if defined(TF_NO_NODISCARD)
#define TF_NODISCARD
#elif (defined(__cplusplus) && __cplusplus >= 201703L) || \
    (defined(_MSVC_LANG) && _MSVC_LANG >= 201703L) ||     \
    (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L)
#define TF_NODISCARD [[nodiscard]]
#elif defined(__GNUC__) || defined(__clang__)
#define TF_NODISCARD __attribute__((warn_unused_result))
#else
#define TF_NODISCARD
#endif

/**
 * @def TF_DEPRECATED
 * Marks a function that a later release removes, with a message naming
 * its replacement, before its declaration: TF_DEPRECATED("use tf_other").  A
 * deprecated function keeps working until the next major version
 * (docs/abi-stability.md).  A program defining TF_NO_DEPRECATED_WARNINGS
 * silences the warnings.  No function is deprecated yet.
 */
#if defined(TF_NO_DEPRECATED_WARNINGS)
#define TF_DEPRECATED(message)
#elif (defined(__cplusplus) && __cplusplus >= 201402L) || \
    (defined(_MSVC_LANG) && _MSVC_LANG >= 201402L) ||     \
    (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L)
#define TF_DEPRECATED(message) [[deprecated(message)]]
#elif defined(__GNUC__) || defined(__clang__)
#define TF_DEPRECATED(message) __attribute__((deprecated(message)))
#elif defined(_MSC_VER)
#define TF_DEPRECATED(message) __declspec(deprecated(message))
#else
#define TF_DEPRECATED(message)
#endif

#if defined(__GNUC__) || defined(__clang__)
/** Marks the exported functions (default visibility); nothing else is
 * exported. */
#define TF_API __attribute__((visibility("default")))
#else
/** Elsewhere the version script alone decides what is exported. */
#define TF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Version ============================================================== */

/**
 * @defgroup version Version
 *
 * The version a program was built with (the macros) and the one it runs with
 * (the functions).  The major version is the SONAME's number.
 * @{
 */

/** Major version: changes only when the ABI breaks (the SONAME's number). */
#define TF_VERSION_MAJOR 1
/** Minor version: new functions, enum values or struct fields at the end. */
#define TF_VERSION_MINOR 2
/** Patch version: fixes that change no interface. */
#define TF_VERSION_PATCH 0
/** The version as one number: major * 10000 + minor * 100 + patch. */
#define TF_VERSION_NUMBER \
    (TF_VERSION_MAJOR * 10000 + TF_VERSION_MINOR * 100 + TF_VERSION_PATCH)
/** The version as "major.minor.patch". */
#define TF_VERSION_STRING "1.2.0"

/**
 * Version of the loaded library; compare it with TF_VERSION_NUMBER to detect
 * a library older than the header.
 * @return major * 10000 + minor * 100 + patch.  Never fails.
 * @threadsafety Any thread; never blocks.
 * @since 1.0
 */
TF_API uint32_t tf_version(void);

/**
 * Version of the loaded library as "major.minor.patch".
 * @return a static string, never NULL; never free it.  Never fails.
 * @threadsafety Any thread; never blocks.
 * @since 1.0
 */
TF_API const char *tf_version_string(void);

/** @} */

/**
 * Largest struct_size a versioned struct may declare: 64 KiB, far above any
 * struct's growth.  A larger one is a struct never initialised: calls refuse
 * it with TF_ERROR_INVALID_ARGUMENT and the *_init functions ignore it, so
 * the library never touches more than this many bytes of a caller's struct.
 */
#define TF_MAX_STRUCT_SIZE 65536

/* ==== Statuses and errors ================================================== */

/**
 * @defgroup errors Statuses and errors
 *
 * A failing call returns its status and records, for the calling thread
 * only, the public function that failed, the call inside it that failed, a
 * numeric code with its domain, and a message.  The record survives
 * successful calls.  See docs/errors-and-logging.md.
 * @{
 */

/** Result of every fallible function (enum tf_status_code). */
typedef int32_t tf_status;

/**
 * Every status.  Values are never renumbered, a retired value is never
 * reused, new ones are added at the end; treat an unknown one as a failure.
 *
 * A failed driver call maps its CUresult: CUDA_ERROR_OUT_OF_MEMORY to
 * TF_ERROR_OUT_OF_MEMORY, CUDA_ERROR_STUB_LIBRARY to TF_ERROR_DRIVER_STUB,
 * CUDA_ERROR_NO_DEVICE to TF_ERROR_NO_DEVICE, CUDA_ERROR_INVALID_DEVICE and
 * CUDA_ERROR_DEVICE_UNAVAILABLE to TF_ERROR_DEVICE_UNAVAILABLE,
 * CUDA_ERROR_NOT_SUPPORTED to TF_ERROR_NOT_SUPPORTED; the sticky faults
 * (illegal address, illegal instruction, misaligned address, invalid address
 * space, invalid program counter, hardware stack error, device assert, launch
 * failure, launch timeout, uncorrectable ECC error) to TF_ERROR_DEVICE_FAULT;
 * every other result to TF_ERROR_CUDA.  The code is the CUresult, its domain
 * TF_CODE_CUDA.  A driver entry point the driver lacks is
 * TF_ERROR_NOT_SUPPORTED.
 */
enum tf_status_code {
    /** Success. */
    TF_OK = 0,
    /** An argument is invalid: NULL where an object is needed, a size out
     * of range, an unknown option, a device range that does not fit. */
    TF_ERROR_INVALID_ARGUMENT = 1,
    /** A handle (runtime, event, module, program) was already released, or
     * a pointer is not a runtime handle. */
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
    /** A CUDA driver call failed; the code is its CUresult. */
    TF_ERROR_CUDA = 8,
    /** The driver or device lacks what the call needs (a missing entry
     * point, an unsupported feature). */
    TF_ERROR_NOT_SUPPORTED = 9,
    /** cuBLAS or NVRTC could not be loaded; the message says what to add to
     * LD_LIBRARY_PATH. */
    TF_ERROR_LIBRARY_NOT_FOUND = 10,
    /** A vendor library (cuBLAS, NVRTC) returned a failure; the code is its
     * status. */
    TF_ERROR_PROVIDER = 11,
    /** A caller's callback returned nonzero (the code) or threw. */
    TF_ERROR_CALLBACK = 12,
    /** Host or device memory is exhausted. */
    TF_ERROR_OUT_OF_MEMORY = 13,
    /** The call cannot run in this state: a runtime used in a process forked
     * from its creator, a load the parent had in flight at the fork, a
     * slot-exclusive call inside an enqueue callback on its own slot,
     * tf_set_log_callback() inside a log callback, a call that cannot run
     * while its slot captures a graph (1.2). */
    TF_ERROR_RUNTIME_STATE = 14,
    /** The device reported a sticky fault (an illegal address, a trap, a
     * launch failure); the runtime's context is unusable: release the
     * runtime. */
    TF_ERROR_DEVICE_FAULT = 15,
    /** NVRTC rejected the source; its log is in the returned program. */
    TF_ERROR_COMPILE = 16,
    /** A bug in this library (an unexpected C++ exception was caught). */
    TF_ERROR_INTERNAL = 17
};

/** What the numeric code of the last error means. */
enum tf_code_domain {
    /** No numeric code: the library itself refused. */
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
 * A few words describing @p status ("invalid argument").
 * @param[in] status any value; an unknown one is "unknown status".
 * @return a static string, never NULL; never free it.  Never fails.
 * @threadsafety Any thread; never blocks.
 * @since 1.0
 */
TF_API const char *tf_status_string(tf_status status);

/**
 * Message of the calling thread's last failure: "tf_runtime_sync:
 * cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700): ...".
 * @return never NULL; "" if this thread has seen no failure.  Thread-local
 *         storage, valid and unchanged until this thread's next failing call,
 *         tf_clear_last_error(), its exit or the library's unload: copy it to
 *         keep it, never free it.  Never fails.
 * @threadsafety Any thread; reads only its own record, never blocks.
 * @since 1.0
 */
TF_API const char *tf_last_error_message(void);

/**
 * The public function that failed ("tf_runtime_sync").
 * @return "" if this thread has seen no failure.  Lifetime as
 *         tf_last_error_message().  Never fails.
 * @threadsafety As tf_last_error_message().
 * @since 1.0
 */
TF_API const char *tf_last_error_operation(void);

/**
 * The call inside the failed function that failed ("cuStreamSynchronize",
 * "cublasCreate_v2", "callback").
 * @return "" when the library itself refused (a bad argument, a released
 *         handle) or this thread has seen no failure.  Lifetime as
 *         tf_last_error_message().  Never fails.
 * @threadsafety As tf_last_error_message().
 * @since 1.0
 */
TF_API const char *tf_last_error_call(void);

/**
 * Numeric code of the last failure, as tf_last_error_code_domain() says.
 * @return a CUresult, cublasStatus_t, nvrtcResult, callback value or errno;
 *         0 when there is none.  Never fails.
 * @threadsafety As tf_last_error_message().
 * @since 1.0
 */
TF_API int32_t tf_last_error_code(void);

/**
 * Domain of tf_last_error_code().
 * @return one of enum tf_code_domain; TF_CODE_NONE when there is no code.
 *         Never fails.
 * @threadsafety As tf_last_error_message().
 * @since 1.0
 */
TF_API int32_t tf_last_error_code_domain(void);

/**
 * Status of the calling thread's last failure.
 * @return TF_OK if this thread has seen no failure since it started or last
 *         cleared its record; otherwise the status that failure returned.
 * @threadsafety As tf_last_error_message().
 * @failure Cannot fail.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_last_error_status(void);

/**
 * Forget the calling thread's last error: status TF_OK, strings "", code 0.
 * Strings returned earlier stay valid and now read "".
 * @threadsafety Any thread; touches only its own record.
 * @since 1.0
 */
TF_API void tf_clear_last_error(void);

/** Bytes of tf_error_info::operation and tf_error_info::call, terminator
 * included. */
#define TF_ERROR_NAME_CAPACITY 64
/** Bytes of tf_error_info::message, terminator included; longer messages
 * are truncated. */
#define TF_ERROR_MESSAGE_CAPACITY 512

/** A copy of one thread's last error (tf_last_error()). */
typedef struct tf_error_info {
    uint32_t struct_size;  /**< in: sizeof(tf_error_info), set by tf_error_info_init */
    tf_status status;      /**< out: the failing status, TF_OK if none */
    int32_t code_domain;   /**< out: enum tf_code_domain */
    int32_t code;          /**< out: the numeric code */
    char operation[TF_ERROR_NAME_CAPACITY]; /**< out: the public function */
    char call[TF_ERROR_NAME_CAPACITY];      /**< out: the failing call */
    char message[TF_ERROR_MESSAGE_CAPACITY]; /**< out: the full message */
} tf_error_info;

/**
 * Zero @p info and set its struct_size.
 * @param[out] info the struct; NULL is ignored.
 * @param[in] struct_size sizeof(tf_error_info) as the caller was compiled;
 *         exactly that many bytes are written.  Below 4 or above
 *         TF_MAX_STRUCT_SIZE, nothing is written.
 * @threadsafety Any thread; touches only @p info.
 * @since 1.0
 */
TF_API void tf_error_info_init(tf_error_info *info, size_t struct_size);

/**
 * Copy the calling thread's last error into @p out.  Callers whose code moves
 * between OS threads (Go, Julia) call it in the same foreign call as the
 * failing function (docs/threading.md).
 * @param[in,out] out initialised with tf_error_info_init(); only its first
 *                struct_size bytes are written, struct_size is kept.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out, a struct_size that
 *         does not reach past status or is above TF_MAX_STRUCT_SIZE).
 * @threadsafety Any thread; reads only its own record, never blocks.
 * @failure @p out is not written, and the record now describes this
 *         failure: the error wanted is lost.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_last_error(tf_error_info *out);

/** @} */

/* ==== Logging ============================================================== */

/**
 * @defgroup logging Logging
 *
 * Failures that have no caller to return a status to (a context that could
 * not be restored, resources leaked at teardown) are logged, one line each:
 * to stderr, or to a callback.  See docs/errors-and-logging.md.
 * @{
 */

/** Severity of a log message. */
enum tf_log_level {
    TF_LOG_WARNING = 2, /**< something was leaked or could not be restored */
    TF_LOG_ERROR = 3    /**< a failure nobody else can be told about */
};

/**
 * Receives the library's log messages.
 * @param[in] level     enum tf_log_level.
 * @param[in] message   one line, no trailing newline, valid during the call.
 * @param[in] user_data as given to tf_set_log_callback().
 *
 * Called on any thread the library runs on, concurrently, with whatever
 * context is current: put the thread's context back if you change it.  It may
 * call this library except tf_set_log_callback() (TF_ERROR_RUNTIME_STATE), and
 * must not wait for a thread that may be calling it.  A C++ exception it
 * throws loses that message only.
 */
typedef void (*tf_log_fn)(int32_t level, const char *message, void *user_data);

/**
 * Route log messages to @p fn, or back to stderr (lines prefixed
 * "tenferro-gpu: ") when @p fn is NULL.  Process-wide.  A callback that
 * ignores its arguments silences the library.
 * @param[in] fn        the callback, or NULL.
 * @param[in] user_data passed to every call of @p fn; kept, never
 *                      dereferenced or freed by the library.
 * @return TF_OK; TF_ERROR_RUNTIME_STATE (called inside a log callback).
 * @threadsafety Any thread.  Waits for calls of the previous callback running
 *         on other threads; once it returns, that callback is never called
 *         again and its user_data may be freed.
 * @failure The previous callback stays installed: keep its user_data.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_set_log_callback(tf_log_fn fn, void *user_data);

/** @} */

/* ==== Devices ============================================================== */

/**
 * @defgroup devices Devices
 *
 * What the driver reports, without creating a context.  The first call that
 * needs the driver loads libcuda.so.1 (or the absolute path in
 * TENFERRO_GPU_CUDA_DRIVER) for the rest of the process; a failed load is
 * not retried.
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

/**
 * Zero @p info and set its struct_size.
 * @param[out] info the struct; NULL is ignored.
 * @param[in] struct_size sizeof(tf_device_properties) as the caller was
 *         compiled; exactly that many bytes are written.  Below 4 or above
 *         TF_MAX_STRUCT_SIZE, nothing is written.
 * @threadsafety Any thread; touches only @p info.
 * @since 1.0
 */
TF_API void tf_device_properties_init(tf_device_properties *info, size_t struct_size);

/**
 * Whether this process can use a CUDA device: the driver loads and a runtime
 * on device 0 can be created and synchronized (on a GPU, the first call pays
 * for device 0's primary context).  Call it once and keep the answer.
 * @return 1 or 0.  Never fails and never changes the last error; what the
 *         probe's own teardown leaks is logged, as for any runtime.
 * @threadsafety Any thread; concurrent calls probe independently.  Blocks
 *         like tf_runtime_new(), tf_runtime_sync() and tf_runtime_release().
 * @since 1.0
 */
TF_API int32_t tf_gpu_available(void);

/**
 * Number of CUDA devices.  Creates no context.
 * @param[out] out_count the count; 0 with TF_OK when the driver reports none.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_DRIVER_NOT_FOUND;
 *         TF_ERROR_DRIVER_STUB; TF_ERROR_DRIVER_TOO_OLD;
 *         TF_ERROR_NOT_SUPPORTED (a missing entry point); TF_ERROR_CUDA
 *         (cuInit, cuDeviceGetCount); TF_ERROR_RUNTIME_STATE (forked while
 *         another thread loaded the driver).
 * @threadsafety Any thread; only a first use blocks (the driver's load).
 * @failure Nothing to undo.  A failed load is final for the process: every
 *         later call gets the same status.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_device_count(int32_t *out_count);

/**
 * Describe one device.  Creates no context.
 * @param[in] ordinal 0 .. tf_device_count() - 1.
 * @param[in,out] out initialised with tf_device_properties_init(); nothing
 *                past its struct_size is written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, a struct_size too small or
 *         above TF_MAX_STRUCT_SIZE, a negative ordinal);
 *         TF_ERROR_DEVICE_UNAVAILABLE (no such ordinal; the message lists the
 *         devices); TF_ERROR_NO_DEVICE; TF_ERROR_CUDA; and the driver-loading
 *         statuses of tf_device_count().
 * @threadsafety As tf_device_count().
 * @failure @p out is untouched: every field is read before any is written.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_device_info(int32_t ordinal, tf_device_properties *out);

/** @} */

/* ==== Runtime ============================================================== */

/**
 * @defgroup runtime Runtime
 *
 * A runtime retains one device's primary context and owns a fixed number of
 * stream slots.  Threads are numbered in the order they first use a slot;
 * a thread uses slot (number modulo slot count) of every runtime.  A slot's
 * stream is non-blocking, created at its first use and never replaced while
 * the runtime lives.
 *
 * Handles are reference-counted; handles, events and modules all keep the
 * runtime alive.  Every call refuses a NULL handle with
 * TF_ERROR_INVALID_ARGUMENT and a released one with TF_ERROR_INVALID_HANDLE
 * (usually).  Calls that touch the device also refuse in a process forked
 * from the runtime's creator (TF_ERROR_RUNTIME_STATE) and after a sticky
 * fault (TF_ERROR_DEVICE_FAULT).  See docs/threading.md and
 * docs/teardown.md.
 * @{
 */

/** Opaque, reference-counted runtime handle. */
typedef struct tf_runtime tf_runtime;

/** Default tf_runtime_options::stream_slots. */
#define TF_DEFAULT_STREAM_SLOTS 8
/** Largest tf_runtime_options::stream_slots. */
#define TF_MAX_STREAM_SLOTS 256
/** Default tf_runtime_options::cublas_workspace_bytes: 32 MiB, what cuBLAS
 * recommends for Hopper. */
#define TF_DEFAULT_CUBLAS_WORKSPACE_BYTES ((uint64_t)32 << 20)
/** Default tf_runtime_options::retirement_capacity. */
#define TF_DEFAULT_RETIREMENT_CAPACITY 1024
/** Largest tf_runtime_options::retirement_capacity. */
#define TF_MAX_RETIREMENT_CAPACITY 1048576
/** Default tf_runtime_options::download_threads (0 selects it). */
#define TF_DEFAULT_DOWNLOAD_THREADS 12
/** Largest tf_runtime_options::download_threads. */
#define TF_MAX_DOWNLOAD_THREADS 64
/** Default tf_runtime_options::download_chunk_bytes (0 selects it). */
#define TF_DEFAULT_DOWNLOAD_CHUNK_BYTES ((uint32_t)8 << 20)
/** Smallest tf_runtime_options::download_chunk_bytes. */
#define TF_MIN_DOWNLOAD_CHUNK_BYTES ((uint32_t)64 << 10)
/** Largest tf_runtime_options::download_chunk_bytes. */
#define TF_MAX_DOWNLOAD_CHUNK_BYTES ((uint32_t)256 << 20)
/** Default tf_runtime_options::memory_release_threshold (0 selects it):
 * UINT64_MAX, the device's pool keeps all unused memory. */
#define TF_DEFAULT_MEMORY_RELEASE_THRESHOLD ((uint64_t)-1)
/** Smallest nonzero tf_runtime_options::memory_reserved_limit: 32 MiB, the
 * chunk a driver's memory pool reserves at a time (H200, driver 580): the
 * first chunk would exceed a smaller limit. */
#define TF_MIN_MEMORY_RESERVED_LIMIT ((uint64_t)32 << 20)

/** Options of tf_runtime_new_with_options(). */
typedef struct tf_runtime_options {
    uint32_t struct_size;   /**< set by tf_runtime_options_init */
    /** Stream slots, 1 .. TF_MAX_STREAM_SLOTS (default
     * TF_DEFAULT_STREAM_SLOTS). */
    uint32_t stream_slots;
    /** Device memory given to each slot's cuBLAS handle as its workspace,
     * allocated with the handle; 0 runs cuBLAS without one (default
     * TF_DEFAULT_CUBLAS_WORKSPACE_BYTES). */
    uint64_t cublas_workspace_bytes;
    /** Workspace retirements kept in flight before tf_workspace_retire()
     * waits for its stream instead, 1 .. TF_MAX_RETIREMENT_CAPACITY
     * (default TF_DEFAULT_RETIREMENT_CAPACITY). */
    uint32_t retirement_capacity;
    /** Reserved; must be 0. */
    uint32_t flags;
    /** Host threads that copy a download into pageable memory, the caller
     * included, 1 .. TF_MAX_DOWNLOAD_THREADS; 0 (default) selects
     * TF_DEFAULT_DOWNLOAD_THREADS, or the CPUs the process may run on if
     * fewer.  Started at the runtime's first such download. */
    uint32_t download_threads;
    /** Bytes of each page-locked staging buffer of a slot (three per slot,
     * allocated at its first staged transfer: tf_download() into pageable
     * memory above 64 KiB, tf_upload() from it above 256 KiB): a multiple
     * of 4096 in TF_MIN_DOWNLOAD_CHUNK_BYTES .. TF_MAX_DOWNLOAD_CHUNK_BYTES;
     * 0 (default) selects TF_DEFAULT_DOWNLOAD_CHUNK_BYTES. */
    uint32_t download_chunk_bytes;
    /** Unused device memory, in bytes, the device's pool keeps when a
     * synchronizing call (of a stream, event or context) finds it holding
     * more; 0 (default) selects TF_DEFAULT_MEMORY_RELEASE_THRESHOLD, which
     * keeps all until tf_memory_trim() or an out-of-memory retry; 1 keeps
     * none.  The pool is the device's (see @ref memory): a nonzero value
     * must equal that of the pool already made for the device.  Since 1.2. */
    uint64_t memory_release_threshold;
    /** Most device memory, in bytes, the device's pool may hold from the
     * driver (reserved, which the driver does in chunks: 32 MiB on an
     * H200; limits of whole chunks held exactly there); an allocation that needs more is retried after the
     * pool gives its cached memory back, then fails with
     * TF_ERROR_OUT_OF_MEMORY.  0 (default): no limit; otherwise at least
     * TF_MIN_MEMORY_RESERVED_LIMIT.  Needs a driver of CUDA 12.2 or later.
     * Nonzero must equal the existing pool's, as above.  Since 1.2. */
    uint64_t memory_reserved_limit;
} tf_runtime_options;

/**
 * Set @p options to the defaults and its struct_size.
 * @param[out] options the struct; NULL is ignored.
 * @param[in] struct_size sizeof(tf_runtime_options) as the caller was
 *         compiled; exactly that many bytes are written (defaults, zero past
 *         the fields this library knows).  Below 4 or above
 *         TF_MAX_STRUCT_SIZE, nothing is written.
 * @threadsafety Any thread; touches only @p options.
 * @since 1.0
 */
TF_API void tf_runtime_options_init(tf_runtime_options *options, size_t struct_size);

/**
 * Create a runtime on device @p ordinal with the default options:
 * tf_runtime_new_with_options(ordinal, NULL, out).
 * @param[in] ordinal device ordinal.
 * @param[out] out    the new handle, with one reference.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_DEVICE_UNAVAILABLE;
 *         TF_ERROR_NO_DEVICE; TF_ERROR_DRIVER_NOT_FOUND; TF_ERROR_DRIVER_STUB;
 *         TF_ERROR_DRIVER_TOO_OLD; TF_ERROR_OUT_OF_MEMORY; the device statuses.
 * @threadsafety As tf_runtime_new_with_options().
 * @failure As tf_runtime_new_with_options().
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_new(int32_t ordinal, tf_runtime **out);

/**
 * Create a runtime on device @p ordinal: load the driver, retain the device's
 * primary context, read its description.  Streams, handles and memory come at
 * first use.
 * @param[in] ordinal device ordinal.
 * @param[in] options NULL for the defaults, or from tf_runtime_options_init();
 *                    a longer struct is accepted if its unknown tail is zero.
 * @param[out] out    the new handle, with one reference: tf_runtime_release().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (also an option out of range, or
 *         a memory option other than that of the device's pool, made by a
 *         runtime still alive: the message names both);
 *         TF_ERROR_DEVICE_UNAVAILABLE; TF_ERROR_NO_DEVICE;
 *         TF_ERROR_DRIVER_NOT_FOUND; TF_ERROR_DRIVER_STUB;
 *         TF_ERROR_DRIVER_TOO_OLD; TF_ERROR_OUT_OF_MEMORY; the device statuses
 *         (TF_ERROR_NOT_SUPPORTED: memory_reserved_limit before CUDA 12.2).
 * @threadsafety Any thread; runtimes are independent (those of one device
 *         share its primary context).  Only a first use blocks.
 * @failure Nothing to undo.  A failed driver load is final.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_new_with_options(int32_t ordinal,
                                                          const tf_runtime_options *options,
                                                          tf_runtime **out);

/**
 * Add a reference to @p rt: the same pointer then needs one more
 * tf_runtime_release().  Works in a forked child and after a fault.
 * @param[in] rt a handle the caller holds a reference to.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL); TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; never blocks.
 * @failure No reference was added: do not release one for this call.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_retain(tf_runtime *rt);

/**
 * Drop a reference to @p rt; NULL is a no-op.  The runtime's last reference
 * (handles, events, modules) tears it down on this thread: streams
 * synchronized, pending workspace releases run, slot resources freed, the
 * primary context released; a capture still open on a slot is dropped
 * (logged).  A stream that fails to synchronize leaks all of
 * it (logged); after a fault, at exit or in a forked child it leaks quietly.
 * tf_host_alloc() blocks not yet freed stay mapped and keep the primary
 * context retained until each is freed with tf_host_free(NULL, ptr)
 * (logged).  See docs/teardown.md.
 * @param[in] rt the reference, or NULL.  Never drop the last one inside a
 *               callback of this runtime, except a workspace release.
 * @return TF_OK; TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety Any thread, not while another uses this reference.  The last
 *         release blocks until the device has finished the runtime's work.
 * @failure Nothing was released.
 * @since 1.0
 */
TF_API tf_status tf_runtime_release(tf_runtime *rt);

/**
 * A new handle on the runtime whose calls use slot @p slot from any thread:
 * a stable stream for code that moves between OS threads (goroutines, Julia
 * tasks).  It shares identity and state with @p rt and keeps the runtime
 * alive; binding a bound handle rebinds it.
 * @param[in] rt   any handle of the runtime.
 * @param[in] slot 0 .. slot count - 1.
 * @param[out] out the bound handle, with one reference: tf_runtime_release().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_OUT_OF_MEMORY.
 * @threadsafety Any thread; never blocks.
 * @failure No handle was made.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_bind_slot(tf_runtime *rt, int32_t slot,
                                                   tf_runtime **out);

/**
 * Identity of the runtime: fresh per creation in this process, equal for
 * every handle retained or bound from it.  A cache key; it grants nothing.
 * @param[in] rt   the runtime.
 * @param[out] out its identity, never 0.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; never blocks.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_identity(const tf_runtime *rt, uint64_t *out);

/**
 * Allocation domain of the runtime: device memory made through one runtime
 * belongs to its domain.  Fresh per creation, equal across retained and
 * bound handles, never equal to any identity.
 * @param[in] rt   the runtime.
 * @param[out] out its allocation domain, never 0.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; never blocks.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_allocation_domain(const tf_runtime *rt,
                                                           uint64_t *out);

/**
 * The runtime's device, as read at creation (no driver call).
 * @param[in] rt      the runtime.
 * @param[in,out] out initialised with tf_device_properties_init(); nothing
 *                    past its struct_size is written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, a struct_size too small or
 *         above TF_MAX_STRUCT_SIZE); TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; never blocks.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_device_info(const tf_runtime *rt,
                                                     tf_device_properties *out);

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
    /** Always 0: it depends on the pair of devices; ask
     * tf_peer_copy_available(). */
    TF_CAP_PEER_COPY = 5,
    /** cuBLAS can be loaded. */
    TF_CAP_CUBLAS = 6,
    /** Stream-ordered, cached allocation from the library's memory pool of
     * the device (@ref memory); 0: uncached cuMemAlloc. */
    TF_CAP_STREAM_ORDERED_ALLOC = 7
};

/**
 * Whether the runtime supports @p capability.  Asking for TF_CAP_CUBLAS or
 * TF_CAP_RUNTIME_COMPILATION loads that library, as its first use would.
 * @param[in] rt         the runtime.
 * @param[in] capability enum tf_capability; an unknown value is answered 0.
 * @param[out] out_supported 1 or 0; a probe that fails answers 0 with TF_OK
 *                       (and is asked again next time).
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; only a first use blocks (a library's load).
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_supports(const tf_runtime *rt, int32_t capability,
                                                  int32_t *out_supported);

/**
 * The device's primary context (a CUcontext) the runtime retains.  Prefer
 * tf_with_context() to making it current yourself.
 * @param[in] rt           the runtime.
 * @param[out] out_context borrowed until the runtime's last release; never
 *                         release, destroy or pop it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; never blocks.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_primary_context(const tf_runtime *rt,
                                                         void **out_context);

/**
 * Number of stream slots, fixed at creation.
 * @param[in] rt         the runtime.
 * @param[out] out_count the slot count.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; never blocks.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_slot_count(const tf_runtime *rt, int32_t *out_count);

/**
 * The slot the calling thread's calls through @p rt use: the bound slot of a
 * bound handle, else fixed per thread (code that moves to another thread
 * gets that thread's slot).
 * @param[in] rt        the runtime.
 * @param[out] out_slot 0 .. slot count - 1.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; never blocks.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_current_slot(const tf_runtime *rt, int32_t *out_slot);

/**
 * The calling thread's slot stream (a CUstream).  Work the caller queues on
 * it is ordered with the library's work on that slot.
 * @param[in] rt          the runtime.
 * @param[out] out_stream borrowed until the runtime's last release; never
 *                        destroy it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses.
 * @threadsafety Any thread; only a first use blocks (the stream's creation).
 * @failure Nothing to undo; a stream that could not be created is tried
 *         again by the next call.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_stream(tf_runtime *rt, void **out_stream);

/**
 * As tf_runtime_stream() for slot @p slot.
 * @param[in] rt          the runtime.
 * @param[in] slot        0 .. slot count - 1.
 * @param[out] out_stream as for tf_runtime_stream().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (also a slot out of range);
 *         TF_ERROR_INVALID_HANDLE; the device statuses.
 * @threadsafety As tf_runtime_stream().
 * @failure As tf_runtime_stream().
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_slot_stream(tf_runtime *rt, int32_t slot,
                                                     void **out_stream);

/**
 * Caller code run by tf_with_context().
 * @param[in] user_data as given to tf_with_context().
 * @return 0, or nonzero for failure (the code of TF_ERROR_CALLBACK).
 */
typedef int32_t (*tf_context_fn)(void *user_data);

/**
 * Run @p fn once, on the calling thread, with the runtime's primary context
 * current; the caller's context is current again afterwards, whatever @p fn
 * did to it.  @p fn may call this library, this function included.
 * @param[in] rt        the runtime.
 * @param[in] fn        the callback.
 * @param[in] user_data passed to @p fn, never dereferenced.
 * @return TF_OK; TF_ERROR_CALLBACK (@p fn returned nonzero or threw);
 *         TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the device
 *         statuses.
 * @threadsafety Any thread; callbacks of several threads run concurrently.
 * @failure Before @p fn ran nothing happened; after it failed, what it did
 *         stands and only the context switch is undone.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_with_context(tf_runtime *rt, tf_context_fn fn,
                                              void *user_data);

/**
 * Wait for the work queued on the calling thread's slot, then run the
 * workspace releases the device has passed, on every slot.  Other slots are
 * not waited for; a slot never used returns at once.  A release may drop the
 * runtime's last reference: it is torn down as this call returns.
 * @param[in] rt the runtime; a bound handle waits for its slot.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE (also: the slot captures a graph, or a capture
 *         begun outside the library); TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (the
 *         wait, or leaked retirements as tf_workspace_poll() reports them).
 * @threadsafety Any thread; blocks only the caller, not other threads on the
 *         slot.
 * @failure The work may or may not be done.  After TF_ERROR_DEVICE_FAULT
 *         release the runtime and make a new one.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_runtime_sync(tf_runtime *rt);

/** @} */

/* ==== Work on the slot streams ============================================= */

/**
 * @defgroup stream_work Work on the slot streams
 *
 * cuBLAS, any library's work, ordering between slots, events, deferred
 * release, modules, kernels and run-time compilation.  Each call works on the
 * calling thread's slot with the runtime's primary context current.  Work on
 * one slot is ordered; order two slots with tf_slot_wait() or a tf_event.
 * Calls on an event or a module answer for its runtime's state (forked
 * child, sticky fault), except their retain and release, which work in
 * either state, as do tf_workspace_stats() and tf_program_compile().
 *
 * cuBLAS is loaded at first use from libcublas.so.13, else libcublas.so.12,
 * or the absolute path in TENFERRO_GPU_CUBLAS; cuBLASLt (1.2) likewise, on
 * its own, from libcublasLt.so.13, libcublasLt.so.12 or
 * TENFERRO_GPU_CUBLASLT; NVRTC likewise from
 * libnvrtc.so.13, libnvrtc.so.12 or TENFERRO_GPU_NVRTC.  A failed load is
 * final: every later call of the process that needs it gets the same status.
 * @{
 */

/** cuBLAS pointer modes (the values of cublasPointerMode_t). */
enum tf_cublas_pointer_mode {
    /** alpha, beta and scalar results live in host memory. */
    TF_CUBLAS_POINTER_MODE_HOST = 0,
    /** alpha, beta and scalar results live in device memory. */
    TF_CUBLAS_POINTER_MODE_DEVICE = 1
};

/**
 * Caller code run by tf_cublas_enqueue().  It must not keep the handle,
 * change its stream or workspace, or destroy it.
 * @param[in] cublas_handle the slot's cublasHandle_t, borrowed for the call.
 * @param[in] stream        the slot's CUstream, borrowed for the call.
 * @param[in] user_data     as given to tf_cublas_enqueue().
 * @return a cublasStatus_t: 0 (CUBLAS_STATUS_SUCCESS), or the failure, which
 *         becomes TF_ERROR_PROVIDER.
 */
typedef int32_t (*tf_cublas_fn)(void *cublas_handle, void *stream, void *user_data);

/**
 * Run @p fn once, on the calling thread, with the slot's cuBLAS handle and
 * stream, the primary context current and pointer mode @p pointer_mode.  The
 * slot's handle is made at its first call, with a workspace of
 * tf_runtime_options::cublas_workspace_bytes, and kept until teardown.
 * @param[in] rt           the runtime.
 * @param[in] pointer_mode enum tf_cublas_pointer_mode.
 * @param[in] fn           the callback.
 * @param[in] user_data    passed to @p fn, never dereferenced.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_LIBRARY_NOT_FOUND; TF_ERROR_PROVIDER (a cuBLAS call, or
 *         @p fn: call "callback"); TF_ERROR_CALLBACK (@p fn threw);
 *         TF_ERROR_OUT_OF_MEMORY; TF_ERROR_RUNTIME_STATE (also: inside an
 *         enqueue callback on this slot); the device statuses.
 * @threadsafety Slot-exclusive; @p fn must not wait for a thread that needs
 *         this slot.
 * @failure If @p fn did not run, nothing was enqueued or leaked; if it failed,
 *         what it enqueued stays queued.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_cublas_enqueue(tf_runtime *rt, int32_t pointer_mode,
                                                tf_cublas_fn fn, void *user_data);

/**
 * A function of the cuBLAS this library loaded, by name ("cublasSgemm_v2",
 * "cublasLtMatmul"), so a binding needs no cuBLAS of its own.
 * @param[in] name          the symbol, NUL-terminated, starting "cublas".
 * @param[out] out_function its address, valid until the process exits.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_LIBRARY_NOT_FOUND;
 *         TF_ERROR_NOT_SUPPORTED (no such symbol, or a cuBLAS lacking what
 *         this library needs); TF_ERROR_RUNTIME_STATE (forked while another
 *         thread loaded cuBLAS).
 * @threadsafety Any thread; only a first use blocks.
 * @failure Nothing to undo.  A failed cuBLAS load is final.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_cublas_symbol(const char *name, void **out_function);

/**
 * Version of the loaded cuBLAS, encoded as CUBLAS_VERSION (130100 is 13.1.0).
 * @param[out] out_version the version.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_LIBRARY_NOT_FOUND;
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_PROVIDER (cublasGetProperty);
 *         TF_ERROR_RUNTIME_STATE (as for tf_cublas_symbol()).
 * @threadsafety As tf_cublas_symbol().
 * @failure As tf_cublas_symbol().
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_cublas_version(int32_t *out_version);

/**
 * Caller code run by tf_cublaslt_enqueue().  It must queue its work only on
 * @p stream, and must not keep the handle or the workspace, or destroy the
 * handle.  Descriptors, layouts, preferences and heuristic results it made
 * on an earlier call (a plan) may be reused with the same handle: that is
 * what makes this path cheaper than cublasSgemm for small matrices.
 * @param[in] lt_handle       the slot's cublasLtHandle_t, borrowed for the
 *                            call; the same one at every call on the slot.
 * @param[in] stream          the slot's CUstream, borrowed for the call.
 * @param[in] workspace       device address of the slot's workspace (a
 *                            cublasLtMatmul workspace), 0 when
 *                            @p workspace_bytes is 0.
 * @param[in] workspace_bytes its size: tf_runtime_options::cublas_workspace_bytes.
 * @param[in] user_data       as given to tf_cublaslt_enqueue().
 * @return a cublasStatus_t: 0 (CUBLAS_STATUS_SUCCESS), or the failure, which
 *         becomes TF_ERROR_PROVIDER.
 * @since 1.2
 */
typedef int32_t (*tf_cublaslt_fn)(void *lt_handle, void *stream, uint64_t workspace,
                                  uint64_t workspace_bytes, void *user_data);

/**
 * Run @p fn once, on the calling thread, with the slot's cuBLASLt handle,
 * stream and workspace, the primary context current.  The slot's handle is
 * made at its first call and kept until teardown (cuBLASLt may answer every
 * slot's cublasLtCreate with one pointer, as 13.1 does on an H200: a handle
 * carries no stream, so that is safe).  The workspace is the one
 * the slot's cuBLAS handle uses (allocated by whichever of the two is made
 * first, of tf_runtime_options::cublas_workspace_bytes): everything using
 * it runs on the slot's stream, in order, so sharing it is safe.  Inside a
 * graph capture (1.2) what @p fn queues is captured, as for
 * tf_cublas_enqueue().  Prefer it for small GEMMs, whose cost is the host's
 * time per call: with a plan cached by the caller, a float32 matmul cost
 * 8-16% less host time than cublasSgemm through tf_cublas_enqueue() at
 * n = 64 and 37% less at 256 on an H200
 * (docs/gpu-runs/2026-12-01-gemm-explore.md; bench_cublaslt measures it).
 * @param[in] rt        the runtime.
 * @param[in] fn        the callback.
 * @param[in] user_data passed to @p fn, never dereferenced.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_LIBRARY_NOT_FOUND (no cuBLASLt); TF_ERROR_NOT_SUPPORTED
 *         (a cuBLASLt without cublasLtCreate or cublasLtDestroy);
 *         TF_ERROR_PROVIDER (cublasLtCreate, or @p fn: call "callback",
 *         code domain TF_CODE_CUBLAS); TF_ERROR_CALLBACK (@p fn threw a C++
 *         exception; thread cancellation unwinds through);
 *         TF_ERROR_OUT_OF_MEMORY (also: the workspace); TF_ERROR_RUNTIME_STATE
 *         (also: inside an enqueue callback on this slot; forked while
 *         another thread loaded cuBLASLt); the device statuses.
 * @threadsafety Slot-exclusive; @p fn must not wait for a thread that needs
 *         this slot.
 * @failure If @p fn did not run, nothing was enqueued or leaked; if it failed,
 *         what it enqueued stays queued.  A failed cuBLASLt load is final.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_cublaslt_enqueue(tf_runtime *rt, tf_cublaslt_fn fn,
                                                  void *user_data);

/**
 * A function of the cuBLASLt this library loaded, by name
 * ("cublasLtMatmul"): the handles tf_cublaslt_enqueue() hands out belong to
 * that instance, so use its functions with them.
 * @param[in] name          the symbol, NUL-terminated, starting "cublasLt".
 * @param[out] out_function its address, valid until the process exits.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_LIBRARY_NOT_FOUND;
 *         TF_ERROR_NOT_SUPPORTED (no such symbol, or a cuBLASLt lacking what
 *         this library needs); TF_ERROR_RUNTIME_STATE (forked while another
 *         thread loaded cuBLASLt).
 * @threadsafety Any thread; only a first use blocks.
 * @failure Nothing to undo.  A failed cuBLASLt load is final.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_cublaslt_symbol(const char *name, void **out_function);

/**
 * Caller code run by tf_stream_enqueue().
 * @param[in] stream    the slot's CUstream, borrowed: never destroy it.
 * @param[in] user_data as given to tf_stream_enqueue().
 * @return 0, or nonzero for failure (the code of TF_ERROR_CALLBACK).
 */
typedef int32_t (*tf_stream_fn)(void *stream, void *user_data);

/**
 * Run @p fn once, on the calling thread, with the slot's stream and the
 * primary context current: enqueue any library's work (NCCL, cuFFT, your own
 * driver calls) without interleaving with other threads on the slot.
 * @param[in] rt        the runtime.
 * @param[in] fn        the callback.
 * @param[in] user_data passed to @p fn, never dereferenced.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_CALLBACK (@p fn returned nonzero or threw);
 *         TF_ERROR_RUNTIME_STATE (also: inside an enqueue callback on this
 *         slot); the device statuses.
 * @threadsafety Slot-exclusive; @p fn must not wait for a thread that needs
 *         this slot.
 * @failure If @p fn did not run, nothing was enqueued; if it failed, what it
 *         enqueued stays queued.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_stream_enqueue(tf_runtime *rt, tf_stream_fn fn,
                                                void *user_data);

/**
 * Make the calling thread's slot wait, on the device, for the work queued on
 * slot @p other_slot before this call; the host does not wait.  Nothing
 * happens when @p other_slot is the caller's or was never used.  Captured
 * (1.2): each launch of the graph waits for the work queued on @p other_slot
 * before the launch.
 * @param[in] rt         the runtime.
 * @param[in] other_slot 0 .. slot count - 1.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (also a slot out of range);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE (also: both slots
 *         capture a graph); the device statuses.
 * @threadsafety Any thread, also inside enqueue callbacks; only a first use
 *         blocks.
 * @failure No wait was queued: call again.  Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_slot_wait(tf_runtime *rt, int32_t other_slot);

/**
 * Opaque, reference-counted CUDA event of one runtime, for explicit
 * ordering: record it on one slot, wait for it on others or on the host.  A
 * wait uses the latest record made before it.  It keeps its runtime alive.
 */
typedef struct tf_event tf_event;

/**
 * Create an event (no timing) in the runtime's primary context.  Until its
 * first record, waits for it return at once.
 * @param[in] rt   the runtime; the event keeps it alive.
 * @param[out] out the event, with one reference: tf_event_release().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_OUT_OF_MEMORY; the device statuses.
 * @threadsafety Any thread; never blocks.
 * @failure No event was made.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_event_new(tf_runtime *rt, tf_event **out);

/**
 * Add a reference to @p event: the same pointer then needs one more
 * tf_event_release().
 * @param[in] event an event the caller holds a reference to.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not an event);
 *         TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety Any thread; never blocks.
 * @failure No reference was added.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_event_retain(tf_event *event);

/**
 * Drop a reference to @p event; NULL is a no-op.  The last destroys the event
 * (a failure is logged; after a fault or in a forked child it leaks quietly)
 * and drops its runtime reference, which may tear the runtime down as
 * tf_runtime_release() does.  Passing the event afterwards is refused as
 * for a released runtime handle (TF_ERROR_INVALID_HANDLE, usually).
 * @param[in] event the reference to drop, or NULL.
 * @return TF_OK (also when the destroy failed); TF_ERROR_INVALID_ARGUMENT
 *         (not an event); TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety Any thread, but not while another thread uses this
 *         reference.  Blocks only when it tears the runtime down.
 * @failure Nothing was released.
 * @since 1.0
 */
TF_API tf_status tf_event_release(tf_event *event);

/**
 * Record @p event on the calling thread's slot of @p rt: it completes when
 * the work queued there before this call is done.  Captured (1.2): an event
 * record node; each launch records the event, the capture holds it.
 * @param[in] rt    a runtime on the event's device.
 * @param[in] event the event; recorded, not retained.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (also an event of another
 *         device); TF_ERROR_INVALID_HANDLE; the device statuses.
 * @threadsafety Any thread, also inside enqueue callbacks; only a first use
 *         blocks.  Concurrent records are fine: waits use the latest.
 * @failure The event keeps its earlier record, if any.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_event_record(tf_runtime *rt, tf_event *event);

/**
 * Make the calling thread's slot of @p rt wait, on the device, for the latest
 * record of @p event (of any runtime, on any device); the host does not wait.
 * Captured (1.2): an event wait node; each launch waits for the latest record
 * made before the launch, the capture holds the event.
 * @param[in] rt    the runtime whose slot waits.
 * @param[in] event the event.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses.
 * @threadsafety As tf_event_record().
 * @failure No wait was queued: later work on the slot is not ordered after
 *         the event.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_event_wait(tf_runtime *rt, tf_event *event);

/**
 * Block until the latest record of @p event is done (at once if never
 * recorded).
 * @param[in] event the event.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE (a
 *         released event); TF_ERROR_RUNTIME_STATE (also: its latest record
 *         went into a capture still open); the device statuses (a
 *         TF_ERROR_DEVICE_FAULT marks the event's runtime).
 * @threadsafety Any thread.  Blocks only the calling thread; others may
 *         record this event meanwhile.
 * @failure The work may or may not be done.  After TF_ERROR_DEVICE_FAULT
 *         release the event's runtime.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_event_synchronize(tf_event *event);

/**
 * Whether the latest record of @p event is done, without waiting.
 * @param[in] event     the event.
 * @param[out] out_done 1 when done (or never recorded), 0 when not yet.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE (a
 *         released event); TF_ERROR_RUNTIME_STATE (also: as for
 *         tf_event_synchronize()); the device statuses.
 * @threadsafety Any thread; never blocks.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_event_query(tf_event *event, int32_t *out_done);

/**
 * Releases a retired resource (tf_workspace_retire()), once the device has
 * passed the point of its retirement.  Runs on the thread of the call that
 * found it passed (tf_workspace_retire(), tf_workspace_poll(),
 * tf_runtime_sync(), teardown), with the primary context current and
 * concurrently with releases on other threads; it may free device memory and
 * call this library (not the runtime being torn down).  Its own failures do
 * not reach any caller's last error; a C++ exception it throws is logged.
 * Ending its thread (pthread_exit, cancellation) leaks the releases that call
 * had found but not started.
 * @param[in] resource  as given to tf_workspace_retire().
 * @param[in] user_data as given to tf_workspace_retire().
 */
typedef void (*tf_release_fn)(void *resource, void *user_data);

/**
 * Release @p resource once the device has finished the work queued on the
 * calling thread's slot before this call, without waiting; a slot's releases
 * run in retirement order.  Past tf_runtime_options::retirement_capacity in
 * flight, or if the point cannot be marked, it waits for the slot instead.
 * @param[in] rt        the runtime.
 * @param[in] resource  for @p release; may be NULL, never dereferenced.
 * @param[in] release   runs once, or never if the resource leaks.
 * @param[in] user_data for @p release; it and @p resource live until then.
 * @return TF_OK (queued, or released after waiting); TF_ERROR_INVALID_ARGUMENT;
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY;
 *         TF_ERROR_RUNTIME_STATE (also: the slot captures a graph); the device
 *         statuses.
 * @threadsafety Any thread, also inside enqueue callbacks; blocks only when it
 *         waits instead.
 * @failure After TF_ERROR_INVALID_ARGUMENT or TF_ERROR_INVALID_HANDLE the
 *         resource is the caller's; after any other status @p release never
 *         runs and the device may still use it: leak it.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_workspace_retire(tf_runtime *rt, void *resource,
                                                  tf_release_fn release, void *user_data);

/**
 * Run the releases of every retirement the device has passed, on all slots,
 * without waiting (a retirement whose completion cannot be queried waits for
 * its stream).
 * @param[in] rt the runtime.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE (also: the calling thread's slot captures a
 *         graph); the device statuses (TF_ERROR_CUDA, call "cuStreamSynchronize", reports
 *         once the retirements that leaked, here or in an earlier
 *         tf_workspace_retire(): the message counts them and names the first).
 * @threadsafety Any thread, also inside enqueue callbacks.
 * @failure Releases found passed have run, the rest stay queued.  A reported
 *         leak is final: never free or reuse that resource.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_workspace_poll(tf_runtime *rt);

/**
 * Counters of a runtime's workspace retirements.  A retirement is counted in
 * deferred when queued, or in barrier_fallbacks once the wait that replaced
 * queueing returned; each is then in exactly one of released, leaked and
 * in_flight, so every snapshot satisfies
 *     deferred + barrier_fallbacks == released + leaked + in_flight.
 */
typedef struct tf_retirement_stats {
    uint32_t struct_size;   /**< in: set by tf_retirement_stats_init */
    uint32_t capacity;      /**< out: the bound (retirement_capacity) */
    uint64_t deferred;      /**< out: retirements queued */
    uint64_t released;      /**< out: releases started or about to start */
    uint64_t barrier_fallbacks; /**< out: retirements that waited for their
                                 * stream instead of queueing */
    uint64_t leaked;        /**< out: resources never to be released: the
                             * device's progress could not be proven, or the
                             * thread that found them ended first */
    uint64_t in_flight;     /**< out: queued, neither released nor leaked */
    uint64_t max_in_flight; /**< out: the most ever in flight at once */
} tf_retirement_stats;

/**
 * Zero @p stats and set its struct_size.
 * @param[out] stats the struct; NULL is ignored.
 * @param[in] struct_size sizeof(tf_retirement_stats) as the caller was
 *         compiled; exactly that many bytes are written.  Below 4 or above
 *         TF_MAX_STRUCT_SIZE, nothing is written.
 * @threadsafety Any thread; touches only @p stats.
 * @since 1.0
 */
TF_API void tf_retirement_stats_init(tf_retirement_stats *stats, size_t struct_size);

/**
 * A consistent snapshot of the runtime's retirement counters (no driver
 * call); works after a fault and in a forked child.
 * @param[in] rt      the runtime.
 * @param[in,out] out from tf_retirement_stats_init(); nothing past its
 *                    struct_size is written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE (a forked child whose parent was updating the
 *         counters at the fork).
 * @threadsafety Any thread; waits only for brief counter updates.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_workspace_stats(const tf_runtime *rt,
                                                 tf_retirement_stats *out);

/** Opaque, reference-counted loaded module (a CUmodule); it keeps its
 * runtime alive. */
typedef struct tf_module tf_module;

/**
 * Load PTX (JIT-compiled during the call), a CUBIN or a fatbin into the
 * runtime's primary context.
 * @param[in] rt    the runtime; the module keeps it alive.
 * @param[in] image the image, read during the call; PTX need not end in NUL.
 * @param[in] size  bytes of @p image, at least 1.
 * @param[out] out  the module, with one reference: tf_module_release().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_OUT_OF_MEMORY; the device statuses (TF_ERROR_CUDA: an image
 *         the driver refuses; the message starts its JIT log).
 * @threadsafety Any thread; never waits for other threads.
 * @failure Nothing was loaded.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_module_load(tf_runtime *rt, const void *image, size_t size,
                                             tf_module **out);

/**
 * Add a reference to @p module: the same pointer then needs one more
 * tf_module_release().
 * @param[in] module a module the caller holds a reference to.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not a module);
 *         TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety Any thread; never blocks.
 * @failure No reference was added.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_module_retain(tf_module *module);

/**
 * Drop a reference to @p module; NULL is a no-op.  The last unloads it (a
 * failure is logged; after a fault or in a forked child it leaks quietly),
 * invalidating its functions, and drops its runtime reference, which may
 * tear the runtime down as tf_runtime_release() does.
 * @param[in] module the reference to drop, or NULL.
 * @return TF_OK (also when the unload failed); TF_ERROR_INVALID_ARGUMENT
 *         (not a module); TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety Any thread, but not while another thread uses this
 *         reference or, for the last one, launches the module's functions.
 *         Blocks only when it tears the runtime down.
 * @failure Nothing was released.
 * @since 1.0
 */
TF_API tf_status tf_module_release(tf_module *module);

/**
 * A kernel of @p module by its name in the image: plain for extern "C",
 * mangled for C++.
 * @param[in] module        the module.
 * @param[in] name          the kernel's name, NUL-terminated.
 * @param[out] out_function a CUfunction, valid until the module's last
 *                          release.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE (a
 *         released module); the device statuses (TF_ERROR_CUDA with
 *         CUDA_ERROR_NOT_FOUND: no such kernel).
 * @threadsafety Any thread; never waits for other threads.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_module_function(tf_module *module, const char *name,
                                                 void **out_function);

/**
 * Set an attribute of a kernel (cuFuncSetAttribute, e.g.
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 before launching with
 * more than 48 KiB of dynamic shared memory).
 * @param[in] module    the module @p function belongs to (not checked).
 * @param[in] function  from tf_module_function().
 * @param[in] attribute a CUfunction_attribute; the driver checks it.
 * @param[in] value     its new value; the driver checks it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE (a
 *         released module); the device statuses.
 * @threadsafety Any thread; not ordered with launches on other threads: set
 *         attributes before sharing @p function.
 * @failure The attribute may or may not have changed: set it again.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_function_set_attribute(tf_module *module, void *function,
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

/**
 * Set @p config to one block of one thread and its struct_size.
 * @param[out] config the struct; NULL is ignored.
 * @param[in] struct_size sizeof(tf_launch_config) as the caller was compiled;
 *         exactly that many bytes are written.  Below 4 or above
 *         TF_MAX_STRUCT_SIZE, nothing is written.
 * @threadsafety Any thread; touches only @p config.
 * @since 1.0
 */
TF_API void tf_launch_config_init(tf_launch_config *config, size_t struct_size);

/**
 * Launch @p function on the calling thread's slot.  Returns once queued; the
 * kernel's faults surface in later calls (TF_ERROR_DEVICE_FAULT).
 * @param[in] rt       the runtime.
 * @param[in] function from tf_module_function(), of a loaded module of this
 *                     runtime's device.
 * @param[in] config   from tf_launch_config_init(); every dimension >= 1.
 * @param[in] args     pointers to the kernel's parameters (cuLaunchKernel's
 *                     kernelParams); NULL for none.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses (TF_ERROR_CUDA: what cuLaunchKernel refuses).
 * @threadsafety Any thread, also inside enqueue callbacks; only a first use
 *         blocks.
 * @failure Nothing was queued.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_kernel_launch(tf_runtime *rt, void *function,
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
    /** Architecture as 10 * major + minor (90 for sm_90); 0 (default) for
     * the runtime's device.  Ignored when options names -arch or
     * --gpu-architecture. */
    int32_t arch;
    int32_t option_count;   /**< entries of options (default 0) */
    /** NVRTC options ("-std=c++17", "-I/path"), read during the call; NULL
     * when option_count is 0. */
    const char *const *options;
    /** Program name in the log; NULL for "tenferro_program.cu". */
    const char *name;
} tf_compile_options;

/**
 * Set @p options to the defaults and its struct_size.
 * @param[out] options the struct; NULL is ignored.
 * @param[in] struct_size sizeof(tf_compile_options) as the caller was
 *         compiled; exactly that many bytes are written.  Below 4 or above
 *         TF_MAX_STRUCT_SIZE, nothing is written.
 * @threadsafety Any thread; touches only @p options.
 * @since 1.0
 */
TF_API void tf_compile_options_init(tf_compile_options *options, size_t struct_size);

/** Opaque, reference-counted (since 1.1) result of tf_program_compile(): the
 * image and NVRTC's log.  It belongs to no runtime. */
typedef struct tf_program tf_program;

/**
 * Compile CUDA C++ with NVRTC for the runtime's device or options->arch, with
 * no device work.  Declare kernels extern "C" to find them by plain name.
 * @param[in] rt      the runtime whose device is the default target.
 * @param[in] source  NUL-terminated CUDA C++, read during the call.
 * @param[in] options NULL for the defaults, or from tf_compile_options_init().
 * @param[out] out    on TF_OK or TF_ERROR_COMPILE: the program (image, log).
 * @return TF_OK; TF_ERROR_COMPILE (the message starts NVRTC's log);
 *         TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_LIBRARY_NOT_FOUND; TF_ERROR_NOT_SUPPORTED; TF_ERROR_PROVIDER;
 *         TF_ERROR_OUT_OF_MEMORY; TF_ERROR_RUNTIME_STATE (forked while another
 *         thread loaded NVRTC).
 * @threadsafety Any thread; compiles run concurrently; only a first use
 *         blocks.
 * @failure On TF_ERROR_COMPILE release @p out with tf_program_release(); on
 *         other failures nothing was made.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_program_compile(tf_runtime *rt, const char *source,
                                                 const tf_compile_options *options,
                                                 tf_program **out);

/**
 * The compiled image (PTX including its NUL, or a CUBIN), for
 * tf_module_load().
 * @param[in] program    from tf_program_compile().
 * @param[out] out_image borrowed until the program's last release.
 * @param[out] out_size  its size in bytes.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, not a program, or a
 *         program that did not compile); TF_ERROR_INVALID_HANDLE (already
 *         released).
 * @threadsafety Any thread; never blocks.  Not while another thread
 *         releases @p program.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_program_image(const tf_program *program,
                                               const void **out_image, size_t *out_size);

/**
 * NVRTC's log ("" when NVRTC wrote none).
 * @param[in] program  from tf_program_compile().
 * @param[out] out_log NUL-terminated, borrowed until the program's last release.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not a program);
 *         TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety As tf_program_image().
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_program_log(const tf_program *program, const char **out_log);

/**
 * Drop a reference to @p program, as tf_program_release_checked() does,
 * without its status (a refusal still records the thread's last error).
 * NULL is a no-op.  Programs have one reference from tf_program_compile()
 * and one more per tf_program_retain() (1.1); the last release frees the
 * image and the log.
 * @param[in] program from tf_program_compile(), or NULL.
 * @threadsafety Any thread, once no other thread uses this reference, or,
 *         for the last one, the image or the log.  Never blocks.
 * @since 1.0
 */
TF_API void tf_program_release(tf_program *program);

/**
 * Add a reference to @p program: the same pointer then needs one more
 * release, and its image and log stay until the last.
 * @param[in] program a program the caller holds a reference to.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not a program);
 *         TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety Any thread; never blocks.
 * @failure No reference was added: do not release one for this call.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_program_retain(tf_program *program);

/**
 * Drop a reference to @p program; NULL is a no-op.  The last frees its
 * image and log; passing the program afterwards is refused as for a
 * released runtime handle (TF_ERROR_INVALID_HANDLE, usually).
 * @param[in] program the reference to drop, or NULL.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (not a program);
 *         TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety Any thread, once no other thread uses this reference, or,
 *         for the last one, the image or the log.  Never blocks.
 * @failure Nothing was released.
 * @since 1.1
 */
TF_API tf_status tf_program_release_checked(tf_program *program);

/** @} */

/* ==== Device memory and transfers ========================================== */

/**
 * @defgroup transfers Device memory and transfers
 *
 * Device memory is named by its address (a CUdeviceptr as uint64_t).  Every
 * address passed in is checked before anything is queued: it must lie in a
 * live allocation of the runtime's device, with the whole range in that one
 * allocation; otherwise TF_ERROR_INVALID_ARGUMENT and nothing happened.  A
 * length of 0 checks nothing and does nothing.
 *
 * Work is queued on the calling thread's slot after what is already there;
 * other slots are not waited for (tf_runtime_sync() them, or order them).
 * Staging memory the device may still write after a failure is leaked,
 * never reused.  See docs/transfers.md.
 * @{
 */

/** Largest length tf_download_scalar() accepts: a complex double. */
#define TF_SCALAR_DOWNLOAD_MAX_BYTES 16

/**
 * Allocate device memory, in order on the calling thread's slot, from the
 * device's pool (@ref memory; TF_CAP_STREAM_ORDERED_ALLOC: usable by later
 * work on this slot, by others after tf_runtime_sync() of it; memory the
 * pool holds is handed out again without a round trip to the system), or
 * uncached with cuMemAlloc where the device has no pools (usable everywhere
 * on return).  When the pool cannot grow (device memory exhausted, or
 * memory_reserved_limit reached), it gives its cached memory back and the
 * allocation is tried once more.  Aligned as cuMemAlloc, not zeroed.
 * While the slot captures a graph (1.2) the allocation is captured: an
 * allocation node of the graph (cuMemAllocFromPoolAsync on the capturing
 * stream), whose address stays the same at every launch and is usable only
 * by work captured between it and its tf_free(), which must be captured
 * too (else the end refuses the capture); such memory is the graph's, not
 * the pool's, and tf_memory_stats() does not count it (docs/graphs.md).
 * @param[in] rt       the runtime.
 * @param[in] bytes    size; 0 gives 0 without a driver call.
 * @param[out] out_ptr the address: tf_free() it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_OUT_OF_MEMORY (device memory: the message states the
 *         request, the pool's reserved and in-use bytes, its limit, the
 *         device's free and total memory); TF_ERROR_NOT_SUPPORTED (inside a
 *         capture, on a device or driver without memory pools);
 *         TF_ERROR_RUNTIME_STATE; the device statuses.
 * @threadsafety Any thread; only a first use blocks, and a retry, which
 *         waits for the work queued on every slot of the device's runtimes
 *         (none inside a capture).
 * @failure Nothing was allocated (inside a capture: nothing was added to
 *         it, and it goes on).
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_alloc(tf_runtime *rt, size_t bytes, uint64_t *out_ptr);

/**
 * Free device memory from tf_alloc() (through any runtime of the device), in
 * order on the calling thread's slot: earlier work on this slot may still use
 * it; work on other slots must be finished, unless they recorded their use
 * (tf_memory_record_use()): the free then waits for it on the device.  The
 * pool may hand the memory out again to work ordered after the free.  A
 * double free is reported only if the driver notices.  While the slot
 * captures a graph (1.2) only an allocation made in the same capture is
 * freed, as the graph's free node; memory allocated outside the capture is
 * refused (a free node would free it again at every launch), and an
 * address of a graph is refused outside the capture that made it.
 * @param[in] rt  the runtime.
 * @param[in] ptr an address tf_alloc() returned; 0 is a no-op.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (not the start of an allocation of
 *         the device; memory of a graph, outside its capture; freed already
 *         in this capture); TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE
 *         (the slot captures a graph and @p ptr was not allocated in that
 *         capture); the device statuses.
 * @threadsafety Any thread; without a memory pool it blocks until the device
 *         is done with the memory.
 * @failure When tf_last_error_call() is "cuMemFree" or "cuMemFreeAsync" with
 *         a status other than TF_ERROR_INVALID_ARGUMENT, whether it was freed
 *         is unknown: leak it (tf_memory_stats() counts it as in use).
 *         Otherwise nothing was freed.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_free(tf_runtime *rt, uint64_t ptr);

/**
 * Copy @p len bytes from host memory @p src to device memory @p dst, in order
 * on the calling thread's slot.  On TF_OK @p src is free again; later work on
 * the slot sees the data, other slots after tf_runtime_sync() of this one.
 * Pageable @p src above 256 KiB is staged through the slot's buffers, copied
 * in by tf_runtime_options::download_threads threads.
 * @param[in] rt  the runtime.
 * @param[in] src host memory readable for @p len bytes.
 * @param[in] dst device memory of the runtime's device (checked).
 * @param[in] len bytes; 0 does nothing.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (also a device @p src);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY (page-locked
 *         memory); TF_ERROR_RUNTIME_STATE (staged, inside an enqueue
 *         callback on this slot; also: the slot captures a graph, whose
 *         launches could not keep this promise: use tf_upload_async()); the
 *         device statuses.
 * @threadsafety Any thread; a page-locked @p src blocks until the slot's
 *         earlier work and the copy are done.  Slot-exclusive when staged.
 *         A pthread_cancel() acts after the call returns, never inside it.
 * @failure After TF_ERROR_INVALID_ARGUMENT or TF_ERROR_RUNTIME_STATE
 *         nothing was queued and @p src is free again.  Otherwise
 *         @p dst may be partly written and a page-locked @p src may still be
 *         read by the device: do not change @p src until a later
 *         tf_runtime_sync() of the slot returns TF_OK.  To give it up instead,
 *         tf_host_free() a tf_host_alloc() block or tf_host_unregister() a
 *         tf_host_register() range, as after tf_download(); leak any other
 *         page-locked memory.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_upload(tf_runtime *rt, const void *src, uint64_t dst,
                                        size_t len);

/**
 * Copy @p len bytes between device memory of the runtime's device, in order
 * on the calling thread's slot; returns once queued.
 * @param[in] rt  the runtime.
 * @param[in] src device memory (checked).
 * @param[in] dst device memory (checked), not overlapping @p src's range.
 * @param[in] len bytes; 0 does nothing.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses.
 * @threadsafety Any thread; only a first use blocks.
 * @failure After TF_ERROR_INVALID_ARGUMENT nothing was queued; otherwise
 *         @p dst holds nothing known.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_copy(tf_runtime *rt, uint64_t src, uint64_t dst, size_t len);

/**
 * Whether copies from @p src_rt's device to @p dst_rt's run directly
 * (NVLink or PCIe peer access); 1 on one device.  tf_peer_copy() works
 * either way: without it the driver stages through host memory.
 * @param[in] src_rt         the source device's runtime.
 * @param[in] dst_rt         the destination device's runtime.
 * @param[out] out_available 1 or 0.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses (of either runtime).
 * @threadsafety Any thread; never blocks.
 * @failure Nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_peer_copy_available(tf_runtime *src_rt, tf_runtime *dst_rt,
                                                     int32_t *out_available);

/**
 * Copy @p len bytes from @p src_rt's device memory to @p dst_rt's, queued on
 * the calling thread's slot of @p src_rt; @p dst_rt's streams do not wait:
 * tf_runtime_sync(src_rt) from this slot first.  The first direct copy to
 * @p dst_rt enables peer access (a refusal is logged; the copy is staged).
 * @param[in] src_rt the source's runtime.
 * @param[in] src    device memory of @p src_rt's device (checked).
 * @param[in] dst_rt the destination's runtime.
 * @param[in] dst    device memory of @p dst_rt's device (checked), not
 *                   overlapping @p src's range.
 * @param[in] len    bytes; 0 does nothing.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses (TF_ERROR_DEVICE_FAULT marks @p dst_rt when met
 *         checking @p dst, else @p src_rt).
 * @threadsafety Any thread; only a first use blocks.
 * @failure After TF_ERROR_INVALID_ARGUMENT nothing was queued; otherwise
 *         @p dst holds nothing known.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_peer_copy(tf_runtime *src_rt, uint64_t src,
                                           tf_runtime *dst_rt, uint64_t dst, size_t len);

/**
 * Read a small value (a scalar, a flag) from device memory after the work
 * queued on the calling thread's slot: the value that work left there.  A
 * short wait spins, a long one sleeps; a fault of that work is reported.
 * @param[in] rt   the runtime.
 * @param[in] src  device memory of the runtime's device (checked).
 * @param[out] out host memory writable for @p len bytes.
 * @param[in] len  0 .. TF_SCALAR_DOWNLOAD_MAX_BYTES; 0 does nothing.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_OUT_OF_MEMORY (page-locked memory); TF_ERROR_RUNTIME_STATE
 *         (also: inside an enqueue callback on this slot; the slot captures a
 *         graph, or a capture begun outside the library); the device
 *         statuses.
 * @threadsafety Slot-exclusive; blocks until the slot's earlier work is done.
 * @failure @p out is untouched; nothing to undo.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_download_scalar(tf_runtime *rt, uint64_t src, void *out,
                                                 size_t len);

/**
 * Copy @p len bytes of device memory to host memory @p dst after the work
 * queued on the calling thread's slot.  Pageable @p dst above 64 KiB is staged
 * through the slot's buffers and copied out by
 * tf_runtime_options::download_threads threads.
 * @param[in] rt   the runtime.
 * @param[in] src  device memory of the runtime's device (checked).
 * @param[out] dst host memory writable for @p len bytes.
 * @param[in] len  bytes; 0 does nothing.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_OUT_OF_MEMORY; TF_ERROR_RUNTIME_STATE (also: staged, inside
 *         an enqueue callback on this slot; the slot captures a graph, or a
 *         capture begun outside the library); the device statuses.
 * @threadsafety Any thread; blocks until the slot's earlier work and the
 *         copy are done.  Slot-exclusive when staged.  A pthread_cancel()
 *         acts after the call returns, never inside it.
 * @failure After TF_ERROR_INVALID_ARGUMENT @p dst is untouched.  Otherwise
 *         it may be partly written, and a page-locked @p dst may still be
 *         written by the device: do not read or reuse it until a later
 *         tf_runtime_sync() of the slot returns TF_OK.  To give it up
 *         instead: a tf_host_alloc() block may go to tf_host_free() at once
 *         (the call recorded the slot's use: the pool reuses the block only
 *         once the slot's stream has passed the copy), a tf_host_register()
 *         range to tf_host_unregister() (which waits for the stream); leak
 *         any other page-locked memory.
 * @since 1.0
 */
TF_NODISCARD TF_API tf_status tf_download(tf_runtime *rt, uint64_t src, void *dst,
                                          size_t len);

/**
 * Allocate @p bytes of page-locked host memory (cuMemHostAlloc, PORTABLE)
 * from the runtime's caching pool.  The size is rounded up to its class (a
 * power of two from 4 KiB to 256 MiB, then a multiple of 64 MiB); a cached
 * free block of the class is reused without a driver call.  When the driver
 * is out of page-locked memory the cache is trimmed (tf_host_trim()) and the
 * allocation tried once more.  Not zeroed.
 * @param[in] rt       the runtime; the block is usable by every context.
 * @param[in] bytes    size, at least 1.
 * @param[out] out_ptr the block: tf_host_free() it through this runtime, or
 *                     with a NULL runtime after the runtime's last release.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, @p bytes 0 or too large);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY (page-locked memory
 *         exhausted after the trim); the device statuses.
 * @threadsafety Any thread; waits for other pool calls of the runtime, and
 *         for the device only when the driver is out of page-locked memory
 *         and the cache holds blocks to trim: cuMemFreeHost waits for the
 *         device's queued work (every stream, not only this runtime's)
 *         before the retry.
 * @failure Nothing was allocated.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_host_alloc(tf_runtime *rt, size_t bytes, void **out_ptr);

/**
 * Give a tf_host_alloc() block back to the runtime's cache.  Safe while the
 * device still uses it: the block is handed out again only once every slot
 * stream that used it (the library's asynchronous copies, a tf_download()
 * or tf_upload() whose wait failed, tf_host_record_use()) has passed this
 * call: an event is recorded on each such stream, or, where none can be,
 * the stream is waited for.  Reading or writing the block after this call
 * is undefined.  Since 1.2, a block still held at its runtime's last release
 * stays allocated and mapped, holding the device's primary context, until
 * tf_host_free(NULL, ptr) frees it (the last such block of the runtime
 * releases the context; a released handle is refused, never pass it).
 * @param[in] rt  the runtime that allocated it; NULL for a block whose
 *                runtime's last reference was released.
 * @param[in] ptr the block's start; NULL is a no-op.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (not the start of a live block of
 *         this runtime: never allocated, interior, freed already, another
 *         runtime's, a registered range; with a NULL @p rt: not the start of
 *         a block whose runtime was released); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE (also: NULL @p rt in a process forked from
 *         the block's); the device statuses.
 * @threadsafety Any thread; waits only for other pool calls of the runtime,
 *         and for a stream when an event cannot be recorded on it.  With a
 *         NULL @p rt it waits for the device (cuMemFreeHost) and for other
 *         such frees.
 * @failure After TF_ERROR_INVALID_ARGUMENT nothing changed.  Otherwise the
 *         device's use could not be bounded: the block is leaked, never
 *         reused; do not use it.  With a NULL @p rt the block is forgotten
 *         even when the driver refused to free it.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_host_free(tf_runtime *rt, void *ptr);

/**
 * Note that the calling thread's slot stream uses the block or registered
 * range holding @p ptr: call it after queueing your own work on it (a
 * kernel, a cuMemcpyAsync on tf_runtime_stream()), so that tf_host_free()
 * waits for that work before the block is reused.  The library's own
 * asynchronous copies record their uses themselves.  Inside a capture (1.2)
 * each launch of the graph records the use.
 * @param[in] rt  the runtime.
 * @param[in] ptr any address inside a live tf_host_alloc() block or
 *                tf_host_register() range of this runtime.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses.
 * @threadsafety Any thread, also inside enqueue callbacks; only a first use
 *         blocks.
 * @failure No use was recorded.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_host_record_use(tf_runtime *rt, void *ptr);

/**
 * Page-lock the caller's memory [@p ptr, @p ptr + @p bytes) for the runtime
 * (cuMemHostRegister, PORTABLE) and track it, so the asynchronous copies
 * accept it.  The memory stays the caller's; keep it until
 * tf_host_unregister() or the runtime's last release, which unregisters it.
 * @param[in] rt    the runtime.
 * @param[in] ptr   host memory, not NULL.
 * @param[in] bytes at least 1.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, 0, a range overlapping one
 *         this runtime tracks, memory the driver already knows as
 *         page-locked); TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY; the
 *         device statuses.
 * @threadsafety Any thread; waits only for other pool calls of the runtime.
 * @failure Nothing was registered.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_host_register(tf_runtime *rt, void *ptr, size_t bytes);

/**
 * Wait for the slot streams that used a tf_host_register() range, then
 * unregister it (cuMemHostUnregister).
 * @param[in] rt  the runtime that registered it.
 * @param[in] ptr the start of the range.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, not the start of a range
 *         this runtime registered, a tf_host_alloc() block);
 *         TF_ERROR_INVALID_HANDLE; the device statuses.
 * @threadsafety Any thread; blocks until the streams that used the range
 *         have finished their work.
 * @failure The range is still registered and tracked: call again, or leave
 *         it to the runtime's release.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_host_unregister(tf_runtime *rt, void *ptr);

/**
 * Counters of a runtime's page-locked host memory.  Bytes are what the
 * driver holds (size classes).  Every snapshot satisfies
 * bytes_in_use + bytes_cached == page-locked bytes the pool holds from the
 * driver; pending_frees <= blocks_cached.
 */
typedef struct tf_host_pool_stats {
    uint32_t struct_size;        /**< in: set by tf_host_pool_stats_init */
    uint32_t reserved;           /**< out: 0 */
    uint64_t bytes_in_use;       /**< out: blocks allocated and not freed */
    uint64_t bytes_cached;       /**< out: freed blocks kept for reuse */
    uint64_t bytes_registered;   /**< out: tf_host_register() ranges */
    uint64_t blocks_in_use;      /**< out: blocks allocated and not freed */
    uint64_t blocks_cached;      /**< out: freed blocks kept, pending included */
    uint64_t driver_allocations; /**< out: cuMemHostAlloc calls that succeeded */
    uint64_t pending_frees;      /**< out: freed blocks a stream may still use */
} tf_host_pool_stats;

/**
 * Zero @p stats and set its struct_size.
 * @param[out] stats the struct; NULL is ignored.
 * @param[in] struct_size sizeof(tf_host_pool_stats) as the caller was
 *         compiled; exactly that many bytes are written.  Below 4 or above
 *         TF_MAX_STRUCT_SIZE, nothing is written.
 * @threadsafety Any thread; touches only @p stats.
 * @since 1.1
 */
TF_API void tf_host_pool_stats_init(tf_host_pool_stats *stats, size_t struct_size);

/**
 * A consistent snapshot of the runtime's page-locked memory counters (no
 * driver call); works after a fault.
 * @param[in] rt      the runtime.
 * @param[in,out] out from tf_host_pool_stats_init(); nothing past its
 *                    struct_size is written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, a struct_size that does
 *         not reach past bytes_in_use or is above TF_MAX_STRUCT_SIZE);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE (a forked child).
 * @threadsafety Any thread; waits only for other pool calls of the runtime.
 * @failure Nothing to undo.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_host_stats(const tf_runtime *rt, tf_host_pool_stats *out);

/**
 * Give every cached block that no stream still uses back to the driver
 * (cuMemFreeHost), after polling the pending frees.  Blocks in use and
 * pending frees stay.
 * @param[in] rt the runtime.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses (the first cuMemFreeHost that failed).
 * @threadsafety Any thread; when it frees a block it waits for the device's
 *         queued work (every stream), as cuMemFreeHost does.
 * @failure A block the driver refused to free is leaked; the others were
 *         freed.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_host_trim(tf_runtime *rt);

/**
 * Queue a copy of @p len bytes of device memory into page-locked host
 * memory on the calling thread's slot, after its earlier work, and return.
 * @p dst belongs to the device until completion is observed
 * (tf_event_record() then tf_event_synchronize() or tf_event_query(), or
 * tf_runtime_sync() of the slot): reading or writing it before is a race;
 * tf_host_free() of its block is safe (the pool waits).  Captured (1.2):
 * the copy runs at each launch, which records the use.
 * @param[in] rt   the runtime.
 * @param[in] src  device memory of the runtime's device (checked).
 * @param[out] dst host memory wholly inside one tf_host_alloc() block or
 *                 tf_host_register() range of this runtime.
 * @param[in] len  bytes; 0 does nothing.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (also: @p dst pageable or
 *         another runtime's: the message names tf_host_alloc and
 *         tf_host_register); TF_ERROR_INVALID_HANDLE; the device statuses.
 * @threadsafety Any thread, also inside enqueue callbacks; only a first use
 *         blocks.
 * @failure Nothing was queued.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_download_async(tf_runtime *rt, uint64_t src, void *dst,
                                                size_t len);

/**
 * Queue a copy of @p len bytes of page-locked host memory to device memory
 * on the calling thread's slot, after its earlier work, and return.  The
 * device reads @p src when the copy runs: keep it unchanged until
 * completion is observed, as for tf_download_async(); captured, as it.
 * @param[in] rt  the runtime.
 * @param[in] src host memory wholly inside one tf_host_alloc() block or
 *                tf_host_register() range of this runtime.
 * @param[in] dst device memory of the runtime's device (checked).
 * @param[in] len bytes; 0 does nothing.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (also: @p src pageable or
 *         another runtime's: the message names tf_host_alloc and
 *         tf_host_register); TF_ERROR_INVALID_HANDLE; the device statuses.
 * @threadsafety As tf_download_async().
 * @failure Nothing was queued.
 * @since 1.1
 */
TF_NODISCARD TF_API tf_status tf_upload_async(tf_runtime *rt, const void *src, uint64_t dst,
                                              size_t len);

/** @} */

/* ==== Graph capture ======================================================== */

/**
 * @defgroup graphs Graph capture
 *
 * A slot can capture the work queued on it into a CUDA graph that runs again
 * with one launch (docs/graphs.md).  From tf_graph_capture_begin() to
 * tf_graph_capture_end() every call that only queues work on the slot is
 * captured, not run: tf_cublas_enqueue(), tf_cublaslt_enqueue(),
 * tf_stream_enqueue(),
 * tf_kernel_launch(), tf_copy(), tf_peer_copy(), tf_download_async(),
 * tf_upload_async(), tf_event_record(), tf_event_wait(), tf_slot_wait(),
 * tf_with_context() (whatever its callback queues there), tf_alloc() and
 * tf_free() of a temporary (the graph's allocation and free nodes: every
 * allocation of a capture is freed in it).  The calls that
 * would wait for the device or promise what a launch cannot repeat return
 * TF_ERROR_RUNTIME_STATE, naming the capture, and leave it intact:
 * tf_runtime_sync(), tf_download_scalar(), tf_download(), tf_upload(),
 * tf_workspace_retire(), tf_workspace_poll(), tf_free() of memory allocated
 * before the capture, tf_graph_launch(); tf_event_synchronize() and
 * tf_event_query() of an event recorded into the open capture.  The capture
 * belongs to the slot: calls of every thread on it are captured, calls on
 * other slots are unaffected (relaxed capture mode).  A capture begun outside
 * the library (cuStreamBeginCapture on tf_runtime_stream()) is refused by the
 * calls that wait too; the queue-only calls cannot tell it (docs/graphs.md).
 * @{
 */

/** Opaque, reference-counted executable graph of one runtime: work captured
 * on a slot, launched on any slot of that runtime.  It keeps its runtime
 * alive, and the events its work records or waits for. */
typedef struct tf_graph tf_graph;

/**
 * Start capturing the work queued on the calling thread's slot (the stream
 * of tf_runtime_stream()): until the capture ends, that work does not run.
 * A capture still open holds the events it records or waits for (and their
 * runtimes); the runtime's last release drops an open capture (logged).
 * @param[in] rt the runtime; a bound handle captures its slot.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE (also: the slot captures already, by this
 *         library or outside it; inside an enqueue callback on this slot);
 *         the device statuses.
 * @threadsafety Slot-exclusive.  Begin when no other thread queues work on
 *         the slot, or that work is captured too.
 * @failure Nothing was started.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_graph_capture_begin(tf_runtime *rt);

/**
 * End the capture of the calling thread's slot and instantiate what it
 * captured: a graph that runs that work at each tf_graph_launch().
 * @param[in] rt   the runtime: any thread whose calls use the capturing slot
 *                 (a bound handle's, for code that moved between threads).
 * @param[out] out the graph, with one reference: tf_graph_release().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE (also: the slot is not capturing; inside an
 *         enqueue callback on this slot; a tf_alloc() of the capture was not
 *         freed in it: the message names how many, their sizes and
 *         addresses, and the capture is over, nothing kept); the device
 *         statuses (TF_ERROR_CUDA
 *         with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: a call the library did
 *         not make broke the capture on the slot's stream).
 * @threadsafety Slot-exclusive.
 * @failure The message says whether the capture is over (nothing was kept,
 *         the slot works as before) or still open: then end or abort it again.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_graph_capture_end(tf_runtime *rt, tf_graph **out);

/**
 * As tf_graph_capture_end(), into the existing @p graph, which then runs the
 * new capture instead of its earlier one: updated in place
 * (cuGraphExecUpdate) when the new work has the same shape, the same calls
 * in the same order with other addresses or values, far cheaper than an
 * instantiation; instantiated anew otherwise, and always when the new or
 * the earlier capture allocated memory (memory nodes cannot be updated).
 * Launches already queued run the earlier work.
 * @param[in] rt    the runtime, as for tf_graph_capture_end().
 * @param[in] graph a graph of this runtime (checked before the capture ends).
 * @param[out] out_updated_in_place 1 when updated in place, 0 when
 *                 instantiated anew; may be NULL.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (also: @p graph not a graph, or
 *         another runtime's); TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE
 *         (as for tf_graph_capture_end()); the device statuses.
 * @threadsafety Slot-exclusive; waits for launches of @p graph on other
 *         threads.
 * @failure As tf_graph_capture_end(); @p graph then still runs its earlier
 *         capture.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_graph_capture_update(tf_runtime *rt, tf_graph *graph,
                                                      int32_t *out_updated_in_place);

/**
 * End the capture of the calling thread's slot and drop what it captured,
 * for cleanup (an error, an exception, a panic inside the capture).
 * @param[in] rt the runtime, as for tf_graph_capture_end().
 * @return TF_OK (also when the capture had been invalidated);
 *         TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE (also: the slot is not capturing; inside an
 *         enqueue callback on this slot); the device statuses.
 * @threadsafety Slot-exclusive.
 * @failure The capture is still open: call again.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_graph_capture_abort(tf_runtime *rt);

/**
 * Queue @p graph on the calling thread's slot, after the slot's earlier work
 * and the graph's previous launch (on any slot), and return.  Each launch
 * records the uses of the page-locked memory its copies use, as
 * tf_download_async() does, and first marks the work of the slots its
 * capture waited for (tf_slot_wait()) queued before this call.  A launch is
 * queued work for tf_download_scalar(), tf_runtime_sync() and retirements.
 * A graph whose capture ran tf_cublas_enqueue() or tf_cublaslt_enqueue()
 * uses the capturing slot's handles and workspace at every launch: the
 * launch holds that slot's lock, as those calls do, and from another slot
 * it also runs after the work queued on the capturing slot before it, and
 * the capturing slot's later work runs after it (two event records and two
 * stream waits; docs/graphs.md).
 * @param[in] rt    a handle of the graph's runtime (any slot).
 * @param[in] graph the graph.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (also: another runtime's graph;
 *         page-locked memory it copies was freed or unregistered since the
 *         capture); TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE (also:
 *         the slot captures a graph, or a slot the graph waits for does;
 *         the graph has cuBLAS work, is launched from another slot and its
 *         capturing slot captures now; the graph has cuBLAS work and the
 *         call runs inside an enqueue callback of another slot than its
 *         capturing slot); the device statuses.
 * @threadsafety Any thread, also inside enqueue callbacks (of the
 *         capturing slot, for a graph with cuBLAS work); launches and
 *         updates of one graph take turns; a launch of a graph with cuBLAS
 *         work waits for the capturing slot's enqueue calls in progress.
 * @failure Nothing was queued, but a wait for the capturing slot's earlier
 *         work when cuGraphLaunch failed after it, which only delays the
 *         calling slot.  When the capturing slot's wait for a launch from
 *         another slot cannot be queued the call waits for the launch
 *         instead and succeeds; only if that wait fails too (the message
 *         says the graph is queued) did the launch stay queued unordered.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_graph_launch(tf_runtime *rt, tf_graph *graph);

/**
 * Add a reference to @p graph: the same pointer then needs one more
 * tf_graph_release().
 * @param[in] graph a graph the caller holds a reference to.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not a graph);
 *         TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety Any thread; never blocks.
 * @failure No reference was added.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_graph_retain(tf_graph *graph);

/**
 * Drop a reference to @p graph; NULL is a no-op.  The last destroys the
 * executable graph (launches still queued finish first, the driver frees it
 * after them; a failure is logged; after a fault or in a forked child it
 * leaks quietly), drops its events and its runtime reference, which may tear
 * the runtime down as tf_runtime_release() does.
 * @param[in] graph the reference to drop, or NULL.
 * @return TF_OK (also when the destroy failed); TF_ERROR_INVALID_ARGUMENT
 *         (not a graph); TF_ERROR_INVALID_HANDLE (already released).
 * @threadsafety Any thread, but not while another thread uses this
 *         reference.  Blocks only when it tears the runtime down.
 * @failure Nothing was released.
 * @since 1.2
 */
TF_API tf_status tf_graph_release(tf_graph *graph);

/** @} */

/* ==== Device memory pool =================================================== */

/**
 * @defgroup memory Device memory pool
 *
 * tf_alloc() takes device memory from a memory pool the library owns, one
 * per device, made at the device's first allocation and shared by every
 * runtime of that device in the process; the device's default pool, which
 * belongs to every library in the process, is never used or changed.  Freed
 * memory stays in the pool and is handed out again, until tf_memory_trim(),
 * an out-of-memory retry, or a synchronizing call that finds more unused
 * than tf_runtime_options::memory_release_threshold gives it back.
 *
 * The pool has the memory options of the runtime that made it, for as long
 * as any runtime of the device lives: a later runtime whose options set
 * other values fails at creation.  Its counters are the device's, shared
 * by its runtimes.  The last runtime of the device destroys it; memory
 * still allocated then stays valid until freed (docs/teardown.md).  A
 * device or driver without memory pools allocates with cuMemAlloc,
 * uncached.  See docs/memory.md.
 * @{
 */

/**
 * Counters of a device's memory pool, shared by its runtimes.  Every
 * snapshot satisfies in_use_bytes <= reserved_bytes <= reserved_peak,
 * in_use_bytes <= in_use_peak, and allocations - frees == the number of
 * live tf_alloc() allocations, whose sizes add up to in_use_bytes.  Memory
 * allocated inside a graph capture is the graph's: none of the counters
 * includes it (cuDeviceGetGraphMemAttribute reports it).
 */
typedef struct tf_memory_pool_stats {
    uint32_t struct_size;       /**< in: set by tf_memory_pool_stats_init */
    uint32_t cached;            /**< out: 1 from the library's pool, 0 uncached (cuMemAlloc) */
    uint64_t reserved_bytes;    /**< out: device memory the pool holds (uncached: in use) */
    uint64_t reserved_peak;     /**< out: most reserved since the last reset */
    uint64_t in_use_bytes;      /**< out: live allocations, in bytes asked for */
    uint64_t in_use_peak;       /**< out: most in use since the last reset */
    uint64_t allocations;       /**< out: tf_alloc() calls that allocated */
    uint64_t frees;             /**< out: tf_free() calls that freed one of them */
    uint64_t oom_retries;       /**< out: allocations retried after a give-back */
    uint64_t oom_failures;      /**< out: retries that failed (TF_ERROR_OUT_OF_MEMORY) */
    uint64_t trims;             /**< out: give-backs: tf_memory_trim() and retries */
    uint64_t release_threshold; /**< out: the pool's memory_release_threshold */
    uint64_t reserved_limit;    /**< out: the pool's memory_reserved_limit, 0 none */
} tf_memory_pool_stats;

/**
 * Zero @p stats and set its struct_size.
 * @param[out] stats the struct; NULL is ignored.
 * @param[in] struct_size sizeof(tf_memory_pool_stats) as the caller was
 *         compiled; exactly that many bytes are written.  Below 4 or above
 *         TF_MAX_STRUCT_SIZE, nothing is written.
 * @threadsafety Any thread; touches only @p stats.
 * @since 1.2
 */
TF_API void tf_memory_pool_stats_init(tf_memory_pool_stats *stats, size_t struct_size);

/**
 * A consistent snapshot of the counters of the pool of @p rt's device.
 * The peaks count from the pool's creation or the last
 * tf_memory_reset_peak().
 * @param[in] rt      any runtime of the device.
 * @param[in,out] out from tf_memory_pool_stats_init(); nothing past its
 *                    struct_size is written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, a struct_size that does
 *         not reach past in_use_bytes or is above TF_MAX_STRUCT_SIZE);
 *         TF_ERROR_INVALID_HANDLE; the device statuses.
 * @threadsafety Any thread; waits only for tf_alloc() and tf_free() calls
 *         of the device in progress, never for the device.
 * @failure @p out is untouched.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_memory_stats(const tf_runtime *rt, tf_memory_pool_stats *out);

/**
 * Restart the peaks of the device's pool (reserved_peak, in_use_peak of
 * tf_memory_stats()) at the current values.
 * @param[in] rt any runtime of the device.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses.
 * @threadsafety Any thread; as tf_memory_stats().
 * @failure The peaks may be unchanged.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_memory_reset_peak(tf_runtime *rt);

/**
 * Give the unused memory of the device's pool back to the driver until the
 * pool holds at most @p keep_bytes (cuMemPoolTrimTo), after waiting for the
 * work queued on every slot of the device's runtimes so that their frees
 * count; like torch.cuda.empty_cache().  Memory in use stays.  Uncached, or
 * before the pool's first allocation, there is nothing to give back.
 * @param[in] rt         any runtime of the device.
 * @param[in] keep_bytes unused bytes the pool may keep; 0 gives back all.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE; the
 *         device statuses.
 * @threadsafety Any thread; blocks until the device has finished the work
 *         queued on every slot of every runtime of the device.
 * @failure Nothing to undo: memory given back before the failure stays so.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_memory_trim(tf_runtime *rt, uint64_t keep_bytes);

/**
 * Note that the calling thread's slot uses the tf_alloc() allocation that
 * holds @p ptr: call it after queueing work on it there (a kernel, a copy,
 * a cuBLAS call).  A later tf_free() of it from another slot, of any
 * runtime of the device, is then ordered after the work this slot queued
 * before that free, so the pool never hands the memory out under it (as
 * PyTorch's Tensor.record_stream()).  Unrecorded, such work must be
 * finished before the free (tf_free()).  Uncached, tf_free() waits for the
 * device anyway and this call only checks @p ptr.
 * @param[in] rt  the runtime whose calling slot uses the memory.
 * @param[in] ptr an address inside a live tf_alloc() allocation of the
 *                runtime's device.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, not inside a live tf_alloc()
 *         allocation of the device; memory of a graph, which only the graph's
 *         own work uses); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_OUT_OF_MEMORY; the device statuses.
 * @threadsafety Any thread, also inside enqueue callbacks; only a first use
 *         blocks.
 * @failure No use was recorded.
 * @since 1.2
 */
TF_NODISCARD TF_API tf_status tf_memory_record_use(tf_runtime *rt, uint64_t ptr);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TENFERRO_GPU_H */

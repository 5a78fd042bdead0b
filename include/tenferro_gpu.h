/**
 * @file tenferro_gpu.h
 * @brief tenferro-gpu: drive one CUDA device's runtime from any language.
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
 *    CUDA, cuBLAS or NVRTC result.  A call that returns TF_OK never changes
 *    the record, also when a step inside it failed and the call answered
 *    anyway (a capability probe, a count of zero devices); only library
 *    calls made by caller code it runs (a callback) record their own
 *    failures.
 *  - Output parameters are written only on TF_OK.
 *  - A NULL pointer where an object is required returns
 *    TF_ERROR_INVALID_ARGUMENT; it never crashes.
 *  - A runtime handle that was already released returns
 *    TF_ERROR_INVALID_HANDLE when the library can still tell (it keeps the
 *    last few thousand released handles quarantined); do not rely on it.
 *  - No function leaves the calling thread's current CUDA context changed:
 *    whatever context was current (NULL included) is current again on return,
 *    on every path, also when caller code the call runs (a callback, a
 *    workspace release) changed the thread's context.
 *  - No C++ exception ever leaves the library.
 *  - Structs passed in or out start with uint32_t struct_size, which the
 *    caller sets with the struct's *_init function, passing the sizeof it
 *    was compiled with: tf_runtime_options_init(&o, sizeof o).  Structs only
 *    ever grow at the end and the library never reads or writes past the
 *    caller's struct_size, so a program built against an older header keeps
 *    working with a newer library, and the other way round.  A struct_size
 *    above TF_MAX_STRUCT_SIZE is refused (TF_ERROR_INVALID_ARGUMENT) or, by
 *    the *_init functions, ignored.
 *  - Every function returning tf_status may also return
 *    TF_ERROR_OUT_OF_MEMORY when host memory runs out and TF_ERROR_INTERNAL
 *    for a bug in this library; the lists below do not repeat them.  A
 *    failing CUDA driver call returns the status its CUresult maps to (see
 *    enum tf_status_code): TF_ERROR_CUDA unless a more precise one applies.
 *  - Pointers the library hands out (strings, contexts, streams) are
 *    borrowed: never free them; each comment says how long they stay valid.
 *    Pointers the caller passes in are used during the call only, unless the
 *    comment says the library keeps them.
 *
 * Every function's comment gives: each parameter with its direction; what it
 * returns, every status listed; "Thread safety": which threads may call it
 * and what it serializes on; and for fallible functions "On failure": what a
 * failure leaves behind (what was written, what was leaked, what the caller
 * must not reuse).
 *
 * Thread safety: every function may be called from any thread.  A runtime
 * handle may be shared by threads; each function documents what it
 * serializes on.  See docs/threading.md.
 *
 * fork(): in a child process, every call returns, whatever other threads of
 * the parent were doing in the library at the fork (running a log callback,
 * loading the driver, cuBLAS or NVRTC, releasing a handle): the child gets
 * fresh process-wide locks.  A runtime inherited from the parent refuses
 * device work with TF_ERROR_RUNTIME_STATE, and so does every call that
 * needs a load that was in flight at the fork.  See docs/teardown.md.
 */
#ifndef TENFERRO_GPU_H
#define TENFERRO_GPU_H

#include <stddef.h>
#include <stdint.h>

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

/**
 * @defgroup version Version
 *
 * The version of the header a program was built with (the macros) and of the
 * library it runs with (the functions).  The major version is the SONAME's
 * number; docs/abi-stability.md says what each part may change.
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
 * header a program was built with.
 *
 * @return major * 10000 + minor * 100 + patch of the loaded library.  Never
 *         fails.
 * @threadsafety Any thread; reads no state.
 */
TF_API uint32_t tf_version(void);

/**
 * Version of the loaded library as a "major.minor.patch" string.
 *
 * @return a static string, never NULL, valid while the library is loaded;
 *         never free it.  Never fails.
 * @threadsafety Any thread; reads no state.
 */
TF_API const char *tf_version_string(void);

/** @} */

/**
 * Largest struct_size the library accepts in a versioned struct: 64 KiB.
 *
 * Every versioned struct starts with its struct_size and only grows at the
 * end; the largest (tf_error_info) is under 1 KiB, so this bound leaves room
 * for any growth.  A larger struct_size is taken for garbage, a struct that
 * was never initialised: honouring it would have the library read or write
 * up to 4 GiB of the caller's memory.  Calls that read or write a struct
 * refuse it with TF_ERROR_INVALID_ARGUMENT, the *_init functions ignore it,
 * and the library never reads or writes more than this many bytes of a
 * caller's struct.
 */
#define TF_MAX_STRUCT_SIZE 65536

/**
 * @defgroup errors Statuses and errors
 *
 * Every fallible function returns a tf_status and, on failure, records the
 * calling thread's last error: the status, the public function that failed
 * (the operation), the call inside it that failed, a numeric code with its
 * domain, and a message.  The record is thread-local and survives successful
 * calls.  See docs/errors-and-logging.md.
 * @{
 */

/**
 * Result of every fallible function.  Values are never renumbered; a retired
 * value is never reused.
 */
typedef int32_t tf_status;

/**
 * Every status a function of this library returns.
 *
 * A failing CUDA driver call maps its CUresult to a status:
 * CUDA_ERROR_OUT_OF_MEMORY to TF_ERROR_OUT_OF_MEMORY;
 * CUDA_ERROR_STUB_LIBRARY to TF_ERROR_DRIVER_STUB; CUDA_ERROR_NO_DEVICE to
 * TF_ERROR_NO_DEVICE; CUDA_ERROR_INVALID_DEVICE and
 * CUDA_ERROR_DEVICE_UNAVAILABLE to TF_ERROR_DEVICE_UNAVAILABLE;
 * CUDA_ERROR_NOT_SUPPORTED to TF_ERROR_NOT_SUPPORTED; the sticky faults
 * (illegal address, illegal instruction, misaligned address, invalid address
 * space, invalid program counter, hardware stack error, device assert,
 * launch failure, launch timeout, uncorrectable ECC error) to
 * TF_ERROR_DEVICE_FAULT; every other result to TF_ERROR_CUDA.  In each case
 * tf_last_error_code() is the CUresult and tf_last_error_code_domain() is
 * TF_CODE_CUDA.  A driver entry point the loaded driver lacks gives
 * TF_ERROR_NOT_SUPPORTED.
 *
 * Values are never renumbered and a retired value is never reused; new
 * values are only added at the end (docs/abi-stability.md).
 */
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
 * A human-readable description of a status ("invalid argument").
 *
 * @param[in] status any value; one this library does not know is described
 *                   as "unknown status".
 * @return a static string, never NULL, valid while the library is loaded;
 *         never free it.  Never fails.
 * @threadsafety Any thread; reads no state.
 */
TF_API const char *tf_status_string(tf_status status);

/**
 * Message of the last failure on the calling thread, for example
 * "tf_runtime_sync: cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS
 * (700): an illegal memory access was encountered".
 *
 * @return never NULL ("" when this thread has seen no failure).  The pointer
 *         refers to thread-local storage: it stays valid, unchanged, until
 *         the next failing call of this library on the same thread,
 *         tf_clear_last_error(), the thread's exit or the library's unload.
 *         Copy it to keep it; never free it.  Never fails.
 * @threadsafety Any thread; reads only the calling thread's record, so a
 *         thread never sees another thread's failure.
 */
TF_API const char *tf_last_error_message(void);

/**
 * The public function that failed.
 *
 * @return "tf_runtime_sync" for example, or "" when this thread has seen no
 *         failure.  Lifetime as tf_last_error_message().  Never fails.
 * @threadsafety As tf_last_error_message().
 */
TF_API const char *tf_last_error_operation(void);

/**
 * The call inside the failed function that failed.
 *
 * @return "cuStreamSynchronize", "cublasCreate_v2" or "callback" for example;
 *         "" when the library itself refused (a bad argument, a released
 *         handle) or this thread has seen no failure.  Lifetime as
 *         tf_last_error_message().  Never fails.
 * @threadsafety As tf_last_error_message().
 */
TF_API const char *tf_last_error_call(void);

/**
 * Numeric code of the last failure.
 *
 * @return a CUresult, cublasStatus_t, nvrtcResult, callback return value or
 *         errno, as tf_last_error_code_domain() says; 0 when the failure had
 *         no numeric code or this thread has seen no failure.  Never fails.
 * @threadsafety As tf_last_error_message().
 */
TF_API int32_t tf_last_error_code(void);

/**
 * Domain of tf_last_error_code().
 *
 * @return one of enum tf_code_domain; TF_CODE_NONE when there is no code.
 *         Never fails.
 * @threadsafety As tf_last_error_message().
 */
TF_API int32_t tf_last_error_code_domain(void);

/**
 * Status of the last failure on the calling thread.
 *
 * @return the status the last failing call returned, or TF_OK if this thread
 *         has seen no failure since it started or last cleared its record.
 *         Never fails and changes nothing.
 * @threadsafety As tf_last_error_message().
 * @failure Cannot fail.
 */
TF_API tf_status tf_last_error_status(void);

/**
 * Forget the calling thread's last error: afterwards its status is TF_OK,
 * its strings are "" and its code is 0.  Strings returned earlier keep their
 * storage, which now reads "".
 *
 * @threadsafety Any thread; touches only the calling thread's record.
 */
TF_API void tf_clear_last_error(void);

/** Maximum bytes of tf_error_info::operation and tf_error_info::call,
 * terminator included. */
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

/**
 * Zero @p info and set its struct_size.
 *
 * @param[out] info the struct to initialise; NULL is ignored.
 * @param[in] struct_size sizeof the struct as the caller was compiled with
 *         (sizeof(tf_error_info)).  Only that many bytes are written: the
 *         defaults of the fields this library knows, zero for the rest,
 *         and struct_size itself.  A size below 4 or above
 *         TF_MAX_STRUCT_SIZE is ignored: nothing is written.
 * @threadsafety Any thread; touches only @p info.
 */
TF_API void tf_error_info_init(tf_error_info *info, size_t struct_size);

/**
 * Copy the calling thread's last error into @p out.
 *
 * Go and Julia callers whose code can move between OS threads call this in
 * the same foreign call as the failing function (see docs/threading.md).
 *
 * @param[in,out] out initialised with tf_error_info_init().  Only its first
 *                struct_size bytes are written, so a caller built against an
 *                older, shorter struct gets the fields it knows; struct_size
 *                itself is kept.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT if @p out is NULL or its
 *         struct_size does not reach past the status field or is above
 *         TF_MAX_STRUCT_SIZE.
 * @threadsafety Any thread; reads only the calling thread's record.
 * @failure @p out is not written, and the thread's last error now describes
 *         this failure: the error the caller wanted is lost.
 */
TF_API tf_status tf_last_error(tf_error_info *out);

/** @} */

/**
 * @defgroup logging Logging
 *
 * Failures that have no caller to return a status to (a caller's context
 * that could not be restored, resources leaked at teardown) are logged: to
 * stderr by default, or to a callback through which a host language routes
 * them into its own logger.  See docs/errors-and-logging.md.
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
 * @param[in] level     enum tf_log_level.
 * @param[in] message   one line without a trailing newline, valid only
 *                      during the call: copy it to keep it.
 * @param[in] user_data as given to tf_set_log_callback().
 *
 * It may be called from any thread the library runs on, concurrently, while
 * the library holds the log lock shared (see tf_set_log_callback()), with
 * whatever CUDA context the library has current at that point: a callback
 * that changes the thread's context must put it back before returning.  It may
 * call this library, except tf_set_log_callback(), which refuses with
 * TF_ERROR_RUNTIME_STATE.  A C++ exception it throws loses its message and
 * nothing else.
 */
typedef void (*tf_log_fn)(int32_t level, const char *message, void *user_data);

/**
 * Route log messages to @p fn, or back to the default (stderr, each line
 * prefixed "tenferro-gpu: ") when @p fn is NULL.  To silence the library,
 * install a callback that ignores its arguments.  The setting is
 * process-wide.
 *
 * Once this returns, the previous callback is never called again, so its
 * user_data may be freed.  It waits for calls of the previous callback in
 * progress on other threads.
 *
 * @param[in] fn        the callback, or NULL for the default.
 * @param[in] user_data passed unchanged to every call of @p fn.  The library
 *                      keeps the pointer but never dereferences or frees it;
 *                      it must stay valid until a later tf_set_log_callback()
 *                      returns.
 * @return TF_OK; TF_ERROR_RUNTIME_STATE when called from inside a log
 *         callback (which would deadlock).
 * @threadsafety Any thread.  Takes the process-wide log lock exclusively, so
 *         it waits for log callbacks running on other threads: a log
 *         callback must never wait for a thread that may be calling this.
 * @failure The previous callback stays installed.
 */
TF_API tf_status tf_set_log_callback(tf_log_fn fn, void *user_data);

/** @} */

/**
 * @defgroup devices Devices
 *
 * What the driver reports, without creating a context.  The first call in a
 * process that needs the driver loads it (libcuda.so.1, or the absolute path
 * in the environment variable TENFERRO_GPU_CUDA_DRIVER) and keeps it loaded
 * until the process exits.
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
 *
 * @param[out] info the struct to initialise; NULL is ignored.
 * @param[in] struct_size sizeof the struct as the caller was compiled with
 *         (sizeof(tf_device_properties)).  Only that many bytes are written: the
 *         defaults of the fields this library knows, zero for the rest,
 *         and struct_size itself.  A size below 4 or above
 *         TF_MAX_STRUCT_SIZE is ignored: nothing is written.
 * @threadsafety Any thread; touches only @p info.
 */
TF_API void tf_device_properties_init(tf_device_properties *info, size_t struct_size);

/**
 * Whether this process can use a CUDA device: the driver loads, reports a
 * device, a runtime on device 0 can be created and synchronized.
 *
 * The probe is a real runtime: on a GPU the first call pays for device 0's
 * primary context.  Call it once and keep the answer.
 *
 * @return 1 or 0.  Never fails, never prints, leaves the thread's last error
 *         as it was.  The probe's runtime is released before it returns.
 *         Use it to skip GPU work on machines without one.
 * @threadsafety Any thread; concurrent calls probe independently.  The first
 *         call in the process loads the driver (concurrent first calls wait
 *         for that one load); otherwise as tf_runtime_new() and
 *         tf_runtime_release().
 */
TF_API int32_t tf_gpu_available(void);

/**
 * Number of CUDA devices.  Creates no context.
 *
 * @param[out] out_count number of devices; 0 when the driver reports none
 *                   (a driver without devices refuses cuInit: that is
 *                   TF_OK with 0, and the thread's last error is left
 *                   alone).
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out_count);
 *         TF_ERROR_DRIVER_NOT_FOUND; TF_ERROR_DRIVER_STUB;
 *         TF_ERROR_DRIVER_TOO_OLD; TF_ERROR_NOT_SUPPORTED (the driver lacks
 *         an entry point this needs); TF_ERROR_CUDA (cuInit or
 *         cuDeviceGetCount failed); TF_ERROR_RUNTIME_STATE (a forked child
 *         whose parent was loading the driver on another thread at the
 *         fork: that load never finishes in the child).
 * @threadsafety Any thread.  The first call in the process loads the driver
 *         once (concurrent first calls wait for it); cuInit is called until
 *         it succeeds once; after that no lock is taken.
 * @failure @p out_count is not written.  A driver that loaded stays loaded
 *         and nothing else is created.  A failed load is not retried: the
 *         process keeps getting the same status.
 */
TF_API tf_status tf_device_count(int32_t *out_count);

/**
 * Describe one device.  Creates no context; all fields are queried before
 * any is written, so a failure leaves @p out untouched.
 *
 * @param[in] ordinal 0 .. tf_device_count() - 1.
 * @param[in,out] out initialised with tf_device_properties_init(); fields
 *                past its struct_size are not written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, struct_size too small
 *         or above TF_MAX_STRUCT_SIZE,
 *         negative ordinal); TF_ERROR_DEVICE_UNAVAILABLE (no such ordinal;
 *         the message lists the devices); TF_ERROR_NO_DEVICE; and the
 *         driver-loading statuses of tf_device_count().
 * @threadsafety As tf_device_count().
 * @failure @p out is not written.
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
 *
 * Every function taking a handle refuses NULL with TF_ERROR_INVALID_ARGUMENT
 * and a released handle with TF_ERROR_INVALID_HANDLE (when the library can
 * still tell).  Functions that touch the device also refuse in a process
 * forked from the one that created the runtime (TF_ERROR_RUNTIME_STATE) and
 * once the runtime has seen a sticky device fault (TF_ERROR_DEVICE_FAULT).
 * See docs/threading.md and docs/teardown.md.
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
#define TF_DEFAULT_DOWNLOAD_THREADS 12
/** Largest accepted tf_runtime_options::download_threads. */
#define TF_MAX_DOWNLOAD_THREADS 64
/** Default of tf_runtime_options::download_chunk_bytes (0 selects it). */
#define TF_DEFAULT_DOWNLOAD_CHUNK_BYTES ((uint32_t)16 << 20)
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
    /** Bytes of each page-locked staging buffer a stream slot uses for
     * bulk downloads into pageable memory (a slot holds a small fixed
     * number of them, see docs/transfers.md), and the longest step such a
     * download is cut into: a multiple of 4096 in
     * TF_MIN_DOWNLOAD_CHUNK_BYTES .. TF_MAX_DOWNLOAD_CHUNK_BYTES; 0 picks
     * TF_DEFAULT_DOWNLOAD_CHUNK_BYTES.  Allocated at the slot's first such
     * download, freed at teardown. */
    uint32_t download_chunk_bytes;
} tf_runtime_options;

/**
 * Set @p options to the defaults and its struct_size.
 *
 * @param[out] options the struct to initialise; NULL is ignored.
 * @param[in] struct_size sizeof the struct as the caller was compiled with
 *         (sizeof(tf_runtime_options)).  Only that many bytes are written: the
 *         defaults of the fields this library knows, zero for the rest,
 *         and struct_size itself.  A size below 4 or above
 *         TF_MAX_STRUCT_SIZE is ignored: nothing is written.
 * @threadsafety Any thread; touches only @p options.
 */
TF_API void tf_runtime_options_init(tf_runtime_options *options, size_t struct_size);

/**
 * Create a runtime on device @p ordinal with default options.
 * Same as tf_runtime_new_with_options(ordinal, NULL, out).
 *
 * @param[in] ordinal device ordinal.
 * @param[out] out    the new handle with one reference.
 * @return those of tf_runtime_new_with_options() but the option errors:
 *         TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out, negative ordinal);
 *         TF_ERROR_DEVICE_UNAVAILABLE; TF_ERROR_NO_DEVICE;
 *         TF_ERROR_DRIVER_NOT_FOUND; TF_ERROR_DRIVER_STUB;
 *         TF_ERROR_DRIVER_TOO_OLD; TF_ERROR_NOT_SUPPORTED;
 *         TF_ERROR_OUT_OF_MEMORY; TF_ERROR_CUDA; TF_ERROR_RUNTIME_STATE (as
 *         for tf_device_count()).
 * @threadsafety As tf_runtime_new_with_options().
 * @failure As tf_runtime_new_with_options().
 */
TF_API tf_status tf_runtime_new(int32_t ordinal, tf_runtime **out);

/**
 * Create a runtime on device @p ordinal.
 *
 * In order: load and initialize the driver, look the device up, retain its
 * primary context, read the device's description.  A failure after the
 * retain releases the primary context again.  No stream, handle or memory is
 * created yet; each is made at first use.  Failures are recorded with the
 * operation "tf_runtime_new".
 *
 * @param[in] ordinal device ordinal.
 * @param[in] options NULL for the defaults, or initialised with
 *                 tf_runtime_options_init().  A struct_size larger than this
 *                 library knows is accepted when the unknown tail is zero
 *                 (up to TF_MAX_STRUCT_SIZE).
 *                 Read during the call only.
 * @param[out] out the new handle with one reference; release it with
 *                 tf_runtime_release().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out, negative ordinal,
 *         an option out of range, nonzero unknown option bytes, a
 *         struct_size too small or above TF_MAX_STRUCT_SIZE);
 *         TF_ERROR_DEVICE_UNAVAILABLE (no such ordinal; the message lists
 *         the devices found); TF_ERROR_NO_DEVICE; TF_ERROR_DRIVER_NOT_FOUND;
 *         TF_ERROR_DRIVER_STUB; TF_ERROR_DRIVER_TOO_OLD;
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_OUT_OF_MEMORY; TF_ERROR_CUDA;
 *         TF_ERROR_RUNTIME_STATE (as for tf_device_count()).
 * @threadsafety Any thread.  Runtimes created concurrently are independent;
 *         runtimes on one device share its primary context, which the driver
 *         reference-counts.  The first call in the process loads the driver
 *         and installs the fork handler, each once.
 * @failure @p out is not written and nothing is leaked: a primary context
 *         retained before the failure has been released again.
 */
TF_API tf_status tf_runtime_new_with_options(int32_t ordinal,
                                             const tf_runtime_options *options,
                                             tf_runtime **out);

/**
 * Add a reference to @p rt.  The same pointer then needs one more
 * tf_runtime_release().  Retained handles share identity and state.
 *
 * @param[in] rt a handle the caller holds a reference to.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL); TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; one atomic increment, no lock.  Works in a forked
 *         child and after a device fault.
 * @failure Nothing changes.
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
 *
 * After a device fault (TF_ERROR_DEVICE_FAULT) steps 1 and 2 are skipped and
 * the resources leaked without a warning; a driver that reports
 * deinitialization (at process exit) is treated the same way.  In a forked
 * child no driver call is made at all: the child's copies of the streams and
 * of the context retain belong to the parent and are abandoned.  Teardown
 * failures go to the log, never to the status.  docs/teardown.md has the
 * whole leak contract.
 *
 * @param[in] rt the reference to drop, or NULL.  After TF_OK the caller must
 *               not use this reference again; other references to the same
 *               handle stay valid.  Never drop the last reference from
 *               inside a callback the library runs for this runtime,
 *               except from a workspace release run by
 *               tf_workspace_retire(), tf_workspace_poll() or
 *               tf_runtime_sync(): that call keeps the runtime alive and
 *               tears it down as it returns.
 * @return TF_OK; TF_ERROR_INVALID_HANDLE when @p rt was already released
 *         (detected as for every function).
 * @threadsafety Any thread, but not while another thread still uses the
 *         reference being dropped.  The last release of a handle briefly
 *         takes the process-wide handle quarantine lock; the last release of
 *         the runtime blocks until the device has finished the runtime's
 *         work (step 1).
 * @failure Nothing changes and nothing is released.
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
 * @param[in] rt    any handle of the runtime; it keeps its own reference.
 * @param[in] slot  0 .. slot count - 1.
 * @param[out] out  the bound handle, with one reference.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, slot out of range);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY.
 * @threadsafety Any thread; no lock.  The bound handle may be used from any
 *         thread; threads using it at once share its slot (and its stream).
 * @failure @p out is not written and no reference is created.
 */
TF_API tf_status tf_runtime_bind_slot(tf_runtime *rt, int32_t slot, tf_runtime **out);

/**
 * Identity of the runtime: a number fresh for every tf_runtime_new() in this
 * process and equal for every handle retained or bound from it.  Use it as a
 * cache key; it grants nothing.
 *
 * @param[in] rt   the runtime.
 * @param[out] out its identity, never 0.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; no lock, no driver call.
 * @failure @p out is not written.
 */
TF_API tf_status tf_runtime_identity(const tf_runtime *rt, uint64_t *out);

/**
 * Allocation domain of the runtime: device memory made through one runtime
 * belongs to its domain.  Fresh per tf_runtime_new(), equal across retained
 * and bound handles, never equal to any identity.
 *
 * @param[in] rt   the runtime.
 * @param[out] out its allocation domain, never 0.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; no lock, no driver call.
 * @failure @p out is not written.
 */
TF_API tf_status tf_runtime_allocation_domain(const tf_runtime *rt, uint64_t *out);

/**
 * The runtime's device, as read when it was created (no driver call).
 *
 * @param[in] rt      the runtime.
 * @param[in,out] out initialised with tf_device_properties_init(); fields
 *                    past its struct_size are not written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, struct_size too small or
 *         above TF_MAX_STRUCT_SIZE);
 *         TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; no lock, no driver call.
 * @failure @p out is not written.
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
 * @param[in] rt     the runtime.
 * @param[in] capability enum tf_capability; a value this library does not
 *                   know is answered with 0, so newer programs run on older
 *                   libraries.
 * @param[out] out_supported 1 or 0.  A probe that fails (the driver query
 *                   behind TF_CAP_STREAM_ORDERED_ALLOC) answers 0 with
 *                   TF_OK and leaves the thread's last error alone; the next
 *                   call asks again.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; no lock.
 * @failure @p out_supported is not written.
 */
TF_API tf_status tf_runtime_supports(const tf_runtime *rt, int32_t capability,
                                     int32_t *out_supported);

/**
 * The device's primary context (a CUcontext) this runtime retains.  It stays
 * valid while the runtime lives.  Prefer tf_with_context() to making it
 * current yourself.
 *
 * @param[in] rt           the runtime.
 * @param[out] out_context the CUcontext, borrowed: never release, destroy or
 *                         pop it; it is valid until the runtime's last
 *                         reference is released.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; no lock, no driver call.
 * @failure @p out_context is not written.
 */
TF_API tf_status tf_runtime_primary_context(const tf_runtime *rt, void **out_context);

/**
 * Number of stream slots of the runtime.
 *
 * @param[in] rt         the runtime.
 * @param[out] out_count the slot count, fixed when the runtime was created.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; no lock, no driver call.
 * @failure @p out_count is not written.
 */
TF_API tf_status tf_runtime_slot_count(const tf_runtime *rt, int32_t *out_count);

/**
 * Stream slot the calling thread uses with @p rt (the bound slot for a
 * handle from tf_runtime_bind_slot()).  No driver call.
 *
 * @param[in] rt        the runtime.
 * @param[out] out_slot 0 .. slot count - 1.  For an unbound handle it is
 *                      fixed per thread, but a goroutine or task that moves
 *                      to another thread gets that thread's slot.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE.
 * @threadsafety Any thread; no lock.  The first call of a thread into the
 *         library numbers it with one atomic increment.
 * @failure @p out_slot is not written.
 */
TF_API tf_status tf_runtime_current_slot(const tf_runtime *rt, int32_t *out_slot);

/**
 * The calling thread's slot stream (a CUstream), created on first use.  It
 * stays valid while the runtime lives and is never replaced.  Work the
 * caller enqueues on it is ordered with the library's own work on that slot.
 *
 * @param[in] rt          the runtime.
 * @param[out] out_stream the CUstream, borrowed: never destroy it; it is
 *                        valid until the runtime's last reference is
 *                        released.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE (forked child); TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_CUDA (stream creation, context switch).
 * @threadsafety Any thread.  A slot's first use takes the runtime's
 *         stream-creation lock while the stream is created; later calls take
 *         no lock.  Threads sharing a slot get the same stream.
 * @failure @p out_stream is not written.  A stream that could not be
 *         created leaves the slot empty, so a later call tries again.
 */
TF_API tf_status tf_runtime_stream(tf_runtime *rt, void **out_stream);

/**
 * As tf_runtime_stream() for an explicit slot.
 *
 * @param[in] rt          the runtime.
 * @param[in] slot        0 .. slot count - 1 (TF_ERROR_INVALID_ARGUMENT
 *                        otherwise).
 * @param[out] out_stream as for tf_runtime_stream().
 * @return as tf_runtime_stream(): TF_OK; TF_ERROR_INVALID_ARGUMENT;
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA.
 * @threadsafety As tf_runtime_stream().
 * @failure As tf_runtime_stream().
 */
TF_API tf_status tf_runtime_slot_stream(tf_runtime *rt, int32_t slot, void **out_stream);

/**
 * Run @p fn with the runtime's primary context current on the calling thread.
 *
 * The caller's exact current context (NULL included) is saved, the primary
 * context made current, @p fn called, and the saved context made current
 * again: after a normal return, a nonzero return and a C++ exception thrown
 * by @p fn alike, also when @p fn changed the thread's context itself
 * (cuCtxSetCurrent, cuCtxPopCurrent, cudaSetDevice).  If the primary context
 * is already current this costs two cuCtxGetCurrent calls, one before and
 * one after @p fn (a third call puts the context back only if @p fn moved
 * it).  A failure to restore is logged, never returned.  @p fn may call this
 * library, this function included.
 *
 * @param[in] rt        the runtime.
 * @param[in] fn        called once, on the calling thread; its nonzero return
 *                      becomes TF_ERROR_CALLBACK with the value as the code.
 *                      A C++ exception it throws becomes TF_ERROR_CALLBACK
 *                      too.
 * @param[in] user_data passed to @p fn; the library never dereferences it.
 * @return TF_OK; TF_ERROR_CALLBACK; TF_ERROR_INVALID_ARGUMENT;
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE (forked child);
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (the context could not be
 *         read or activated; the caller's context is left as it was).
 * @threadsafety Any thread; no lock is held while @p fn runs, so threads run
 *         their callbacks concurrently.
 * @failure If the context could not be activated, @p fn was not called.  If
 *         @p fn failed, whatever it did before failing stands; the library
 *         undoes nothing but the context switch.
 */
TF_API tf_status tf_with_context(tf_runtime *rt, int32_t (*fn)(void *user_data),
                                 void *user_data);

/**
 * Wait until the work queued on the calling thread's slot stream is done,
 * then run the workspace retirements the device has passed (all of this
 * slot's made before the call; other slots' as tf_workspace_poll() does).
 * Other slots are not waited for.  A slot whose stream was never created
 * returns at once (after reporting a leak an earlier tf_workspace_retire()
 * left, if any).  A release it runs may drop the last reference to the
 * runtime: the runtime stays alive until this call returns and is torn down
 * then, on this thread.
 *
 * @param[in] rt the runtime; a bound handle waits for its bound slot.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT; TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT (the wait reported
 *         a sticky fault); TF_ERROR_CUDA (the wait, or a retirement leaked as
 *         tf_workspace_poll() describes, this call's or one an earlier
 *         tf_workspace_retire() found: reported once, also when this slot
 *         never queued anything).
 * @threadsafety Any thread.  Blocks the calling thread in the driver while
 *         the stream drains, holding no lock of this library; other threads
 *         keep working, on this slot too.
 * @failure The work may or may not have finished.  After
 *         TF_ERROR_DEVICE_FAULT the runtime refuses every later call that
 *         touches the device: release it (its resources are leaked
 *         quietly) and create a new one.
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
 * every call that works on the device returns TF_ERROR_RUNTIME_STATE in a
 * forked child and TF_ERROR_DEVICE_FAULT after a sticky fault: calls taking
 * a runtime check that runtime, calls taking only an event or a module check
 * the runtime it belongs to.  tf_workspace_stats() and tf_program_compile()
 * need no device and work in both states, as do the retain and release
 * functions of events and modules.
 *
 * Locks.  tf_cublas_enqueue() and tf_stream_enqueue() hold the calling
 * thread's slot lock while the caller's callback runs; nothing else here
 * takes a slot lock, so tf_slot_wait(), the tf_event functions,
 * tf_kernel_launch() and tf_workspace_retire() may be called from inside
 * those callbacks.  Workspace retirements take their runtime's retirement
 * lock briefly; cuBLAS and NVRTC are each loaded once per process.  Each
 * function's "Thread safety" says exactly what it takes.
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
 * The slot's lock is held from the handle's lookup (and creation) through
 * the pointer-mode selection until @p fn returns, so threads sharing a
 * slot never interleave their configuration
 * and enqueues.  Calls on other slots run in parallel.  When the primary
 * context is already current, the call adds two cuCtxGetCurrent (before and
 * after @p fn, which may move the thread: the caller's context is put back),
 * the slot lock and cublasSetPointerMode to what @p fn does; no system call,
 * no allocation, no lock shared between slots.
 *
 * @p fn must not keep the handle after it returns, change its stream or
 * workspace, or destroy it.  It may call this library, but a call that needs
 * the slot it runs on (tf_cublas_enqueue(), tf_stream_enqueue() on the same
 * slot) fails with TF_ERROR_RUNTIME_STATE instead of deadlocking.
 *
 * @param[in] rt       the runtime; the calling thread's (or the bound) slot is used.
 * @param[in] pointer_mode enum tf_cublas_pointer_mode.
 * @param[in] fn       called once, on the calling thread, with the slot's
 *                     cublasHandle_t, its CUstream (both borrowed for the
 *                     call only) and @p user_data; returns a
 *                     cublasStatus_t: 0 (CUBLAS_STATUS_SUCCESS) or
 *                     the failing status, which becomes TF_ERROR_PROVIDER
 *                     with code domain TF_CODE_CUBLAS and a message naming
 *                     the status ("CUBLAS_STATUS_INVALID_VALUE (7)").  A C++
 *                     exception it throws becomes TF_ERROR_CALLBACK.
 * @param[in] user_data passed to @p fn; the library never dereferences it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p rt, NULL @p fn, unknown
 *         pointer mode); TF_ERROR_INVALID_HANDLE; TF_ERROR_LIBRARY_NOT_FOUND (no
 *         cuBLAS; the message says what to add to LD_LIBRARY_PATH);
 *         TF_ERROR_NOT_SUPPORTED (the cuBLAS found lacks a function this
 *         needs, or the driver lacks cuMemAlloc for the workspace);
 *         TF_ERROR_PROVIDER (cublasCreate_v2, cublasSetStream_v2,
 *         cublasSetWorkspace_v2, cublasSetPointerMode_v2 or @p fn failed;
 *         a handle that was not completely set up is destroyed again and the
 *         next call starts over); TF_ERROR_OUT_OF_MEMORY (the workspace);
 *         TF_ERROR_CALLBACK; TF_ERROR_RUNTIME_STATE (forked child, or the
 *         calling thread already holds this slot's lock: a call from inside
 *         a tf_cublas_enqueue() or tf_stream_enqueue() callback on the same
 *         slot); TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (context, stream
 *         creation, the workspace's cuMemAlloc).
 * @threadsafety Any thread.  Takes the calling slot's lock (one mutex per
 *         slot) after the context switch and the slot's stream, and holds it
 *         while the slot's handle is looked up (and made, at the slot's
 *         first call), the pointer mode is set and @p fn runs.  Threads
 *         sharing the slot therefore wait for each other's whole callback;
 *         threads on other slots never wait for this lock.  The slot's first
 *         use creates its stream under the runtime's stream-creation lock,
 *         and the first cuBLAS call of the process loads cuBLAS (concurrent
 *         first callers wait for that one load).  @p fn must not wait for
 *         another thread that needs the same slot: only re-entry on the same
 *         thread is detected.
 * @failure When @p fn was not called (every status but TF_ERROR_CALLBACK and
 *         a TF_ERROR_PROVIDER whose tf_last_error_call() is "callback"),
 *         nothing was enqueued and nothing is leaked: the slot's handle is
 *         either complete or absent (a half-made one was destroyed and its
 *         workspace freed).  When @p fn failed, whatever it enqueued before
 *         failing stays queued; the library undoes nothing but the context
 *         switch, and the handle stays usable.  A failed load of cuBLAS
 *         (TF_ERROR_LIBRARY_NOT_FOUND, or TF_ERROR_NOT_SUPPORTED naming a
 *         cuBLAS function) is not retried: every later cuBLAS call of the
 *         process gets the same status.
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
 * @param[in] name the symbol, NUL-terminated; it must start with "cublas".
 * @param[out] out_function the function's address (cast it to its type),
 *                 valid until the process exits: cuBLAS is never unloaded.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, a name not starting with
 *         "cublas"); TF_ERROR_LIBRARY_NOT_FOUND; TF_ERROR_NOT_SUPPORTED
 *         (the loaded cuBLAS has no such symbol, or lacks a function this
 *         library needs); TF_ERROR_RUNTIME_STATE (a forked child whose
 *         parent was loading cuBLAS on another thread at the fork).
 * @threadsafety Any thread; no lock of this library and no driver call.  The
 *         first cuBLAS call of the process loads cuBLAS (concurrent first
 *         callers wait for that one load); the symbol lookup itself is
 *         dlsym, which takes the dynamic loader's lock.
 * @failure @p out_function is not written.  A failed load of cuBLAS is not
 *         retried: every later cuBLAS call of the process gets the same
 *         status.
 */
TF_API tf_status tf_cublas_symbol(const char *name, void **out_function);

/**
 * Version of the cuBLAS this library loaded, as major * 10000 + minor * 100
 * + patch (CUBLAS_VERSION's encoding: 130100 for 13.1.0).  Loads cuBLAS on
 * first use.  Thread-safe.
 *
 * @param[out] out_version the version.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out_version);
 *         TF_ERROR_LIBRARY_NOT_FOUND; TF_ERROR_NOT_SUPPORTED (the cuBLAS
 *         found lacks a function this library needs); TF_ERROR_PROVIDER
 *         (cublasGetProperty); TF_ERROR_RUNTIME_STATE (as for
 *         tf_cublas_symbol()).
 * @threadsafety As tf_cublas_symbol(); three cublasGetProperty calls, no
 *         lock of this library, no driver call.
 * @failure @p out_version is not written.  A failed load of cuBLAS is not
 *         retried, as for tf_cublas_symbol().
 */
TF_API tf_status tf_cublas_version(int32_t *out_version);

/**
 * Enqueues work of any library (NCCL, cuFFT, cuSOLVER, your own driver
 * calls) on the calling thread's slot stream: @p fn runs with the primary
 * context current and receives the slot's stream (a CUstream).  The caller's
 * context is current again afterwards, also when @p fn throws or changes the
 * thread's context itself.
 *
 * As tf_cublas_enqueue(), it holds the slot's lock while @p fn runs, so the
 * enqueues of threads sharing a slot do not interleave; a call from @p fn
 * that needs the same slot's lock fails with TF_ERROR_RUNTIME_STATE.
 *
 * @param[in] rt    the runtime; the calling thread's (or the bound) slot is used.
 * @param[in] fn    called once, on the calling thread, with the slot's
 *                  CUstream (borrowed: never destroy it) and @p user_data;
 *                  its nonzero return becomes TF_ERROR_CALLBACK with that
 *                  value as the code (TF_CODE_CALLBACK); a C++ exception it
 *                  throws becomes TF_ERROR_CALLBACK too.
 * @param[in] user_data passed to @p fn; the library never dereferences it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p rt or @p fn);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_CALLBACK; TF_ERROR_RUNTIME_STATE
 *         (forked child, or the calling thread already holds this slot's
 *         lock: a call from inside a tf_cublas_enqueue() or
 *         tf_stream_enqueue() callback on the same slot);
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (context, stream creation).
 * @threadsafety Any thread.  Takes the calling slot's lock (one mutex per
 *         slot) once the context is current and the slot's stream exists,
 *         and holds it until @p fn returns: threads sharing the slot wait
 *         for each other's whole callback, threads on other slots never wait
 *         for it.  The slot's first use creates its stream under the
 *         runtime's stream-creation lock.  @p fn must not wait for another
 *         thread that needs the same slot: only re-entry on the same thread
 *         is detected.
 * @failure If @p fn was not called (every status but TF_ERROR_CALLBACK),
 *         nothing was enqueued.  If @p fn failed, whatever it enqueued
 *         before failing stays queued; the library undoes nothing but the
 *         context switch.  Nothing is leaked.
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
 * @param[in] rt     the runtime; the calling thread's (or the bound) slot waits.
 * @param[in] other_slot 0 .. slot count - 1.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p rt, slot out of range);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (cuEventCreate, cuEventRecord,
 *         cuStreamWaitEvent, context, stream creation).
 * @threadsafety Any thread; no slot lock, no lock of this library once the
 *         calling slot's stream exists (its first use creates it under the
 *         runtime's stream-creation lock).  @p other_slot's event is created
 *         at the first wait for that slot and published with an atomic
 *         compare-and-swap (a thread that loses the race destroys its own);
 *         threads recording it concurrently are harmless, since each wait
 *         covers at least the work queued before its own call.
 * @failure No wait was queued: work the calling slot queues afterwards is
 *         not ordered after @p other_slot's.  @p other_slot may have had its
 *         event recorded, which orders nothing and needs no cleanup.
 *         Nothing is leaked; call again.
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
 * @param[in] rt   the runtime whose primary context holds the event.  The
 *                 event holds a reference to the runtime's state, so the
 *                 runtime lives until the event's last release even when
 *                 every handle of it is released.
 * @param[out] out the event with one reference; release it with
 *                 tf_event_release().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p rt or @p out);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY (host memory for
 *         the object, or cuEventCreate); TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (cuEventCreate, context).
 * @threadsafety Any thread; no lock of this library: one cuEventCreate with
 *         the primary context current.
 * @failure @p out is not written and nothing is leaked.
 */
TF_API tf_status tf_event_new(tf_runtime *rt, tf_event **out);

/**
 * Adds a reference to @p event.  The same pointer then needs one more
 * tf_event_release().
 *
 * @param[in] event an event the caller holds a reference to.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, or not a live event: a
 *         pointer that never was one is recognised, but one whose last
 *         reference was released is freed memory, undefined behaviour).
 * @threadsafety Any thread; one atomic increment, no lock, no driver call.
 *         Works in a forked child and after a device fault.
 * @failure Nothing changes.
 */
TF_API tf_status tf_event_retain(tf_event *event);

/**
 * Drops a reference; the last one destroys the event (with its runtime's
 * context current; a failure is logged) and then drops the event's
 * reference to its runtime, which may tear the runtime down.  NULL is a
 * no-op.  Using an event after its last release is undefined.
 *
 * @param[in] event the reference to drop, or NULL.  After TF_OK the caller
 *                  must not use this reference again.
 * @return TF_OK (also when the destroy failed: that is logged);
 *         TF_ERROR_INVALID_ARGUMENT (not a live event).
 * @threadsafety Any thread, but not while another thread still uses the
 *         reference being dropped.  One atomic decrement; the last release
 *         makes the event's primary context current for cuEventDestroy
 *         (skipped, and the event leaked quietly, in a forked child or after
 *         a device fault), puts the caller's context back, and drops the
 *         runtime reference: if that was the runtime's last, the runtime is
 *         torn down on this thread as by tf_runtime_release(), which blocks
 *         until the device has finished the runtime's work.  The thread's
 *         last error is left as it was.
 * @failure Nothing changes and nothing is released.
 */
TF_API tf_status tf_event_release(tf_event *event);

/**
 * Records @p event on the calling thread's slot stream of @p rt: it
 * completes when the work queued there before this call is done.
 *
 * @param[in] rt a handle of the runtime the event was made with (or of another
 *           runtime on the same device, which shares its primary context);
 *           the calling thread's (or the bound) slot is used.
 * @param[in] event the event; it is recorded, not retained.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, not a live event, an
 *         event of another device); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA
 *         (cuEventRecord, context, stream creation).
 * @threadsafety Any thread; no slot lock, no lock of this library once the
 *         slot's stream exists (its first use creates it under the
 *         runtime's stream-creation lock).  Threads may record the same
 *         event concurrently: a wait or synchronize uses whichever record
 *         the driver saw last before it.
 * @failure This call did not record the event: waits for it still use its
 *         earlier record, if any.  Nothing is leaked.
 */
TF_API tf_status tf_event_record(tf_runtime *rt, tf_event *event);

/**
 * Makes the calling thread's slot stream of @p rt wait, on the device, for
 * the latest record of @p event (any runtime's event).  The host does not
 * wait.
 *
 * @param[in] rt    the runtime; the calling thread's (or the bound) slot
 *                  waits.
 * @param[in] event the event, of this runtime or any other, on any device.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p rt, NULL or not a live
 *         event); TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (cuStreamWaitEvent, context,
 *         stream creation).
 * @threadsafety As tf_event_record(): no slot lock, so it may be called from
 *         inside tf_cublas_enqueue() and tf_stream_enqueue() callbacks.
 * @failure No wait was queued: work the slot queues afterwards is not
 *         ordered after the event.  Nothing is leaked.
 */
TF_API tf_status tf_event_wait(tf_runtime *rt, tf_event *event);

/**
 * Blocks the calling thread until the latest record of @p event is done.
 *
 * @param[in] event the event; one never recorded returns at once.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not a live event);
 *         TF_ERROR_RUNTIME_STATE (the event's runtime was created in a
 *         process this one was forked from); TF_ERROR_DEVICE_FAULT (a sticky
 *         fault, now or earlier, which also marks the event's runtime
 *         unusable); TF_ERROR_CUDA (cuEventSynchronize, context).
 * @threadsafety Any thread.  Blocks in cuEventSynchronize holding no lock of
 *         this library: other threads keep working, recording this event
 *         included.
 * @failure The recorded work may or may not have finished.  After
 *         TF_ERROR_DEVICE_FAULT the event's runtime refuses every later call
 *         that touches the device: release it.
 */
TF_API tf_status tf_event_synchronize(tf_event *event);

/**
 * Whether the latest record of @p event is done, without waiting.
 *
 * @param[in] event the event.
 * @param[out] out_done 1 when done (or never recorded), 0 when not yet.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not a live event, NULL
 *         @p out_done); TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_CUDA (cuEventQuery, context).
 * @threadsafety Any thread; no lock of this library, never waits: one
 *         cuEventQuery with the event's primary context current.
 * @failure @p out_done is not written.
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
 * it runs from the last release).  A release that changes the thread's
 * context is undone: the next release, and the caller of the call that ran
 * it, find the context they had.  Releases found by one call run in the
 * order of their retirements on each slot; releases found by calls on
 * different threads may run concurrently.  A C++ exception it throws is
 * logged and dropped.  A release may drop the last reference to the runtime
 * (see tf_runtime_release()).  A release that ends its thread
 * (pthread_exit(), or thread cancellation acted on inside it) ends the call
 * that ran it: the releases that call had found but not yet started never
 * run, and are counted as leaked and logged.
 *
 * Leaks of earlier retirements.  Retirements this call finds complete on
 * the way are resolved as tf_workspace_poll() would; when one of them
 * leaks (its event query and the wait for its stream both failed), the
 * leak is counted and logged here, but this call's status keeps describing
 * the fate of this call's own resource.  The leak is reported, once, by the
 * next tf_workspace_poll() or tf_runtime_sync() on the runtime, with the
 * status tf_workspace_poll() gives a leak it finds itself.
 *
 * @param[in] rt    the runtime; the calling thread's (or the bound) slot is used.
 * @param[in] resource passed to @p release; may be NULL.  The library never
 *                  dereferences it.
 * @param[in] release called exactly once, or never if the resource leaks.
 * @param[in] user_data passed to @p release; the library never dereferences
 *                  it.  It and @p resource must stay valid until
 *                  @p release runs.
 * @return TF_OK (queued, or released by the barrier fallback; whatever
 *         happened to earlier retirements on the way);
 *         TF_ERROR_INVALID_ARGUMENT (NULL @p release) and
 *         TF_ERROR_INVALID_HANDLE: nothing happened, the resource is still
 *         the caller's.  Any other failure means @p release will not run
 *         and the device may still use the resource: leak it.  These are
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA
 *         (context, stream creation, or the barrier fallback's
 *         cuStreamSynchronize, in which case the runtime counted it as
 *         leaked); TF_ERROR_OUT_OF_MEMORY (host memory for the queue).
 * @threadsafety Any thread.  Takes the runtime's retirement lock (one mutex
 *         per runtime, shared by all its slots) while it finds completed
 *         retirements (cuEventQuery of each slot's oldest retirements, up
 *         to the first the device has not passed) and queues this one
 *         (cuEventRecord, and cuEventCreate when the
 *         pool of passed events is empty); releases run after the lock is
 *         dropped.  No slot lock, so it may be called from inside
 *         tf_cublas_enqueue() and tf_stream_enqueue() callbacks.  The
 *         barrier fallback blocks in cuStreamSynchronize of the calling
 *         slot, holding no lock.  The slot's first use creates its stream
 *         under the runtime's stream-creation lock.
 * @failure After TF_ERROR_INVALID_ARGUMENT or TF_ERROR_INVALID_HANDLE the
 *         resource is still the caller's.  After any other status
 *         @p release will never run for this call and the device may still
 *         use the resource: leak it, never free or reuse it.  Earlier
 *         retirements this call found complete on the way were released as
 *         tf_workspace_poll() would have; their leaks are left for the next
 *         tf_workspace_poll() or tf_runtime_sync() to report.
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
 * @param[in] rt the runtime; its retirements on every slot are polled.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p rt); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA (the
 *         context could not be activated, or a retirement's event query and
 *         stream wait both failed: that resource was leaked, counted and
 *         logged; the error is the wait's, with call cuStreamSynchronize
 *         and a message naming how many resources leaked and the first).
 *         A leak an earlier tf_workspace_retire() found and could not
 *         report is reported here (or by tf_runtime_sync()), once, the
 *         same way.
 * @threadsafety Any thread.  Takes the runtime's retirement lock while it
 *         queries the pending events; runs the releases it found, and the
 *         stream waits of failed queries (cuStreamSynchronize), after
 *         dropping it.  No slot lock.
 * @failure Every release found complete before the failure has run;
 *         retirements not yet passed stay queued for later calls.  A
 *         retirement whose event query and stream wait both failed is
 *         leaked for good (counted in tf_retirement_stats::leaked, logged):
 *         its resource must never be freed or reused.
 */
TF_API tf_status tf_workspace_poll(tf_runtime *rt);

/** Counters of a runtime's workspace retirements.
 *
 * A retirement is accepted when it is queued behind an event (counted in
 * deferred) or, when it cannot be, once the wait for its stream that
 * replaces the event has returned (counted in barrier_fallbacks).  Every
 * accepted retirement is in exactly one of released, leaked and in_flight,
 * so every snapshot satisfies
 *
 *     deferred + barrier_fallbacks == released + leaked + in_flight
 *
 * also one taken from inside a release or while another thread waits for a
 * stream on the runtime's behalf: a retirement moves from in_flight to
 * released or leaked in one step, and a barrier fallback enters
 * barrier_fallbacks and released or leaked together. */
typedef struct tf_retirement_stats {
    uint32_t struct_size;   /**< in: set by tf_retirement_stats_init */
    uint32_t capacity;      /**< out: the queue bound (retirement_capacity) */
    uint64_t deferred;      /**< out: retirements queued behind an event */
    uint64_t released;      /**< out: releases started, or found and about to
                             * start on the thread that found them */
    uint64_t barrier_fallbacks; /**< out: retirements never queued (queue
                                 * full, event creation or record failed),
                                 * resolved by waiting for their stream
                                 * instead; counted once the wait returned.
                                 * A queued one whose event query failed
                                 * stays in deferred. */
    uint64_t leaked;        /**< out: resources never released: the device's
                             * progress could not be proven, or the thread
                             * that found them ended (a release called
                             * pthread_exit or was cancelled) before their
                             * releases started */
    uint64_t in_flight;     /**< out: queued retirements neither released nor
                             * leaked yet (one whose event query failed, while
                             * its stream is waited for, included) */
    uint64_t max_in_flight; /**< out: the most ever in flight at once */
} tf_retirement_stats;

/**
 * Zero @p stats and set its struct_size.
 *
 * @param[out] stats the struct to initialise; NULL is ignored.
 * @param[in] struct_size sizeof the struct as the caller was compiled with
 *         (sizeof(tf_retirement_stats)).  Only that many bytes are written: the
 *         defaults of the fields this library knows, zero for the rest,
 *         and struct_size itself.  A size below 4 or above
 *         TF_MAX_STRUCT_SIZE is ignored: nothing is written.
 * @threadsafety Any thread; touches only @p stats.
 */
TF_API void tf_retirement_stats_init(tf_retirement_stats *stats, size_t struct_size);

/**
 * A consistent snapshot of the runtime's retirement counters.  No driver
 * call; serializes briefly with retirements on the runtime.
 *
 * @param[in] rt the runtime.
 * @param[in,out] out initialised with tf_retirement_stats_init; fields past
 *                its struct_size are not written.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p rt or @p out, a
 *         struct_size that does not reach past capacity or is above
 *         TF_MAX_STRUCT_SIZE);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE (a forked child
 *         whose parent held the runtime's retirement lock at the fork: it
 *         is not waited for).  Works after a device fault, and in a forked
 *         child otherwise.
 * @threadsafety Any thread; takes the runtime's retirement lock for the
 *         copy, so the counters are consistent with each other.  No driver
 *         call.
 * @failure @p out is not written.
 */
TF_API tf_status tf_workspace_stats(const tf_runtime *rt, tf_retirement_stats *out);

/** Opaque, reference-counted loaded module (a CUmodule) of one runtime. */
typedef struct tf_module tf_module;

/**
 * Loads a module image into the runtime's primary context: PTX text (which
 * the driver compiles for the device), a CUBIN (ELF) or a fatbin.  The
 * module keeps its runtime alive until its last release.
 *
 * @param[in] rt    the runtime whose primary context receives the module.
 *              The module holds a reference to the runtime's state.
 * @param[in] image the image, read during the call only.  PTX need not end
 *              with a NUL byte (when the last of its @p size bytes is not
 *              NUL, the library passes a NUL-terminated copy); the driver
 *              reads a CUBIN or fatbin by its own headers.
 * @param[in] size  bytes of @p image, at least 1.
 * @param[out] out the module with one reference.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, size 0);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT; TF_ERROR_NOT_SUPPORTED;
 *         TF_ERROR_CUDA (cuModuleLoadDataEx; the message carries the start
 *         of the driver's JIT error log, e.g. for PTX of a newer target).
 * @threadsafety Any thread; no lock of this library: one cuModuleLoadDataEx
 *         with the primary context current (PTX is compiled by the driver
 *         during the call, which may take milliseconds).
 * @failure @p out is not written; nothing was loaded and nothing is leaked.
 */
TF_API tf_status tf_module_load(tf_runtime *rt, const void *image, size_t size,
                                tf_module **out);

/**
 * Adds a reference to @p module.  The same pointer then needs one more
 * tf_module_release().
 *
 * @param[in] module a module the caller holds a reference to.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, or not a live module; one
 *         whose last reference was released is freed memory, undefined
 *         behaviour).
 * @threadsafety Any thread; one atomic increment, no lock, no driver call.
 *         Works in a forked child and after a device fault.
 * @failure Nothing changes.
 */
TF_API tf_status tf_module_retain(tf_module *module);

/**
 * Drops a reference; the last one unloads the module with its runtime's
 * context current (a failure is logged; after a device fault or in a forked
 * child it is leaked quietly), then drops its reference to the runtime.
 * Functions of the module are invalid afterwards.  NULL is a no-op.
 *
 * @param[in] module the reference to drop, or NULL.  After TF_OK the caller
 *                   must not use this reference again.
 * @return TF_OK (also when the unload failed: that is logged);
 *         TF_ERROR_INVALID_ARGUMENT (not a live module).
 * @threadsafety Any thread, but not while another thread still uses the
 *         reference being dropped, and (for the last reference) not while
 *         another thread may still launch one of its functions.  One atomic
 *         decrement; the last release makes the module's primary context
 *         current for cuModuleUnload, puts the caller's context back and
 *         drops the runtime reference: if that was the runtime's last, the
 *         runtime is torn down on this thread as by tf_runtime_release().
 *         The thread's last error is left as it was.
 * @failure Nothing changes and nothing is released.
 */
TF_API tf_status tf_module_release(tf_module *module);

/**
 * A kernel of @p module by its name as it appears in the image: the plain
 * name for an extern "C" kernel, the mangled one for a C++ kernel.
 *
 * @param[in] module the module.
 * @param[in] name   the kernel's name, NUL-terminated.
 * @param[out] out_function a CUfunction, valid until the module's last
 *             release.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, not a live module);
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT; TF_ERROR_CUDA
 *         (cuModuleGetFunction: CUDA_ERROR_NOT_FOUND when the image has no
 *         such kernel; context).
 * @threadsafety Any thread; no lock of this library: one cuModuleGetFunction
 *         with the module's primary context current.
 * @failure @p out_function is not written.
 */
TF_API tf_status tf_module_function(tf_module *module, const char *name, void **out_function);

/**
 * Sets an attribute of a kernel of @p module (cuFuncSetAttribute; e.g.
 * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8, needed before
 * launching with more than 48 KiB of dynamic shared memory).
 *
 * @param[in] module    the module the function belongs to; its runtime's
 *                  primary context is made current for the call.  The
 *                  library does not check that @p function belongs to it.
 * @param[in] function  a function from tf_module_function().
 * @param[in] attribute a CUfunction_attribute value; the driver checks it.
 * @param[in] value     the attribute's new value; the driver checks it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL or not a live module, NULL
 *         @p function); TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_CUDA (cuFuncSetAttribute: an attribute that cannot be
 *         set, a value out of range; context).
 * @threadsafety Any thread; no lock of this library.  The library does not
 *         order it with launches of @p function on other threads: set
 *         attributes before the function is shared.
 * @failure The attribute is not known to have changed: set it again before
 *         relying on it.
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

/**
 * Set @p config to one block of one thread and its struct_size.
 *
 * @param[out] config the struct to initialise; NULL is ignored.
 * @param[in] struct_size sizeof the struct as the caller was compiled with
 *         (sizeof(tf_launch_config)).  Only that many bytes are written: the
 *         defaults of the fields this library knows, zero for the rest,
 *         and struct_size itself.  A size below 4 or above
 *         TF_MAX_STRUCT_SIZE is ignored: nothing is written.
 * @threadsafety Any thread; touches only @p config.
 */
TF_API void tf_launch_config_init(tf_launch_config *config, size_t struct_size);

/**
 * Launches @p function (from tf_module_function()) on the calling thread's
 * slot stream.  Returns once the launch is queued; errors the kernel meets
 * while running show up in later calls (a sticky fault as
 * TF_ERROR_DEVICE_FAULT).  Takes no slot lock, so it may be called from
 * inside tf_cublas_enqueue() and tf_stream_enqueue() callbacks.
 *
 * @param[in] rt  the runtime; the calling thread's (or the bound) slot is used.
 * @param[in] function a function from tf_module_function() of a module of this
 *               runtime's device, whose module is still loaded.
 * @param[in] config initialised with tf_launch_config_init; every dimension at
 *               least 1.  Read during the call only.
 * @param[in] args one pointer per kernel parameter, to a value of the
 *               parameter's type (cuLaunchKernel's kernelParams); NULL for
 *               a kernel without parameters.  Read during the call only.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, a zero dimension,
 *         struct_size too small or above TF_MAX_STRUCT_SIZE, nonzero bytes
 *         past the fields this library knows); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_CUDA (cuLaunchKernel: a function of another context,
 *         too many threads, too much shared memory, ...; context, stream
 *         creation).
 * @threadsafety Any thread; no slot lock and no lock of this library once
 *         the slot's stream exists (its first use creates it under the
 *         runtime's stream-creation lock).  Launches from threads sharing a
 *         slot run in the order the driver receives them.
 * @failure Nothing was queued.  Faults of the kernel itself are not
 *         reported here but by later calls that wait (see above).
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

/**
 * Set @p options to the defaults and its struct_size.
 *
 * @param[out] options the struct to initialise; NULL is ignored.
 * @param[in] struct_size sizeof the struct as the caller was compiled with
 *         (sizeof(tf_compile_options)).  Only that many bytes are written: the
 *         defaults of the fields this library knows, zero for the rest,
 *         and struct_size itself.  A size below 4 or above
 *         TF_MAX_STRUCT_SIZE is ignored: nothing is written.
 * @threadsafety Any thread; touches only @p options.
 */
TF_API void tf_compile_options_init(tf_compile_options *options, size_t struct_size);

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
 * @param[in] rt     the runtime whose device is the default target (its
 *               compute capability, read when the runtime was created).
 * @param[in] source NUL-terminated CUDA C++, read during the call only.
 * @param[in] options NULL for the defaults, or initialised with
 *                tf_compile_options_init.  Read during the call only.
 * @param[out] out the program (see above); untouched on other failures.
 * @return TF_OK; TF_ERROR_COMPILE (NVRTC rejected the source or an option;
 *         code domain TF_CODE_NVRTC); TF_ERROR_INVALID_ARGUMENT (NULL,
 *         options struct_size too small or above TF_MAX_STRUCT_SIZE,
 *         unknown target, negative arch or
 *         option_count, options NULL with a count or holding a NULL entry,
 *         nonzero unknown option bytes); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_LIBRARY_NOT_FOUND (no NVRTC; the message says what to
 *         add to LD_LIBRARY_PATH); TF_ERROR_NOT_SUPPORTED (the NVRTC found
 *         lacks a function this needs); TF_ERROR_PROVIDER (another NVRTC
 *         failure); TF_ERROR_OUT_OF_MEMORY; TF_ERROR_RUNTIME_STATE (a
 *         forked child whose parent was loading NVRTC on another thread at
 *         the fork).  No device work: otherwise it works in a forked child
 *         and after a device fault.
 * @threadsafety Any thread; no lock of this library.  The first NVRTC call
 *         of the process loads NVRTC (concurrent first callers wait for that
 *         one load); each call compiles its own NVRTC program, so calls on
 *         different threads compile concurrently.
 * @failure On TF_ERROR_COMPILE @p out holds a program that the caller must
 *         release with tf_program_release().  On every other failure
 *         @p out is not written and nothing is leaked: the NVRTC program is
 *         destroyed on every path.  A failed load of NVRTC is not retried:
 *         every later compile in the process gets the same status.
 */
TF_API tf_status tf_program_compile(tf_runtime *rt, const char *source,
                                    const tf_compile_options *options, tf_program **out);

/**
 * The compiled image of @p program (PTX text including its NUL byte, or a
 * CUBIN), valid until tf_program_release(); pass it to tf_module_load().
 *
 * @param[in] program a program from tf_program_compile().
 * @param[out] out_image the image, borrowed from @p program: never free it.
 * @param[out] out_size its size in bytes.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, or a program that did not
 *         compile and so has no image).
 * @threadsafety Any thread; reads @p program only, no lock, so threads may
 *         read one program at once, but not while another releases it.
 * @failure Neither output is written.
 */
TF_API tf_status tf_program_image(const tf_program *program, const void **out_image,
                                  size_t *out_size);

/**
 * NVRTC's log for @p program, NUL-terminated ("" when NVRTC wrote none),
 * valid until tf_program_release().
 *
 * @param[in] program a program from tf_program_compile().
 * @param[out] out_log the log, borrowed from @p program: never free it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p program or @p out_log).
 * @threadsafety As tf_program_image().
 * @failure @p out_log is not written.
 */
TF_API tf_status tf_program_log(const tf_program *program, const char **out_log);

/**
 * Frees @p program, its image and its log.  NULL is a no-op.
 *
 * @param[in] program a program from tf_program_compile(), or NULL.  Its
 *                    image and log pointers are invalid afterwards.  Any
 *                    other pointer, or a program released already, is
 *                    undefined behaviour: programs are not reference-counted
 *                    and carry no check.
 * @threadsafety Any thread, but not while another thread still uses the
 *         program, its image or its log.  No lock, no driver call.
 */
TF_API void tf_program_release(tf_program *program);

/** @} */

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
 * pageable memory above 64 KiB); calls on different slots never wait for
 * each other's lock, though concurrent bulk downloads share the runtime's
 * copy threads.
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
 * @param[in] rt       the runtime; the calling thread's (or the bound) slot
 *                     orders the allocation.
 * @param[in] bytes    size; 0 gives *out_ptr = 0 (no driver call), which
 *                     every transfer accepts with length 0 and tf_free()
 *                     ignores.
 * @param[out] out_ptr the device address; release it with tf_free().
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p out_ptr);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY (device memory
 *         exhausted); TF_ERROR_RUNTIME_STATE (forked child);
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_NOT_SUPPORTED (the driver lacks
 *         cuMemAlloc); TF_ERROR_CUDA.
 * @threadsafety Any thread; no lock of this library once the slot's stream
 *         exists (its first use creates it under the runtime's
 *         stream-creation lock).  Whether the device has memory pools is
 *         asked once per runtime and cached in an atomic (racing first
 *         callers may each ask).
 * @failure @p out_ptr is not written and nothing was allocated.
 */
TF_API tf_status tf_alloc(tf_runtime *rt, size_t bytes, uint64_t *out_ptr);

/**
 * Free device memory that tf_alloc() returned (through any runtime of the
 * same device), in order on the calling thread's slot stream: work queued
 * earlier on this slot may still use it; work on other slots that uses it
 * must be finished before.  With memory pools this is cuMemFreeAsync and
 * returns at once; otherwise cuMemFree, which waits for the device.
 *
 * @param[in] rt   the runtime; the calling thread's (or the bound) slot
 *                 orders the free.
 * @param[in] ptr  the address tf_alloc() returned; 0 is a no-op.  Freeing an
 *             address twice is a bug the library reports only when the
 *             driver notices it.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (@p ptr is not the start of an
 *         allocation of the runtime's device); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 * @threadsafety Any thread; no lock of this library (as tf_alloc()).
 *         Without memory pools cuMemFree blocks the calling thread until the
 *         device is done with the memory.
 * @failure After TF_ERROR_INVALID_ARGUMENT, and after any failure whose
 *         tf_last_error_call() is neither "cuMemFree" nor "cuMemFreeAsync",
 *         nothing was freed: the memory is still the caller's.  When the
 *         driver's free itself failed with another status, whether the
 *         memory was freed is unknown: use it no more and do not free it
 *         again (leak it).
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
 * @param[in] rt   the runtime; the calling thread's (or the bound) slot is used.
 * @param[in] src  host memory readable for @p len bytes.
 * @param[in] dst  device memory of the runtime's device (checked, see above).
 * @param[in] len  bytes to copy; 0 does nothing (no pointer is checked).
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p src, @p src is device
 *         memory, @p dst not device memory of the runtime's device, the
 *         range crosses the end of its
 *         allocation); TF_ERROR_INVALID_HANDLE; TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 *         On failure the device may still write @p dst's range.
 * @threadsafety Any thread; no lock of this library once the slot's stream
 *         exists.  For a page-locked @p src it blocks in cuStreamSynchronize
 *         of the slot (all work queued there before, too), holding no lock.
 * @failure After TF_ERROR_INVALID_ARGUMENT nothing was queued.  After a
 *         failed copy or wait, @p dst's range may be partly written and the
 *         device may still write it; for a page-locked @p src the device may
 *         also still read @p src: do not free or reuse it until a later
 *         tf_runtime_sync() from the same slot returns TF_OK (if none does,
 *         leak it).  A pageable @p src is free once the call returns.
 */
TF_API tf_status tf_upload(tf_runtime *rt, const void *src, uint64_t dst, size_t len);

/**
 * Copy @p len bytes from @p src to @p dst, both device memory of the
 * runtime's device, in order on the calling thread's slot stream.  Returns
 * once the copy is queued; work queued later on the slot sees the result.
 *
 * @param[in] rt  the runtime; the calling thread's (or the bound) slot is used.
 * @param[in] src device memory of the runtime's device (checked, see above).
 * @param[in] dst device memory of the runtime's device (checked), not
 *                overlapping [src, src + len).
 * @param[in] len bytes to copy; 0 does nothing (no pointer is checked).
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (either address unchecked, see
 *         above, or the two ranges overlap); TF_ERROR_INVALID_HANDLE;
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT;
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 * @threadsafety Any thread; no lock of this library once the slot's stream
 *         exists; never waits for the device.
 * @failure After TF_ERROR_INVALID_ARGUMENT nothing was queued.  After a
 *         failed cuMemcpyDtoDAsync, @p dst's range is not known to hold
 *         anything: copy again before reading it.  @p src is never written.
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
 * @param[in] src_rt the runtime of the source device.
 * @param[in] dst_rt the runtime of the destination device.
 * @param[out] out_available 1 or 0.
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL); TF_ERROR_INVALID_HANDLE
 *         (either runtime); TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT
 *         (either runtime);
 *         TF_ERROR_NOT_SUPPORTED (the driver lacks cuDeviceCanAccessPeer);
 *         TF_ERROR_CUDA.
 * @threadsafety Any thread; no lock, no context switch: no driver call for
 *         one device, one cuDeviceCanAccessPeer for two.
 * @failure @p out_available is not written.
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
 * copy from @p src_rt to @p dst_rt enables peer access from @p src_rt's
 * primary context to @p dst_rt's (cuCtxEnablePeerAccess, which stays
 * enabled while both contexts live; a destination context created anew,
 * after every runtime of its device was released, gets it again at the
 * next copy); if the driver refuses, the copy still runs, staged, and a
 * warning is logged once for that pair of runtimes.
 *
 * @param[in] src_rt the source's runtime; its calling thread's (or bound)
 *                   slot stream carries the copy.
 * @param[in] src    device memory of @p src_rt's device (checked, see above).
 * @param[in] dst_rt the destination's runtime.
 * @param[in] dst    device memory of @p dst_rt's device (checked); on one
 *                   device, not overlapping [src, src + len).
 * @param[in] len    bytes to copy; 0 does nothing (no pointer is checked).
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL, an address unchecked for
 *         its runtime's device, see above, or overlapping ranges on one
 *         device); TF_ERROR_INVALID_HANDLE (either runtime);
 *         TF_ERROR_RUNTIME_STATE; TF_ERROR_DEVICE_FAULT (a sticky fault
 *         belongs to the runtime whose context was current when the driver
 *         reported it: @p dst_rt's during the check of @p dst, @p src_rt's
 *         otherwise; that runtime alone refuses device work from then on;
 *         a runtime that had already faulted refuses the call and stays the
 *         only one marked);
 *         TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 * @threadsafety Any thread; no lock of this library once the source slot's
 *         stream exists.  Peer access is enabled at most once per source
 *         runtime and destination device (an atomic bit per destination;
 *         for ordinals 64 and above it is asked again each time, and the
 *         driver answers that it is enabled already).
 * @failure After TF_ERROR_INVALID_ARGUMENT nothing was queued.  After a
 *         failed cuMemcpyPeerAsync, @p dst's range is not known to hold
 *         anything.  Peer access enabled on the way stays enabled.
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
 * @param[in] rt   the runtime; the calling thread's (or the bound) slot is used.
 * @param[in] src  device memory of the runtime's device (checked, see above).
 * @param[out] out host memory writable for @p len bytes; written only on TF_OK.
 * @param[in] len  0 .. TF_SCALAR_DOWNLOAD_MAX_BYTES; 0 does nothing (no
 *                 pointer is checked).
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
 * @threadsafety Any thread.  Takes the calling slot's lock (one mutex per
 *         slot) once the address is checked, and holds it across the
 *         staging buffer's allocation (the slot's first call only), the copy
 *         and the wait for the slot's stream: threads sharing the slot
 *         serialize, each waiting for the other's download (and for whatever
 *         else is queued on that stream); threads on other slots never wait
 *         for it.  Refused with TF_ERROR_RUNTIME_STATE from inside a
 *         tf_cublas_enqueue() or tf_stream_enqueue() callback on the same
 *         slot.
 * @failure @p out is not written.  A staging buffer the device may still
 *         write was leaked, never freed or reused (see above).
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
 * own pageable path: the device copies steps into the slot's page-locked
 * staging buffers while host threads copy earlier steps out in parallel
 * (tf_runtime_options::download_threads and
 * tf_runtime_options::download_chunk_bytes tune it); never-touched pages
 * are faulted in by those threads in parallel as they copy.  Smaller
 * pageable destinations use the driver's copy.  If the
 * operating system refuses to start a copy thread,
 * downloads use the threads that did start (at least the caller) and a
 * warning is logged once.
 *
 * @param[in] rt   the runtime; the calling thread's (or the bound) slot is used.
 * @param[in] src  device memory of the runtime's device (checked, see above).
 * @param[out] dst host memory writable for @p len bytes, not device memory.
 * @param[in] len  bytes to copy; 0 does nothing (no pointer is checked).
 * @return TF_OK; TF_ERROR_INVALID_ARGUMENT (NULL @p dst, @p dst is device
 *         memory, @p src unchecked; nothing was written);
 *         TF_ERROR_INVALID_HANDLE; TF_ERROR_OUT_OF_MEMORY (no page-locked
 *         memory for the staging buffers); TF_ERROR_RUNTIME_STATE;
 *         TF_ERROR_DEVICE_FAULT; TF_ERROR_NOT_SUPPORTED; TF_ERROR_CUDA.
 * @threadsafety Any thread.  A page-locked @p dst, or a pageable one of at
 *         most 64 KiB, takes no lock of this library: the copy, then
 *         cuStreamSynchronize of the slot.  A pageable @p dst above 64 KiB
 *         takes the calling slot's lock for the whole download (the staging
 *         buffers' allocation at the slot's first such download, every chunk
 *         copy and wait, the host copies), so threads sharing the slot
 *         serialize and a call from inside a tf_cublas_enqueue() or
 *         tf_stream_enqueue() callback on the same slot is refused with
 *         TF_ERROR_RUNTIME_STATE; downloads on other slots run in parallel
 *         and share the runtime's copy threads (started once per runtime
 *         under the runtime's copy-pool start lock, fed through one queue
 *         under the pool's mutex).  Such a download holds thread
 *         cancellation off until it returns (the copy threads work on jobs
 *         that live on the calling thread's stack): a pthread_cancel()
 *         request that arrives meanwhile is acted on at the thread's next
 *         cancellation point after the call.
 * @failure After TF_ERROR_INVALID_ARGUMENT nothing was written.
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

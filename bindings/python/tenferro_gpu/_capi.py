# SPDX-License-Identifier: MIT OR Apache-2.0
"""The C ABI as ctypes sees it: structs, callback types and one prototype
per bound function of include/tenferro_gpu.h.

Every function this binding calls is declared once, in PROTOTYPES, in the
header's order and under the header's section names; adding a function of a
new section is one line here plus its wrapper.  A function the loaded
library does not export (an older library) fails only when it is called,
with MissingFunctionError, so the rest of the binding keeps working.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int32,
                    c_size_t, c_uint8, c_uint32, c_uint64, c_void_p, py_object)
from typing import Any, Callable, List, NoReturn, Optional, Sequence, Tuple, Type, TypeVar

from . import _library, errors

# ---- constants of the header that the binding needs ----------------------

ERROR_NAME_CAPACITY = 64          # TF_ERROR_NAME_CAPACITY
ERROR_MESSAGE_CAPACITY = 512      # TF_ERROR_MESSAGE_CAPACITY
DEVICE_NAME_CAPACITY = 256        # TF_DEVICE_NAME_CAPACITY
SCALAR_DOWNLOAD_MAX_BYTES = 16    # TF_SCALAR_DOWNLOAD_MAX_BYTES

# ---- structs (each starts with struct_size, set by its *_init) -----------


class ErrorInfo(Structure):
    """struct tf_error_info"""
    _fields_ = [
        ("struct_size", c_uint32),
        ("status", c_int32),
        ("code_domain", c_int32),
        ("code", c_int32),
        ("operation", c_char * ERROR_NAME_CAPACITY),
        ("call", c_char * ERROR_NAME_CAPACITY),
        ("message", c_char * ERROR_MESSAGE_CAPACITY),
    ]


class DevicePropertiesStruct(Structure):
    """struct tf_device_properties"""
    _fields_ = [
        ("struct_size", c_uint32),
        ("ordinal", c_int32),
        ("name", c_char * DEVICE_NAME_CAPACITY),
        ("uuid", c_uint8 * 16),
        ("compute_capability_major", c_int32),
        ("compute_capability_minor", c_int32),
        ("total_memory_bytes", c_uint64),
        ("multiprocessor_count", c_int32),
        ("pci_domain_id", c_int32),
        ("pci_bus_id", c_int32),
        ("pci_device_id", c_int32),
    ]


class RuntimeOptionsStruct(Structure):
    """struct tf_runtime_options"""
    _fields_ = [
        ("struct_size", c_uint32),
        ("stream_slots", c_uint32),
        ("cublas_workspace_bytes", c_uint64),
        ("retirement_capacity", c_uint32),
        ("flags", c_uint32),
        ("download_threads", c_uint32),
        ("download_chunk_bytes", c_uint32),
        ("memory_release_threshold", c_uint64),  # 1.2
        ("memory_reserved_limit", c_uint64),     # 1.2
    ]


class RetirementStatsStruct(Structure):
    """struct tf_retirement_stats"""
    _fields_ = [
        ("struct_size", c_uint32),
        ("capacity", c_uint32),
        ("deferred", c_uint64),
        ("released", c_uint64),
        ("barrier_fallbacks", c_uint64),
        ("leaked", c_uint64),
        ("in_flight", c_uint64),
        ("max_in_flight", c_uint64),
    ]


class HostPoolStatsStruct(Structure):
    """struct tf_host_pool_stats (1.1)"""
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved", c_uint32),
        ("bytes_in_use", c_uint64),
        ("bytes_cached", c_uint64),
        ("bytes_registered", c_uint64),
        ("blocks_in_use", c_uint64),
        ("blocks_cached", c_uint64),
        ("driver_allocations", c_uint64),
        ("pending_frees", c_uint64),
    ]


class MemoryPoolStatsStruct(Structure):
    """struct tf_memory_pool_stats (1.2)"""
    _fields_ = [
        ("struct_size", c_uint32),
        ("cached", c_uint32),
        ("reserved_bytes", c_uint64),
        ("reserved_peak", c_uint64),
        ("in_use_bytes", c_uint64),
        ("in_use_peak", c_uint64),
        ("allocations", c_uint64),
        ("frees", c_uint64),
        ("oom_retries", c_uint64),
        ("oom_failures", c_uint64),
        ("trims", c_uint64),
        ("release_threshold", c_uint64),
        ("reserved_limit", c_uint64),
    ]


class LaunchConfigStruct(Structure):
    """struct tf_launch_config"""
    _fields_ = [
        ("struct_size", c_uint32),
        ("grid_x", c_uint32),
        ("grid_y", c_uint32),
        ("grid_z", c_uint32),
        ("block_x", c_uint32),
        ("block_y", c_uint32),
        ("block_z", c_uint32),
        ("shared_memory_bytes", c_uint32),
    ]


class CompileOptionsStruct(Structure):
    """struct tf_compile_options"""
    _fields_ = [
        ("struct_size", c_uint32),
        ("target", c_int32),
        ("arch", c_int32),
        ("option_count", c_int32),
        ("options", POINTER(c_char_p)),
        ("name", c_char_p),
    ]


S = TypeVar("S", bound=Structure)


def new_struct(struct_type: Type[S], init: Callable[..., Any]) -> S:
    """A struct_type initialised by its *_init function with the binding's
    own sizeof, so the library writes only the fields this binding knows."""
    value = struct_type()
    init(ctypes.byref(value), ctypes.sizeof(struct_type))
    return value


# ---- callback types ------------------------------------------------------

# The binding passes a Python object (the call's frame, kept alive by the
# caller for the whole C call) as user_data of the callbacks that run during
# the call, so the one trampoline per type finds it without a lookup.
# int32_t (*fn)(void *user_data) of tf_with_context.
WITH_CONTEXT_FN = CFUNCTYPE(c_int32, py_object)
# tf_log_fn
LOG_FN = CFUNCTYPE(None, c_int32, c_char_p, c_void_p)
# int32_t (*fn)(void *cublas_handle, void *stream, void *user_data)
CUBLAS_FN = CFUNCTYPE(c_int32, c_void_p, c_void_p, py_object)
# int32_t (*fn)(void *stream, void *user_data) of tf_stream_enqueue
STREAM_FN = CFUNCTYPE(c_int32, c_void_p, py_object)
# void (*release)(void *resource, void *user_data) of tf_workspace_retire
RELEASE_FN = CFUNCTYPE(None, c_void_p, c_void_p)

# ---- prototypes ----------------------------------------------------------

status = c_int32          # tf_status
runtime_p = c_void_p      # tf_runtime *
event_p = c_void_p        # tf_event *
module_p = c_void_p       # tf_module *
program_p = c_void_p      # tf_program *

PROTOTYPES = (
    # Version
    ("tf_version", c_uint32, ()),
    ("tf_version_string", c_char_p, ()),
    # Statuses and errors
    ("tf_status_string", c_char_p, (status,)),
    ("tf_clear_last_error", None, ()),
    ("tf_error_info_init", None, (POINTER(ErrorInfo), c_size_t)),
    ("tf_last_error", status, (POINTER(ErrorInfo),)),
    # Logging
    ("tf_set_log_callback", status, (LOG_FN, c_void_p)),
    # Devices
    ("tf_device_properties_init", None,
     (POINTER(DevicePropertiesStruct), c_size_t)),
    ("tf_gpu_available", c_int32, ()),
    ("tf_device_count", status, (POINTER(c_int32),)),
    ("tf_device_info", status, (c_int32, POINTER(DevicePropertiesStruct))),
    # Runtime
    ("tf_runtime_options_init", None,
     (POINTER(RuntimeOptionsStruct), c_size_t)),
    ("tf_runtime_new", status, (c_int32, POINTER(runtime_p))),
    ("tf_runtime_new_with_options", status,
     (c_int32, POINTER(RuntimeOptionsStruct), POINTER(runtime_p))),
    ("tf_runtime_retain", status, (runtime_p,)),
    ("tf_runtime_release", status, (runtime_p,)),
    ("tf_runtime_bind_slot", status, (runtime_p, c_int32, POINTER(runtime_p))),
    ("tf_runtime_identity", status, (runtime_p, POINTER(c_uint64))),
    ("tf_runtime_allocation_domain", status, (runtime_p, POINTER(c_uint64))),
    ("tf_runtime_device_info", status,
     (runtime_p, POINTER(DevicePropertiesStruct))),
    ("tf_runtime_supports", status, (runtime_p, c_int32, POINTER(c_int32))),
    ("tf_runtime_primary_context", status, (runtime_p, POINTER(c_void_p))),
    ("tf_runtime_slot_count", status, (runtime_p, POINTER(c_int32))),
    ("tf_runtime_current_slot", status, (runtime_p, POINTER(c_int32))),
    ("tf_runtime_stream", status, (runtime_p, POINTER(c_void_p))),
    ("tf_runtime_slot_stream", status, (runtime_p, c_int32, POINTER(c_void_p))),
    ("tf_with_context", status, (runtime_p, WITH_CONTEXT_FN, py_object)),
    ("tf_runtime_sync", status, (runtime_p,)),
    # Work on the slot streams: cuBLAS, any library, kernels, retirement
    ("tf_cublas_enqueue", status, (runtime_p, c_int32, CUBLAS_FN, py_object)),
    ("tf_cublas_symbol", status, (c_char_p, POINTER(c_void_p))),
    ("tf_cublas_version", status, (POINTER(c_int32),)),
    ("tf_stream_enqueue", status, (runtime_p, STREAM_FN, py_object)),
    ("tf_slot_wait", status, (runtime_p, c_int32)),
    ("tf_event_new", status, (runtime_p, POINTER(event_p))),
    ("tf_event_retain", status, (event_p,)),
    ("tf_event_release", status, (event_p,)),
    ("tf_event_record", status, (runtime_p, event_p)),
    ("tf_event_wait", status, (runtime_p, event_p)),
    ("tf_event_synchronize", status, (event_p,)),
    ("tf_event_query", status, (event_p, POINTER(c_int32))),
    ("tf_workspace_retire", status, (runtime_p, c_void_p, RELEASE_FN, c_void_p)),
    ("tf_workspace_poll", status, (runtime_p,)),
    ("tf_retirement_stats_init", None,
     (POINTER(RetirementStatsStruct), c_size_t)),
    ("tf_workspace_stats", status, (runtime_p, POINTER(RetirementStatsStruct))),
    ("tf_module_load", status, (runtime_p, c_void_p, c_size_t, POINTER(module_p))),
    ("tf_module_retain", status, (module_p,)),
    ("tf_module_release", status, (module_p,)),
    ("tf_module_function", status, (module_p, c_char_p, POINTER(c_void_p))),
    ("tf_function_set_attribute", status, (module_p, c_void_p, c_int32, c_int32)),
    ("tf_launch_config_init", None, (POINTER(LaunchConfigStruct), c_size_t)),
    ("tf_kernel_launch", status,
     (runtime_p, c_void_p, POINTER(LaunchConfigStruct), POINTER(c_void_p))),
    ("tf_compile_options_init", None, (POINTER(CompileOptionsStruct), c_size_t)),
    ("tf_program_compile", status,
     (runtime_p, c_char_p, POINTER(CompileOptionsStruct), POINTER(program_p))),
    ("tf_program_image", status, (program_p, POINTER(c_void_p), POINTER(c_size_t))),
    ("tf_program_log", status, (program_p, POINTER(c_char_p))),
    ("tf_program_release", None, (program_p,)),
    ("tf_program_retain", status, (program_p,)),                # 1.1
    ("tf_program_release_checked", status, (program_p,)),       # 1.1
    # Device memory and transfers
    ("tf_alloc", status, (runtime_p, c_size_t, POINTER(c_uint64))),
    ("tf_free", status, (runtime_p, c_uint64)),
    ("tf_upload", status, (runtime_p, c_void_p, c_uint64, c_size_t)),
    ("tf_copy", status, (runtime_p, c_uint64, c_uint64, c_size_t)),
    ("tf_peer_copy_available", status, (runtime_p, runtime_p, POINTER(c_int32))),
    ("tf_peer_copy", status, (runtime_p, c_uint64, runtime_p, c_uint64, c_size_t)),
    ("tf_download_scalar", status, (runtime_p, c_uint64, c_void_p, c_size_t)),
    ("tf_download", status, (runtime_p, c_uint64, c_void_p, c_size_t)),
    # Page-locked host memory and asynchronous copies (1.1)
    ("tf_host_alloc", status, (runtime_p, c_size_t, POINTER(c_void_p))),
    ("tf_host_free", status, (runtime_p, c_void_p)),
    ("tf_host_record_use", status, (runtime_p, c_void_p)),
    ("tf_host_register", status, (runtime_p, c_void_p, c_size_t)),
    ("tf_host_unregister", status, (runtime_p, c_void_p)),
    ("tf_host_pool_stats_init", None, (POINTER(HostPoolStatsStruct), c_size_t)),
    ("tf_host_stats", status, (runtime_p, POINTER(HostPoolStatsStruct))),
    ("tf_host_trim", status, (runtime_p,)),
    ("tf_download_async", status, (runtime_p, c_uint64, c_void_p, c_size_t)),
    ("tf_upload_async", status, (runtime_p, c_void_p, c_uint64, c_size_t)),
    # Graph capture (1.2)
    ("tf_graph_capture_begin", status, (runtime_p,)),
    ("tf_graph_capture_end", status, (runtime_p, POINTER(c_void_p))),
    ("tf_graph_capture_update", status, (runtime_p, c_void_p, POINTER(c_int32))),
    ("tf_graph_capture_abort", status, (runtime_p,)),
    ("tf_graph_launch", status, (runtime_p, c_void_p)),
    ("tf_graph_retain", status, (c_void_p,)),
    ("tf_graph_release", status, (c_void_p,)),
    # Device memory pool (1.2)
    ("tf_memory_pool_stats_init", None, (POINTER(MemoryPoolStatsStruct), c_size_t)),
    ("tf_memory_stats", status, (runtime_p, POINTER(MemoryPoolStatsStruct))),
    ("tf_memory_reset_peak", status, (runtime_p,)),
    ("tf_memory_trim", status, (runtime_p, c_uint64)),
    ("tf_memory_record_use", status, (runtime_p, c_uint64)),
)


# The calls whose per-call cost matters (docs/python.md, "Per-call
# overhead"), as second ctypes function objects without argtypes: the
# callers pass ready ctypes values (c_void_p handles, c_uint64 addresses),
# which skips ctypes' argument conversion.  restype is set; they still
# release the GIL like every CDLL function.
FAST = ("tf_runtime_stream", "tf_runtime_sync", "tf_download_scalar", "tf_with_context")


class MissingFunctionError(_library.LoadError):
    """The loaded library does not export a function this binding calls (it
    is older than the binding)."""

    __module__ = "tenferro_gpu"


class _Missing:
    """Stands in for a function the loaded library lacks."""

    def __init__(self, name: str, where: str) -> None:
        self._name, self._where = name, where

    def __call__(self, *args: object) -> NoReturn:
        raise MissingFunctionError(
            f"{self._name} is not exported by {self._where} (tenferro-gpu "
            f"{api().version_string}); a newer library is needed")


class Fast:
    """The FAST functions, untyped (see FAST)."""

    __slots__ = ("stream", "sync", "download_scalar", "with_context")

    def __init__(self, lib: ctypes.CDLL) -> None:
        func_type = type(lib.tf_version)     # the CDLL's own function class

        def untyped(name: str) -> Callable[..., int]:
            fn = func_type((name, lib))
            fn.restype = c_int32
            return fn
        self.stream = untyped("tf_runtime_stream")
        self.sync = untyped("tf_runtime_sync")
        self.download_scalar = untyped("tf_download_scalar")
        self.with_context = untyped("tf_with_context")


class _Api:
    """One attribute per prototype: the typed ctypes function."""

    where: str
    version_string: str
    fast: Fast

    def __init__(self, lib: ctypes.CDLL, where: str) -> None:
        self.where = where
        for name, restype, argtypes in PROTOTYPES:
            try:
                fn = getattr(lib, name)
            except AttributeError:
                setattr(self, name, _Missing(name, where))
                continue
            fn.restype = restype
            fn.argtypes = list(argtypes)
            setattr(self, name, fn)
        self.version_string = self.tf_version_string().decode()
        self.fast = Fast(lib)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not prototypes: a typo, not a
        # missing export (those are _Missing).
        raise AttributeError(name)


_api: Optional[_Api] = None
# api().fast, set with it: the hot paths read this module attribute (every
# Runtime exists only after the library was loaded).
fast: Fast
# The optional C extension (src/_speedups.c) bound to the same library, or
# None: then the hot paths use `fast`.  TENFERRO_GPU_SPEEDUPS=0 turns it off.
speedups: Any = None
ENV_SPEEDUPS = "TENFERRO_GPU_SPEEDUPS"
# What a hot call of the extension returns for a handle closed meanwhile.
CLOSED = -1000000


class RefFallback(c_void_p):
    """A Ref without the extension (see _handles.py): a c_void_p, which
    every ctypes call takes as it is."""

    __slots__ = ()

    # A Ref is one reference: identity is its equality (c_void_p has none).
    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


# The type of the Refs (_handles.py): the extension's, else RefFallback;
# set with the API.
Ref: Any = RefFallback


def _load_speedups(lib: ctypes.CDLL) -> Any:
    if os.environ.get(ENV_SPEEDUPS, "1") == "0":
        return None
    try:
        from . import _speedups     # type: ignore[attr-defined]
    except ImportError:             # not built, or for another interpreter
        return None

    def address(name: str) -> int:
        return ctypes.cast(getattr(lib, name), c_void_p).value or 0
    _speedups.bind(address("tf_runtime_stream"), address("tf_runtime_sync"),
                   address("tf_download_scalar"), address("tf_with_context"))
    _speedups.bind_hot(*(address(name) for name in (
        "tf_runtime_current_slot", "tf_alloc", "tf_free", "tf_runtime_bind_slot",
        "tf_runtime_release", "tf_error_info_init", "tf_last_error", "tf_cublas_enqueue")),
        _note_replaced)
    return _speedups


def api() -> _Api:
    """The bound C API, loading the library at the first call."""
    global _api, fast, speedups, Ref
    if _api is None:
        lib, where = _library.load()
        bound = _Api(lib, where)
        fast = bound.fast
        speedups = _load_speedups(lib)
        Ref = RefFallback if speedups is None else speedups.Ref
        _api = bound
    return _api


# ---- the thread's error record ("NOTE one call's record") ----------------
#
# The library keeps one error record per OS thread, and a failing call's
# exception is built from it.  Between the failing call and the read,
# Python may run the binding's own cleanup on this thread: a garbage
# collection runs finalizers that free memory or release references (on
# CPython 3.12 and later at any function call, before 3.12 at an
# allocation), and a DLPack consumer may drop a tensor.  Two measures keep
# the record the call's own:
#
# - the read allocates nothing before tf_last_error: each thread's buffer
#   is made once (a nested read, from cleanup run meanwhile, makes its own);
# - cleanup that calls the library on its own runs through quietly(): when
#   it leaves another record behind (one of its calls failed), it notes on
#   the thread which record it replaced, and a read follows those notes,
#   newest first, back to the record the user's call left (only to one of
#   the status that call returned).  The library does the same around its
#   workspace releases.


class _Records(threading.local):
    """This thread's record buffer and cleanup notes."""

    def __init__(self) -> None:
        self.info = ErrorInfo()
        self.ref = ctypes.byref(self.info)
        self.busy = False
        # (record before, record after) of each cleanup that replaced one.
        self.replaced: List[Tuple[bytes, bytes]] = []


_records = _Records()


def _snapshot() -> bytes:
    """This thread's whole record as bytes, in a buffer of its own."""
    a = api()
    info = new_struct(ErrorInfo, a.tf_error_info_init)
    a.tf_last_error(ctypes.byref(info))
    return bytes(info)


def _note_replaced(before: bytes, after: bytes) -> None:
    """A cleanup left record `after` where `before` was."""
    _records.replaced.append((before, after))


def quietly(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), run as cleanup that no caller waits for (a finalizer, the
    release of an export): the record the thread's last failing call left
    stays the one its exception reports (see above).  The extension
    compares the records in C."""
    sp = speedups
    if sp is not None:
        return sp.quietly(fn, *args)
    before = _snapshot()
    try:
        return fn(*args)
    finally:
        after = _snapshot()
        if after != before:
            _records.replaced.append((before, after))


def last_error_info(status: Optional[int] = None) -> ErrorInfo:
    """The calling thread's whole error record, copied in one call: that of
    the last failing call made for the user, whatever cleanup ran since.
    `status` is what that call returned, when known."""
    a = api()
    records = _records
    nested = records.busy
    info = ErrorInfo() if nested else records.info
    ref = ctypes.byref(info) if nested else records.ref
    records.busy = True
    try:
        a.tf_error_info_init(ref, ctypes.sizeof(ErrorInfo))
        a.tf_last_error(ref)
        if records.replaced:
            info = _before_cleanup(info, records.replaced, status)
        return ErrorInfo.from_buffer_copy(info)
    finally:
        records.busy = nested


def _before_cleanup(info: ErrorInfo, replaced: List[Tuple[bytes, bytes]],
                    status: Optional[int]) -> ErrorInfo:
    """The record before the cleanup that left `info`, if one did."""
    now = raw = bytes(info)
    while replaced and replaced[-1][1] == raw:
        raw = replaced.pop()[0]
    replaced.clear()
    found = ErrorInfo.from_buffer_copy(raw)
    if raw == now or (status is not None and found.status != status):
        return info
    replaced.append((raw, now))        # the next read, until a new failure, too
    return found


def forget_cleanup_records() -> None:
    """Drop this thread's cleanup notes (tf_clear_last_error)."""
    _records.replaced.clear()


def error(st: int) -> errors.TenferroError:
    """The exception for failed status `st`, from the record the failing
    call left on this thread.  Call it right after the call, on the same
    thread."""
    return errors.error_from_info(st, last_error_info(st))


def fail(st: int) -> NoReturn:
    """Raise error(st)."""
    raise error(st)


def check(st: int) -> None:
    """fail(st) unless st is TF_OK."""
    if st != 0:
        fail(st)


def _integer(value: object, name: str, low: int, high: int, c_name: str) -> int:
    """`value` as an int that fits the C parameter, else TypeError or
    OverflowError (ctypes would silently truncate it)."""
    index = getattr(value, "__index__", None)
    if isinstance(value, bool) or index is None:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    number: int = index()
    if not low <= number <= high:
        raise OverflowError(f"{name}={number} does not fit the C {c_name}")
    return number


def int32(value: object, name: str) -> int:
    return _integer(value, name, -(1 << 31), (1 << 31) - 1, "int32_t")


def uint32(value: object, name: str) -> int:
    return _integer(value, name, 0, (1 << 32) - 1, "uint32_t")


def uint64(value: object, name: str) -> int:
    return _integer(value, name, 0, (1 << 64) - 1, "uint64_t")


def size(value: object, name: str) -> int:
    return _integer(value, name, 0, (1 << (8 * ctypes.sizeof(c_size_t))) - 1, "size_t")


def dims(values: Sequence[object], name: str) -> Tuple[int, ...]:
    """A tuple of non-negative ints that fit size_t."""
    return tuple(size(v, name) for v in values)

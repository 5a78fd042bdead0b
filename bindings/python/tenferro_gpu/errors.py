# SPDX-License-Identifier: MIT OR Apache-2.0
"""Statuses and the exceptions that carry them.

Every failing call raises an instance of the subclass of TenferroError named
for its status.  The exception carries the library's whole error record,
copied with tf_last_error on the failing thread right after the call:

    try:
        rt.sync()
    except tenferro_gpu.DeviceFaultError as e:
        print(e.status, e.operation, e.call, e.code, e.code_domain, e.message)
"""

from __future__ import annotations

import enum
from typing import Any, Dict, Tuple, Type, Union


class Status(enum.IntEnum):
    """enum tf_status_code: values are never renumbered."""
    OK = 0
    INVALID_ARGUMENT = 1
    INVALID_HANDLE = 2
    DRIVER_NOT_FOUND = 3
    DRIVER_STUB = 4
    NO_DEVICE = 5
    DEVICE_UNAVAILABLE = 6
    DRIVER_TOO_OLD = 7
    CUDA = 8
    NOT_SUPPORTED = 9
    LIBRARY_NOT_FOUND = 10
    PROVIDER = 11
    CALLBACK = 12
    OUT_OF_MEMORY = 13
    RUNTIME_STATE = 14
    DEVICE_FAULT = 15
    COMPILE = 16
    INTERNAL = 17


class CodeDomain(enum.IntEnum):
    """enum tf_code_domain: what TenferroError.code means."""
    NONE = 0
    CUDA = 1
    CUBLAS = 2
    NVRTC = 3
    CALLBACK = 4
    SYSTEM = 5


def _known(enum_type: Any, value: int) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        return value   # a value from a newer library: kept as a plain int


def _name(value: object) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return str(value)


class TenferroError(Exception):
    """Base of every error the library reports.

    Attributes:
        status: the Status (a plain int for a status newer than this binding).
        operation: the public function that failed ("tf_runtime_sync").
        call: the call inside it that failed ("cuStreamSynchronize",
            "callback"), or "" when the library itself refused.
        code: the numeric CUDA, cuBLAS or NVRTC result, callback value or
            errno, per code_domain; 0 if none.
        code_domain: the CodeDomain of code.
        message: the library's full message, starting with the operation.
    """

    status: Union[Status, int]
    code_domain: Union[CodeDomain, int]

    def __init__(self, status: int, operation: str, call: str, code: int,
                 code_domain: int, message: str) -> None:
        super().__init__(message)
        self.status = _known(Status, status)
        self.operation = operation
        self.call = call
        self.code = code
        self.code_domain = _known(CodeDomain, code_domain)
        self.message = message

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...], Dict[str, Any]]:
        # Every field, those set after construction (CompileError.log) too.
        return (type(self), (int(self.status), self.operation, self.call,
                             self.code, int(self.code_domain), self.message),
                dict(vars(self)))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(status={_name(self.status)}, operation="
                f"{self.operation!r}, call={self.call!r}, code={self.code}, "
                f"code_domain={_name(self.code_domain)}, message={self.message!r})")


class InvalidArgumentError(TenferroError, ValueError):
    """TF_ERROR_INVALID_ARGUMENT (also a ValueError)."""


class InvalidHandleError(TenferroError):
    """TF_ERROR_INVALID_HANDLE"""


class DriverNotFoundError(TenferroError):
    """TF_ERROR_DRIVER_NOT_FOUND"""


class DriverStubError(TenferroError):
    """TF_ERROR_DRIVER_STUB"""


class NoDeviceError(TenferroError):
    """TF_ERROR_NO_DEVICE"""


class DeviceUnavailableError(TenferroError):
    """TF_ERROR_DEVICE_UNAVAILABLE"""


class DriverTooOldError(TenferroError):
    """TF_ERROR_DRIVER_TOO_OLD"""


class CudaError(TenferroError):
    """TF_ERROR_CUDA: code is the CUresult."""


class NotSupportedError(TenferroError):
    """TF_ERROR_NOT_SUPPORTED"""


class LibraryNotFoundError(TenferroError):
    """TF_ERROR_LIBRARY_NOT_FOUND: cuBLAS or NVRTC could not be loaded."""


class ProviderError(TenferroError):
    """TF_ERROR_PROVIDER: code is the cuBLAS or NVRTC status."""


class CallbackError(TenferroError):
    """TF_ERROR_CALLBACK.  A Python callable that raised is not reported
    this way: its own exception is re-raised instead."""


class OutOfMemoryError(TenferroError, MemoryError):
    """TF_ERROR_OUT_OF_MEMORY (also a MemoryError)."""


class RuntimeStateError(TenferroError):
    """TF_ERROR_RUNTIME_STATE"""


class DeviceFaultError(TenferroError):
    """TF_ERROR_DEVICE_FAULT: the runtime's context is unusable; close the
    runtime."""


class CompileError(TenferroError):
    """TF_ERROR_COMPILE: NVRTC rejected the source.  Runtime.compile() sets
    `log` to NVRTC's whole log (the message has only its start); pickling
    keeps it."""

    log = ""


class InternalError(TenferroError):
    """TF_ERROR_INTERNAL: a bug in the library."""


ERROR_CLASSES: Dict[int, Type[TenferroError]] = {
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.INVALID_HANDLE: InvalidHandleError,
    Status.DRIVER_NOT_FOUND: DriverNotFoundError,
    Status.DRIVER_STUB: DriverStubError,
    Status.NO_DEVICE: NoDeviceError,
    Status.DEVICE_UNAVAILABLE: DeviceUnavailableError,
    Status.DRIVER_TOO_OLD: DriverTooOldError,
    Status.CUDA: CudaError,
    Status.NOT_SUPPORTED: NotSupportedError,
    Status.LIBRARY_NOT_FOUND: LibraryNotFoundError,
    Status.PROVIDER: ProviderError,
    Status.CALLBACK: CallbackError,
    Status.OUT_OF_MEMORY: OutOfMemoryError,
    Status.RUNTIME_STATE: RuntimeStateError,
    Status.DEVICE_FAULT: DeviceFaultError,
    Status.COMPILE: CompileError,
    Status.INTERNAL: InternalError,
}


def error_class(status: int) -> Type[TenferroError]:
    """The exception class for a status (TenferroError for unknown ones)."""
    return ERROR_CLASSES.get(status, TenferroError)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def error_from_info(status: int, info: Any) -> TenferroError:
    """The exception for `status` from a tf_error_info.  If the record is
    not about this status (it cannot be, by the library's contract) the
    status still wins and the message says the record was missing."""
    if info.status == status:
        return error_class(status)(
            status, _text(info.operation), _text(info.call), info.code,
            info.code_domain, _text(info.message))
    return error_class(status)(
        status, "", "", 0, CodeDomain.NONE,
        f"status {status} without an error record on this thread")

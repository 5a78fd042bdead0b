# SPDX-License-Identifier: MIT OR Apache-2.0
"""DLPack's C structs (dlpack.h, ABI version 1) and the PyCapsule calls
both directions of the protocol need.

A producer hands out a PyCapsule named "dltensor" holding a
DLManagedTensor * (or "dltensor_versioned" holding a
DLManagedTensorVersioned *, when the consumer passed max_version >= (1, 0)).
The consumer renames the capsule "used_dltensor" / "used_dltensor_versioned"
once it owns the tensor and calls the tensor's deleter when done; a capsule
destroyed unconsumed calls the deleter itself (its destructor, here).
"""

from __future__ import annotations

import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_int64,
                    c_uint8, c_uint16, c_uint32, c_uint64, c_void_p, py_object)
from typing import Any, Callable, Optional

# DLDeviceType
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13

# DLManagedTensorVersioned.flags
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1

# The version this binding produces, and the newest major it reads.
VERSION = (1, 0)

NAME = b"dltensor"
NAME_VERSIONED = b"dltensor_versioned"
USED = b"used_dltensor"
USED_VERSIONED = b"used_dltensor_versioned"


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


# void (*deleter)(struct DLManagedTensor *self)
DELETER = CFUNCTYPE(None, c_void_p)


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", DELETER)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", DELETER),
        ("flags", c_uint64),
        ("dl_tensor", DLTensor),
    ]


def _api(name: str, restype: Any, *argtypes: Any) -> Callable[..., Any]:
    """A Python C-API function as a fresh ctypes object (pythonapi's own
    attribute is shared with any other user of ctypes)."""
    fn = ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))
    return fn


# The capsule calls; a destructor is given as its address (or None).
capsule_new = _api("PyCapsule_New", py_object, c_void_p, c_char_p, c_void_p)
capsule_name = _api("PyCapsule_GetName", c_char_p, py_object)
capsule_pointer = _api("PyCapsule_GetPointer", c_void_p, py_object, c_char_p)
capsule_set_name = _api("PyCapsule_SetName", c_int, py_object, c_char_p)
# A reference made or dropped by hand (a tensor's manager_ctx).
incref = _api("Py_IncRef", None, py_object)
decref = _api("Py_DecRef", None, py_object)


def is_capsule(obj: object) -> bool:
    return type(obj).__name__ == "PyCapsule"


def call_deleter(address: int, versioned: bool) -> None:
    """Run the deleter of the (versioned) managed tensor at `address`, if it
    has one."""
    struct = DLManagedTensorVersioned if versioned else DLManagedTensor
    managed = struct.from_address(address)
    deleter: Optional[Any] = managed.deleter
    if deleter:
        deleter(address)

# SPDX-License-Identifier: MIT OR Apache-2.0
"""Element types of device buffers, and how each protocol spells them.

A DType knows its size, its __array_interface__ type string ("<f4"), its
DLPack (code, bits, lanes) and its struct module format for reading one
value.  dtype() accepts what users have at hand: a name ("float32"), a
type string ("<f4", "f4"), a NumPy character code ("f"), a NumPy dtype or
scalar type, a PyTorch dtype (torch.float32), or the Python types bool,
int (int64), float (float64) and complex (complex128).

Only little-endian machines are supported (Linux on x86-64 and AArch64),
so every multi-byte type string starts with "<".
"""

from __future__ import annotations

import struct
from typing import Dict, Optional, Tuple

# DLDataTypeCode of dlpack.h
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_COMPLEX, DL_BOOL = 0, 1, 2, 4, 5, 6


class DType:
    """One element type.  Compares equal to anything dtype() maps to it:
    DType("float32") == "float32" == "<f4"."""

    __slots__ = ("name", "itemsize", "typestr", "dlpack", "format", "_struct")

    name: str
    itemsize: int
    typestr: Optional[str]
    dlpack: Tuple[int, int, int]
    format: str
    _struct: struct.Struct

    def __init__(self, name: str, itemsize: int, typestr: Optional[str],
                 dlpack: Tuple[int, int, int], format: str) -> None:
        self.name = name
        self.itemsize = itemsize
        # The __cuda_array_interface__ type string; None for bfloat16,
        # which that protocol cannot describe.
        self.typestr = typestr
        self.dlpack = dlpack
        self.format = format
        self._struct = struct.Struct("<" + format)

    def unpack(self, raw: bytes) -> object:
        """The Python value of one element's bytes."""
        values = self._struct.unpack_from(raw)
        if self.name == "bfloat16":   # the high half of a float32
            return float(struct.unpack("<f", struct.pack("<I", values[0] << 16))[0])
        if len(values) == 2:
            return complex(values[0], values[1])
        return values[0]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return other.name == self.name
        try:
            return dtype(other).name == self.name
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"tenferro_gpu.dtype({self.name!r})"

    def __str__(self) -> str:
        return self.name


_TABLE = (
    DType("bool", 1, "|b1", (DL_BOOL, 8, 1), "?"),
    DType("int8", 1, "|i1", (DL_INT, 8, 1), "b"),
    DType("int16", 2, "<i2", (DL_INT, 16, 1), "h"),
    DType("int32", 4, "<i4", (DL_INT, 32, 1), "i"),
    DType("int64", 8, "<i8", (DL_INT, 64, 1), "q"),
    DType("uint8", 1, "|u1", (DL_UINT, 8, 1), "B"),
    DType("uint16", 2, "<u2", (DL_UINT, 16, 1), "H"),
    DType("uint32", 4, "<u4", (DL_UINT, 32, 1), "I"),
    DType("uint64", 8, "<u8", (DL_UINT, 64, 1), "Q"),
    DType("float16", 2, "<f2", (DL_FLOAT, 16, 1), "e"),
    DType("bfloat16", 2, None, (DL_BFLOAT, 16, 1), "H"),
    DType("float32", 4, "<f4", (DL_FLOAT, 32, 1), "f"),
    DType("float64", 8, "<f8", (DL_FLOAT, 64, 1), "d"),
    DType("complex64", 8, "<c8", (DL_COMPLEX, 64, 1), "2f"),
    DType("complex128", 16, "<c16", (DL_COMPLEX, 128, 1), "2d"),
)

_BY_NAME: Dict[str, DType] = {}
for _t in _TABLE:
    _BY_NAME[_t.name] = _t
    if _t.typestr is not None:
        _BY_NAME[_t.typestr] = _t
        _BY_NAME[_t.typestr[1:]] = _t                 # "f4"
        _BY_NAME["=" + _t.typestr[1:]] = _t
        if _t.itemsize == 1:
            _BY_NAME["<" + _t.typestr[1:]] = _t
# NumPy's one-character codes (64-bit Linux: "l" is int64) and the Python
# types' names.
for _code, _name in (("?", "bool"), ("b", "int8"), ("h", "int16"), ("i", "int32"),
                     ("l", "int64"), ("q", "int64"), ("B", "uint8"), ("H", "uint16"),
                     ("I", "uint32"), ("L", "uint64"), ("Q", "uint64"), ("e", "float16"),
                     ("f", "float32"), ("d", "float64"), ("F", "complex64"),
                     ("D", "complex128"), ("int", "int64"), ("float", "float64"),
                     ("complex", "complex128"), ("half", "float16"), ("single", "float32"),
                     ("double", "float64"), ("bool_", "bool")):
    _BY_NAME[_code] = _BY_NAME[_name]

_BY_DLPACK = {t.dlpack: t for t in _TABLE}
_BY_KIND_SIZE = {(t.typestr[1], t.itemsize): t for t in _TABLE if t.typestr is not None}


def dtype(spec: object) -> DType:
    """The DType for `spec` (see the module's description).  Raises
    TypeError for anything else."""
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, str):
        name = spec[6:] if spec.startswith("torch.") else spec
        found = _BY_NAME.get(name)
        if found is not None:
            return found
    elif isinstance(spec, type) and spec.__name__ in _BY_NAME:   # float, numpy.float32
        return _BY_NAME[spec.__name__]
    else:
        typestr = getattr(spec, "str", None)                    # a NumPy dtype
        if isinstance(typestr, str) and typestr in _BY_NAME:
            return _BY_NAME[typestr]
        text = str(spec)                                        # torch.float32
        if text.startswith("torch.") and text[6:] in _BY_NAME:
            return _BY_NAME[text[6:]]
    raise TypeError(f"not an element type tenferro_gpu knows: {spec!r} (use one of "
                    f"{', '.join(t.name for t in _TABLE)})")


def from_typestr(typestr: str) -> DType:
    """The DType of an __array_interface__ type string ("<f4", "|u1")."""
    if typestr[:1] == ">" and typestr[2:] != "1":
        raise TypeError(f"big-endian data ({typestr!r}) is not supported")
    found = _BY_KIND_SIZE.get((typestr[1:2], int(typestr[2:] or 0)))
    if found is None:
        raise TypeError(f"unsupported __cuda_array_interface__ typestr {typestr!r}")
    return found


def from_dlpack(code: int, bits: int, lanes: int) -> DType:
    """The DType of a DLDataType."""
    found = _BY_DLPACK.get((code, bits, lanes))
    if found is None:
        raise TypeError(f"unsupported DLPack data type (code {code}, bits {bits}, "
                        f"lanes {lanes})")
    return found


def from_buffer_format(fmt: str, itemsize: int) -> DType:
    """The DType of a buffer-protocol format ("f", "<d", "Zf") of `itemsize`
    bytes, as memoryview(numpy_array).format gives it."""
    code = fmt.lstrip("@=<>!")
    kind = {"?": "b", "e": "f", "f": "f", "d": "f", "Zf": "c", "Zd": "c"}.get(code)
    if kind is None and len(code) == 1 and code in "bhilqnBHILQN":
        kind = "u" if code.isupper() else "i"
    found = _BY_KIND_SIZE.get((kind or "", itemsize))
    if found is None:
        raise TypeError(f"cannot tell the element type of buffer format {fmt!r} "
                        f"({itemsize}-byte items); pass dtype=")
    return found

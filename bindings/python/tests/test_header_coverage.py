# SPDX-License-Identifier: MIT OR Apache-2.0
"""Every public function of include/tenferro_gpu.h is either bound (declared
in tenferro_gpu/_capi.py and called by a wrapper) or listed with a reason in
UNBOUND.txt, never both; and the ctypes structs have the library's sizes."""

import ctypes
import os
import re

from tenferro_gpu import _capi
import support

PACKAGE = os.path.join(support.REPO, "bindings", "python", "tenferro_gpu")


def _header_functions():
    with open(os.path.join(support.REPO, "include", "tenferro_gpu.h")) as f:
        text = f.read()
    # Declarations only: comments and preprocessor lines name functions too.
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    return set(re.findall(r"\bTF_API\b[^;{]*?\b(tf_\w+)\s*\(", text))


def _unbound():
    listed = {}
    path = os.path.join(support.REPO, "bindings", "python", "UNBOUND.txt")
    with open(path) as f:
        for line in f:
            name, sep, reason = line.partition(":")
            assert sep and reason.strip(), f"UNBOUND.txt: {line!r} lacks a reason"
            listed[name.strip()] = reason.strip()
    return listed


def test_every_header_function_is_bound_or_listed():
    header = _header_functions()
    assert len(header) >= 70
    declared = {name for name, _, _ in _capi.PROTOTYPES}
    unbound = set(_unbound())
    assert declared & unbound == set()
    assert header - declared - unbound == set(), "neither bound nor in UNBOUND.txt"
    assert (declared | unbound) - header == set(), "not in the header"


def test_every_declared_function_is_called_by_a_wrapper():
    sources = ""
    for name in os.listdir(PACKAGE):
        if name.endswith(".py") and name != "_capi.py":
            with open(os.path.join(PACKAGE, name)) as f:
                sources += f.read()
    with open(os.path.join(PACKAGE, "_capi.py")) as f:
        capi_body = f.read().split("PROTOTYPES = (", 1)[1].split("\n)\n", 1)[1]
    for name, _, _ in _capi.PROTOTYPES:
        assert re.search(rf"\b{name}\b", sources + capi_body), f"{name} is declared but unused"


# C types of the header's struct fields -> ctypes
_C_TYPES = {"uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32,
            "tf_status": ctypes.c_int32, "uint64_t": ctypes.c_uint64,
            "uint8_t": ctypes.c_uint8, "char": ctypes.c_char}
_CAPACITIES = {"TF_ERROR_NAME_CAPACITY": _capi.ERROR_NAME_CAPACITY,
               "TF_ERROR_MESSAGE_CAPACITY": _capi.ERROR_MESSAGE_CAPACITY,
               "TF_DEVICE_NAME_CAPACITY": _capi.DEVICE_NAME_CAPACITY}
STRUCTS = {"tf_error_info": _capi.ErrorInfo,
           "tf_device_properties": _capi.DevicePropertiesStruct,
           "tf_runtime_options": _capi.RuntimeOptionsStruct,
           "tf_retirement_stats": _capi.RetirementStatsStruct,
           "tf_host_pool_stats": _capi.HostPoolStatsStruct,
           "tf_memory_pool_stats": _capi.MemoryPoolStatsStruct,
           "tf_launch_config": _capi.LaunchConfigStruct,
           "tf_compile_options": _capi.CompileOptionsStruct}


def _header_struct(text, name):
    """[(field, size)] of `typedef struct name {...}` in the header."""
    body = re.search(rf"typedef struct {name} \{{(.*?)\}} {name};", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = []
    for decl in filter(None, (d.strip() for d in body.split(";"))):
        m = re.fullmatch(r"(.*?)\b(\w+)\s*(?:\[(\w+)\])?", decl, re.S)
        ctype, field, count = m.group(1).strip(), m.group(2), m.group(3)
        if "*" in ctype:
            size = ctypes.sizeof(ctypes.c_void_p)
        else:
            size = ctypes.sizeof(_C_TYPES[ctype])
        if count:
            size *= int(_CAPACITIES.get(count, count))
        fields.append((field, size))
    return fields


def test_ctypes_structs_have_the_headers_fields():
    with open(os.path.join(support.REPO, "include", "tenferro_gpu.h")) as f:
        text = f.read()
    declared = set(re.findall(r"typedef struct (tf_\w+) \{", text))
    assert declared == set(STRUCTS), "a struct of the header has no ctypes twin"
    for name, struct in STRUCTS.items():
        mine = [(f, ctypes.sizeof(t)) for f, t, *_ in struct._fields_]
        assert mine == _header_struct(text, name), name


def test_each_init_writes_its_defaults_at_the_bindings_offsets():
    # The library writes struct_size = the size the binding passes and its
    # defaults at its own offsets: they land in the binding's fields only
    # if both layouts agree.
    api = _capi.api()
    o = _capi.new_struct(_capi.RuntimeOptionsStruct, api.tf_runtime_options_init)
    assert o.struct_size == ctypes.sizeof(o)
    assert (o.stream_slots, o.cublas_workspace_bytes, o.retirement_capacity,
            o.flags, o.download_threads, o.download_chunk_bytes,
            o.memory_release_threshold, o.memory_reserved_limit) == (8, 32 << 20, 1024, 0, 0, 0,
                                                                     0, 0)
    c = _capi.new_struct(_capi.LaunchConfigStruct, api.tf_launch_config_init)
    assert [getattr(c, f) for f, _ in c._fields_[1:]] == [1, 1, 1, 1, 1, 1, 0]
    for struct, init in ((_capi.ErrorInfo, api.tf_error_info_init),
                         (_capi.DevicePropertiesStruct, api.tf_device_properties_init),
                         (_capi.RetirementStatsStruct, api.tf_retirement_stats_init),
                         (_capi.HostPoolStatsStruct, api.tf_host_pool_stats_init),
                         (_capi.CompileOptionsStruct, api.tf_compile_options_init)):
        value = _capi.new_struct(struct, init)
        assert value.struct_size == ctypes.sizeof(struct), struct.__name__
        assert bytes(value)[4:] == bytes(ctypes.sizeof(struct) - 4), struct.__name__
    info = _capi.new_struct(_capi.DevicePropertiesStruct, api.tf_device_properties_init)
    assert api.tf_device_info(0, ctypes.byref(info)) == 0
    assert info.ordinal == 0 and info.name and info.total_memory_bytes > 0
    assert info.compute_capability_major >= 7 and info.pci_device_id >= 0

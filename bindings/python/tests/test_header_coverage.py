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
    assert len(header) >= 34
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


def test_struct_layouts_match_the_library():
    # Each *_init writes sizeof(struct) as the library was compiled.
    api = _capi.api()
    for struct, init in ((_capi.ErrorInfo, api.tf_error_info_init),
                         (_capi.DevicePropertiesStruct, api.tf_device_properties_init),
                         (_capi.RuntimeOptionsStruct, api.tf_runtime_options_init)):
        value = struct()
        init(ctypes.byref(value))
        assert value.struct_size == ctypes.sizeof(struct), struct.__name__

# SPDX-License-Identifier: MIT OR Apache-2.0
"""Devices: whether a GPU is usable, how many, and what each one is."""

from __future__ import annotations

import ctypes
import dataclasses
import uuid as _uuid
from typing import Any, Callable, List, Tuple

from . import _capi, _library


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """What the driver reports about one device (tf_device_properties)."""
    ordinal: int
    name: str
    uuid: _uuid.UUID
    compute_capability: Tuple[int, int]
    total_memory_bytes: int
    multiprocessor_count: int
    pci_domain_id: int
    pci_bus_id: int
    pci_device_id: int

    @property
    def uuid_string(self) -> str:
        """The UUID as nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-..."."""
        return f"GPU-{self.uuid}"

    @classmethod
    def _from_struct(cls, s: Any) -> "DeviceProperties":
        return cls(
            ordinal=s.ordinal,
            name=s.name.decode("utf-8", "replace"),
            uuid=_uuid.UUID(bytes=bytes(s.uuid)),
            compute_capability=(s.compute_capability_major,
                                s.compute_capability_minor),
            total_memory_bytes=s.total_memory_bytes,
            multiprocessor_count=s.multiprocessor_count,
            pci_domain_id=s.pci_domain_id,
            pci_bus_id=s.pci_bus_id,
            pci_device_id=s.pci_device_id,
        )


def _query(fill: Callable[[Any, Any], int]) -> DeviceProperties:
    """Run fill(api, byref(struct)) -> status on an initialised struct."""
    api = _capi.api()
    s = _capi.new_struct(_capi.DevicePropertiesStruct, api.tf_device_properties_init)
    _capi.check(fill(api, ctypes.byref(s)))
    return DeviceProperties._from_struct(s)


def gpu_available() -> bool:
    """True when this process can use a CUDA device (a runtime on device 0
    can be created and synchronized).  Never raises: False without a GPU,
    without a driver, and without the tenferro-gpu library itself (or with
    one this binding cannot use); use it to skip GPU work.  The other
    calls then say why (LoadError, DriverNotFoundError, ...)."""
    try:
        api = _capi.api()
    except _library.LoadError:
        return False
    return bool(api.tf_gpu_available())


def device_count() -> int:
    """Number of CUDA devices (0 when the driver reports none).  Creates no
    context.  Raises DriverNotFoundError, DriverStubError, ..."""
    count = ctypes.c_int32()
    _capi.check(_capi.api().tf_device_count(ctypes.byref(count)))
    return count.value


def device_info(ordinal: int) -> DeviceProperties:
    """DeviceProperties of device `ordinal`.  Creates no context.  Raises
    DeviceUnavailableError (no such ordinal; the message lists the devices),
    InvalidArgumentError (negative), and the statuses of device_count()."""
    ordinal = _capi.int32(ordinal, "ordinal")
    return _query(lambda api, out: int(api.tf_device_info(ordinal, out)))


def devices() -> List[DeviceProperties]:
    """DeviceProperties of every device, in ordinal order."""
    return [device_info(i) for i in range(device_count())]

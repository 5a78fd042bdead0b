# SPDX-License-Identifier: MIT OR Apache-2.0
"""Keeping host memory after a copy that failed while the device may still
run it.

tf_download and tf_upload say: after a failure other than
TF_ERROR_INVALID_ARGUMENT (for tf_upload: nor TF_ERROR_RUNTIME_STATE, the
refusal inside a capture among them, after which nothing was queued), a
page-locked destination (source) may still be
written (read) by the device: keep it until a later tf_runtime_sync of the
slot returns TF_OK, or leak it.  The binding keeps it until the device has
passed the copy, which the release of a retirement queued right after it
on the same slot says (a later sync, poll or retire that finds it passed):
a page-locked block or registered range of the binding with a hold on its
Claims (close() and garbage collection then wait for the release, and a
free never hands the block out again early), any other memory by keeping
its buffer exported and referenced.  When the retirement cannot be queued
(the device is lost) the hold is never released: the memory is leaked.
The retirement holds no runtime reference ("NOTE the last reference
drains" in _runtimes.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Sequence

from . import _callbacks, _claims
from ._buffers import Export

if TYPE_CHECKING:
    from .runtime import Runtime

# Holds whose retirement was refused: never released.
_leaked: List[Any] = []


def keep_host(runtime: "Runtime", address: int, nbytes: int, obj: object) -> None:
    """Keep the host memory [address, address + nbytes) of `obj` until the
    device has passed the work queued so far on the slot `runtime` uses."""
    holds = _claims.host_claims(address, nbytes)
    keep: List[object] = []
    if not holds:
        try:
            keep.append(Export(obj, writable=False))
        except (TypeError, BufferError):
            keep.append(obj)
    retire(runtime, holds, keep)


def retire(runtime: "Runtime", holds: Sequence[_claims.Claims], keep: List[object]) -> None:
    """Acquire `holds` and keep `keep` until the device has passed the work
    queued so far on the slot `runtime` uses (never, if that cannot be
    queued)."""
    for claims in holds:
        claims.acquire()
    st = _callbacks.retirement(runtime, _release, (list(holds), keep))
    if st != 0:
        _leaked.append((list(holds), keep))


def _release(holds: List[_claims.Claims], keep: List[object]) -> None:
    for claims in holds:
        claims.release()
    for item in keep:
        if isinstance(item, Export):
            item.release()
    keep.clear()

# SPDX-License-Identifier: MIT OR Apache-2.0
"""DeviceBuffer: device memory with an element type and a shape, its
views, and the array protocols other libraries read it through.

    buf = rt.empty((4, 6), "float32")         # owns a tf_alloc allocation
    row = buf[1]                              # a view: shares the memory
    cols = buf[:, ::2]                        # a strided view
    torch.as_tensor(buf, device="cuda")       # __cuda_array_interface__
    torch.from_dlpack(cols)                   # __dlpack__, no copy

An allocation is freed when free() is called on the buffer that made it,
or once nothing uses it any more: the buffer, every view of it, and every
tensor another library made from it (those hold a reference until they go).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Sequence, Tuple, Union

from . import _callbacks, _capi, _claims, _dtypes, _handles, _leases, _runtimes
from ._dtypes import DType

if TYPE_CHECKING:
    from .runtime import Runtime

Shape = Tuple[int, ...]
Index = Union[int, slice, "ellipsis", Tuple[Union[int, slice, "ellipsis"], ...]]


def _free_on_slot(handle: Any, ptr: int, slot: int) -> int:
    """tf_free of `ptr` in order on stream slot `slot` of the runtime whose
    handle (a Ref, or an int the caller holds) is given, whichever thread
    runs this.  Returns the status."""
    sp = _capi.speedups
    if sp is not None:
        st: int = sp.free_on_slot(handle, ptr, slot)
        return 1 if st == _capi.CLOSED else st
    api = _capi.api()
    current = ctypes.c_int32(-1)
    api.tf_runtime_current_slot(handle, ctypes.byref(current))
    if current.value == slot:
        return int(api.tf_free(handle, ptr))
    bound = ctypes.c_void_p()
    st = int(api.tf_runtime_bind_slot(handle, slot, ctypes.byref(bound)))
    if st != 0:
        return st
    try:
        return int(api.tf_free(bound.value, ptr))
    finally:
        api.tf_runtime_release(bound.value)


def _alloc_on_call_slot(runtime: "Runtime", nbytes: int) -> Tuple[int, int]:
    """tf_alloc of `nbytes` on the slot this call on `runtime` uses ->
    (address, slot); raises the library's error."""
    sp = _capi.speedups
    if sp is not None:
        got = sp.alloc(runtime._active(), nbytes)
        if type(got) is int:
            runtime._target()._fail(got)
        return got       # type: ignore[no-any-return]
    slot = runtime.current_slot
    out = ctypes.c_uint64()
    _capi.check(_capi.api().tf_alloc(runtime._active(), nbytes, ctypes.byref(out)))
    return out.value, slot


def _free_device(ptr: int, slot: int, identity: int, owner: "weakref.ref[Runtime]") -> int:
    """An allocation's free (its Claims'): tf_free on its slot, then its
    lease of the owner ends."""
    return _runtimes.free_through(identity, owner,
                                  lambda handle: _free_on_slot(handle, ptr, slot), _leases.end)


def _allocate(runtime: "Runtime", nbytes: int) -> "_Allocation":
    """A tf_alloc allocation of `nbytes` on the slot this call on `runtime`
    uses, leasing its owner (_leases.py)."""
    owner = _leases.lease(runtime)
    try:
        ptr, slot = _alloc_on_call_slot(runtime, nbytes)
    except BaseException:
        _leases.end(owner)
        raise
    return _Allocation(owner, ptr, nbytes, slot)


def _retirement_passed(claims: _claims.Claims) -> None:
    """The release of DeviceBuffer.retire: the claim the buffer handed over
    ends."""
    claims.release()


class _Allocation:
    """One tf_alloc allocation, freed exactly once (NOTE memory is freed
    once): its buffer's claim ends with free(), retire()'s release, or when
    this object is garbage (__del__) or the interpreter exits (_exit); its
    exports (DLPack tensors, objects read through
    __cuda_array_interface__) hold it until they go."""

    __slots__ = ("ptr", "nbytes", "owner", "slot", "claims", "_claimed", "_key",
                 "__weakref__")

    ptr: Optional[int]          # None once freed or retired
    nbytes: int
    owner: "Runtime"            # shared: NOTE one owner per runtime object
    slot: int
    claims: _claims.Claims
    _claimed: bool              # the buffer still has its claim
    _key: int                   # _handles.track's

    def __init__(self, owner: "Runtime", ptr: int, nbytes: int, slot: int) -> None:
        self.ptr, self.nbytes, self.owner, self.slot = ptr, nbytes, owner, slot
        self.claims = _claims.Claims(functools.partial(
            _free_device, ptr, slot, owner._identity, weakref.ref(owner)))
        self._claimed = True
        self._key = _handles.track(self)

    def _take_claim(self) -> bool:
        """Whether the buffer's claim was still held (and is now taken)."""
        with _claims.lock:
            held, self._claimed = self._claimed, False
        return held

    def __del__(self, untrack: Callable[[int], None] = _handles.untrack) -> None:
        # The default argument, not the module global: __del__ may run
        # after _exit, while the interpreter clears the modules.
        untrack(self._key)
        if self._claimed and self._take_claim():
            self.claims.release_quietly()

    def _exit(self) -> None:
        """At interpreter exit: freed while the runtime is open."""
        self.ptr = None
        if self._take_claim():
            self.claims.release_quietly()

    def free(self) -> None:
        self.ptr = None
        if self._take_claim():
            _capi.check(self.claims.release())

    def retire(self) -> None:
        """Hand the buffer's claim to the retirement queue of the slot this
        call uses; its release ends the claim once the device has passed
        the work queued there.  The release holds no runtime reference."""
        if not self._take_claim():
            return
        ptr, self.ptr = self.ptr, None
        st = _callbacks.retirement(self.owner, _retirement_passed, (self.claims,))
        if st in (1, 2):  # INVALID_ARGUMENT / INVALID_HANDLE: still ours
            self.ptr = ptr
            self._claimed = True
        # Any other failure: the claim is never released, the memory leaked.
        _capi.check(st)

    def pin(self, holder: object) -> None:
        """An export: the memory stays until `holder` is garbage."""
        self.claims.acquire()
        weakref.finalize(holder, self.claims.release_quietly)


def _contiguous_strides(shape: Shape) -> Shape:
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _is_contiguous(shape: Shape, strides: Shape) -> bool:
    """C order, ignoring the strides of dimensions of one element."""
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 0:
            return True
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def _product(values: Sequence[int]) -> int:
    n = 1
    for v in values:
        n *= v
    return n


class DeviceBuffer:
    """Device memory from tf_alloc with an element type and a shape, or a
    view of another DeviceBuffer's memory.

    rt.alloc(nbytes) gives `nbytes` bytes (dtype uint8, shape (nbytes,));
    rt.empty(shape, dtype) a typed array; rt.to_device(array) a copy of a
    host array.  Indexing (buf[2], buf[1:3, ::2]) and view(dtype) /
    reshape(shape) make views: they share the memory and keep it alive.
    Steps must be positive; a strided view is read by other libraries
    through __cuda_array_interface__ and DLPack, while the binding's own
    transfers need contiguous memory.

    free() (or leaving a `with` block, or garbage collection of the buffer
    and its views) releases the memory with tf_free, in order on the stream
    slot it was allocated from, so work queued there before still sees it;
    work the binding queued with it on other slots was recorded
    (pool.py) and the free waits for it; other work on other slots must be
    recorded (record_use) or finished first (Runtime.slot_wait, an Event,
    or Runtime.sync on that slot).  retire()
    instead frees it once the device has passed the work queued so far,
    without waiting.  Only the buffer that made the allocation can free or
    retire it; after that it and its views raise ValueError.  A consumer
    that still holds the memory keeps it (NOTE memory is freed once): a
    DLPack tensor until its deleter runs, an object whose
    __cuda_array_interface__ was read until it is garbage; the free then
    happens when the last of them lets go.

    The allocation holds a reference to its runtime, which stays alive
    until the memory is freed.  With memory pools
    (Capability.STREAM_ORDERED_ALLOC) the memory is usable at once by later
    work on the allocating slot, by other slots and the host after a sync
    of that slot; the contents start uninitialized.
    """

    __slots__ = ("_alloc", "_offset", "_dtype", "_shape", "_strides", "_base",
                 "_nbytes", "_contiguous", "_head", "_address", "_cptr", "_exported",
                 "__weakref__")

    _alloc: _Allocation
    _offset: int
    _dtype: DType
    _shape: Shape
    _strides: Shape          # in elements
    _base: Optional["DeviceBuffer"]
    _nbytes: int
    _contiguous: bool
    # Bytes readable as one block from the first element: nbytes when
    # contiguous, else 0 (download_scalar's one comparison).
    _head: int
    # The address as an int and as a ready ctypes argument, for
    # download_scalar (valid while _alloc.ptr is not None).
    _address: int
    _cptr: ctypes.c_uint64
    # Whether __cuda_array_interface__ was read: the object then pins the
    # memory until it is garbage.
    _exported: bool

    def __init__(self, runtime: "Runtime", nbytes: int) -> None:
        nbytes = _capi.size(nbytes, "nbytes")
        self._set(_allocate(runtime, nbytes), 0, _dtypes.dtype("uint8"), (nbytes,), (1,),
                  None)

    @classmethod
    def _empty(cls, runtime: "Runtime", shape: Shape, dtype: DType) -> "DeviceBuffer":
        buf = cls.__new__(cls)
        buf._set(_allocate(runtime, _product(shape) * dtype.itemsize), 0, dtype, shape,
                 _contiguous_strides(shape), None)
        return buf

    def _set(self, alloc: _Allocation, offset: int, dtype: DType, shape: Shape,
             strides: Shape, base: Optional["DeviceBuffer"]) -> None:
        self._alloc, self._offset, self._dtype = alloc, offset, dtype
        self._shape, self._strides, self._base = shape, strides, base
        self._nbytes = _product(shape) * dtype.itemsize
        self._contiguous = _is_contiguous(shape, strides)
        self._head = self._nbytes if self._contiguous else 0
        self._address = (alloc.ptr or 0) + offset
        self._cptr = ctypes.c_uint64(self._address)
        self._exported = False

    def _view(self, offset: int, dtype: DType, shape: Shape, strides: Shape) -> "DeviceBuffer":
        view = DeviceBuffer.__new__(DeviceBuffer)
        view._set(self._alloc, offset, dtype, shape, strides, self._base or self)
        return view

    # ---- the memory --------------------------------------------------------

    @property
    def ptr(self) -> int:
        """The device address of the first element (a CUdeviceptr) as an
        integer; 0 for an empty allocation.  Raises ValueError once freed."""
        start = self._alloc.ptr
        if start is None:
            raise ValueError("the tenferro_gpu.DeviceBuffer is freed")
        return start + self._offset

    handle = ptr

    @property
    def nbytes(self) -> int:
        """Bytes of its elements (size * itemsize)."""
        return self._nbytes

    def __len__(self) -> int:
        """The first dimension (the byte count of an rt.alloc buffer)."""
        if not self._shape:
            raise TypeError("len() of a 0-d DeviceBuffer")
        return self._shape[0]

    @property
    def runtime(self) -> "Runtime":
        """The runtime the memory was allocated through (borrowed: do not
        close it).  Its calls follow the current stream."""
        return self._alloc.owner

    @property
    def slot(self) -> int:
        """The stream slot the memory was allocated (and is freed) on."""
        return self._alloc.slot

    @property
    def base(self) -> Optional["DeviceBuffer"]:
        """The buffer that owns the memory, for a view; None for that one."""
        return self._base

    @property
    def freed(self) -> bool:
        return self._alloc.ptr is None

    closed = freed

    def _owner_only(self, what: str) -> None:
        if self._base is not None:
            raise TypeError(f"a view cannot {what} the memory it shares; "
                            f"{what} the buffer it views (view.base)")

    def free(self) -> None:
        """Release the memory (tf_free) in order on the allocating slot;
        while a consumer holds it (see the class), when the last one lets
        go.  Idempotent.  Raises the library's error if tf_free failed (the
        memory is then leaked, never freed twice), TypeError on a view."""
        self._owner_only("free")
        from . import _interop
        _interop.poll_unconsumed()
        self._alloc.free()

    close = free

    def retire(self) -> None:
        """Free the memory once the device has finished the work queued so
        far on this call's slot (tf_workspace_retire), without making the
        host wait; the free itself happens during a later retire,
        Runtime.poll_retirements() or Runtime.sync() on any slot, or at the
        runtime's teardown.  The buffer is unusable afterwards.  If the
        library cannot retire it (an error other than InvalidArgumentError),
        the memory is leaked, as the device may still use it, and the error
        raised."""
        self._owner_only("retire")
        self.ptr
        self._alloc.retire()

    def record_use(self, runtime: Optional["Runtime"] = None) -> None:
        """Note that work you queued yourself on the slot calls on `runtime`
        (default: the buffer's runtime) use here reads or writes this
        memory (tf_memory_record_use, as torch's Tensor.record_stream):
        its free then waits for that work on the device.  Call it after
        queueing the work.  The binding's own calls record their uses of
        buffers of other slots (tenferro_gpu/pool.py).  Works on views."""
        rt = runtime if runtime is not None else self._alloc.owner
        rt.record_use(self)

    def __enter__(self) -> "DeviceBuffer":
        self._owner_only("free")
        self.ptr
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.free()

    # ---- elements ----------------------------------------------------------

    @property
    def dtype(self) -> DType:
        """The element type (compares equal to "float32", numpy.float32, ...)."""
        return self._dtype

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return _product(self._shape)

    @property
    def strides(self) -> Shape:
        """Bytes between consecutive elements of each dimension (as NumPy)."""
        return tuple(s * self._dtype.itemsize for s in self._strides)

    @property
    def is_contiguous(self) -> bool:
        """Whether its elements lie one after another in C order."""
        return self._contiguous

    def _check_contiguous(self, what: str) -> None:
        if not self._contiguous:
            raise BufferError(f"{what} needs contiguous device memory; this view has "
                              f"shape {self._shape} and strides {self.strides} "
                              f"(copy it with a library that reads strided arrays)")

    def __getitem__(self, key: Index) -> "DeviceBuffer":
        """A view of the elements `key` selects: integers, slices with
        positive steps, and one Ellipsis."""
        keys = key if isinstance(key, tuple) else (key,)
        if sum(k is Ellipsis for k in keys) > 1:
            raise IndexError("an index can only have a single ellipsis")
        explicit = len(keys) - (Ellipsis in keys)
        if explicit > len(self._shape):
            raise IndexError(f"too many indices: {explicit} for {len(self._shape)} dimensions")
        if Ellipsis in keys:
            at = keys.index(Ellipsis)
            keys = keys[:at] + (slice(None),) * (len(self._shape) - explicit) + keys[at + 1:]
        keys = keys + (slice(None),) * (len(self._shape) - len(keys))
        offset, shape, strides = self._offset, [], []
        itemsize = self._dtype.itemsize
        for k, n, stride in zip(keys, self._shape, self._strides):
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step <= 0:
                    raise ValueError("DeviceBuffer views take positive steps only")
                count = len(range(start, stop, step))
                if count:
                    offset += start * stride * itemsize
                shape.append(count)
                strides.append(stride * step)
                continue
            index = getattr(k, "__index__", None)
            if isinstance(k, bool) or index is None:
                raise TypeError(f"DeviceBuffer indices are integers, slices and ..., "
                                f"not {type(k).__name__}")
            i: int = index()
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for a dimension of {n}")
            offset += (i % n) * stride * itemsize
        return self._view(offset, self._dtype, tuple(shape), tuple(strides))

    def view(self, dtype: object) -> "DeviceBuffer":
        """The same (contiguous) memory as another element type: the last
        dimension scales by the ratio of the item sizes."""
        new = _dtypes.dtype(dtype)
        self._check_contiguous("view(dtype)")
        old = self._dtype.itemsize
        if not self._shape:
            if new.itemsize != old:
                raise ValueError(f"a 0-d view of {old} bytes cannot become {new.name}")
            return self._view(self._offset, new, (), ())
        last = self._shape[-1] * old
        if last % new.itemsize:
            raise ValueError(f"the last dimension ({last} bytes) is not a multiple of "
                             f"{new.name}'s {new.itemsize} bytes")
        shape = self._shape[:-1] + (last // new.itemsize,)
        return self._view(self._offset, new, shape, _contiguous_strides(shape))

    def reshape(self, *shape: Union[int, Sequence[int]]) -> "DeviceBuffer":
        """The same (contiguous) memory with another shape; one dimension
        may be -1 (inferred)."""
        dims_in: Sequence[Any] = shape[0] if len(shape) == 1 and not isinstance(
            shape[0], int) else shape
        dims = [int(_capi.int32(d, "shape")) for d in dims_in]
        self._check_contiguous("reshape")
        if dims.count(-1) > 1 or any(d < -1 for d in dims):
            raise ValueError(f"invalid shape {tuple(dims)}")
        if -1 in dims:
            known = _product([d for d in dims if d != -1])
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape {self.size} elements into {tuple(dims)}")
            dims[dims.index(-1)] = self.size // known
        if _product(dims) != self.size:
            raise ValueError(f"cannot reshape {self.size} elements into {tuple(dims)}")
        new_shape = tuple(dims)
        return self._view(self._offset, self._dtype, new_shape, _contiguous_strides(new_shape))

    # ---- transfers ---------------------------------------------------------

    def upload(self, src: object, offset: int = 0) -> None:
        """Copy all of host buffer `src` into this buffer at byte `offset`
        (tf_upload), on the slot the runtime's calls use here."""
        self._alloc.owner.upload(src, self, offset=offset)

    def download(self, dst: Any = None, offset: int = 0) -> Any:
        """Copy into host buffer `dst` (all of it) from byte `offset`; with
        no `dst`, a new bytearray of the rest of the buffer.  Returns dst."""
        if dst is None:
            dst = bytearray(self._nbytes - min(offset, self._nbytes))
        return self._alloc.owner.download(self, dst, offset=offset)

    def item(self) -> Any:
        """The value of a one-element buffer (tf_download_scalar), as a
        Python bool, int, float or complex."""
        if self.size != 1:
            raise ValueError(f"item() needs one element; this buffer has {self.size}")
        raw = self._alloc.owner._scalar_bytes(self.ptr, self._dtype.itemsize)
        return self._dtype.unpack(raw)

    def to_numpy(self) -> Any:
        """A new NumPy array with this buffer's dtype, shape and contents
        (tf_download; numpy is imported here, not before)."""
        numpy = importlib.import_module("numpy")
        if self._dtype.name == "bfloat16":
            raise TypeError("NumPy has no bfloat16; view(\"uint16\") first")
        out = numpy.empty(self._shape, dtype=self._dtype.name)
        self._check_contiguous("to_numpy")
        return self.download(out)

    # ---- what other libraries read -------------------------------------------

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        """Version 3 of Numba's CUDA Array Interface: shape, typestr, data,
        strides (None when contiguous) and stream: the CUstream the
        runtime's calls use here now (the current Stream's, or this
        thread's slot), which a consumer must synchronize with.
        AttributeError for bfloat16, which the interface cannot describe."""
        from . import _interop
        return _interop.cuda_array_interface(self)

    def _pin(self) -> None:
        """Read through __cuda_array_interface__: this object keeps the
        memory until it is garbage (a consumer holds it)."""
        if not self._exported:
            self.ptr
            self._alloc.pin(self)
            self._exported = True

    def __dlpack__(self, *, stream: Optional[int] = None,
                   max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule of this buffer (no copy unless copy=True).  The
        work queued so far on the slot the runtime's calls use here is made
        to come first on the consumer's `stream` (None: the legacy default
        stream; -1: no ordering), with an event and cuStreamWaitEvent: the
        host does not wait.  The capsule keeps the memory alive until the
        consumer calls its deleter."""
        from . import _interop
        return _interop.dlpack_capsule(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCUDA, the device ordinal)."""
        return (2, self._alloc.owner.ordinal)

    def __repr__(self) -> str:
        what = f"{self._dtype.name} {self._shape}"
        if self._base is None and self._dtype.name == "uint8" and len(self._shape) == 1:
            what = f"{self._nbytes} bytes"
        if self.freed:
            return f"<tenferro_gpu.DeviceBuffer {what} (freed)>"
        kind = "view " if self._base is not None else ""
        return (f"<tenferro_gpu.DeviceBuffer {kind}{what} at 0x{self.ptr:x} "
                f"slot={self._alloc.slot}>")

"""Runtime: one device's primary context, its stream slots and what hangs
off them (include/tenferro_gpu.h, "Runtime")."""

import ctypes
import enum
import weakref

from . import _callbacks, _capi
from .devices import _query
from .kernels import KernelsMixin
from .memory import TransfersMixin
from .stream_work import StreamWorkMixin


class Capability(enum.IntEnum):
    """enum tf_capability: what Runtime.supports() answers for."""
    NATIVE_MODULES = 1
    RUNTIME_COMPILATION = 2
    RAW_STREAM = 3
    SAME_DEVICE_COPY = 4
    PEER_COPY = 5
    CUBLAS = 6
    STREAM_ORDERED_ALLOC = 7


_WITH_CONTEXT = _callbacks.trampoline(_capi.WITH_CONTEXT_FN)

_OPTION_TYPES = {
    "stream_slots": _capi.uint32,
    "cublas_workspace_bytes": _capi.uint64,
    "retirement_capacity": _capi.uint32,
    "download_threads": _capi.uint32,
    "download_chunk_bytes": _capi.uint32,
}


def _options(api, given):
    """A tf_runtime_options at the library's defaults, with `given` set."""
    opts = _capi.new_struct(_capi.RuntimeOptionsStruct, api.tf_runtime_options_init)
    for name, value in given.items():
        setattr(opts, name, _OPTION_TYPES[name](value, name))
    return opts


class Runtime(StreamWorkMixin, TransfersMixin, KernelsMixin):
    """A reference to a tenferro-gpu runtime (tf_runtime *).

    Runtime(ordinal) creates a runtime on a device; keyword options override
    the library's defaults (None keeps the default): stream_slots,
    cublas_workspace_bytes, retirement_capacity, download_threads,
    download_chunk_bytes (tf_runtime_options documents each):

        with tenferro_gpu.Runtime(0, stream_slots=4) as rt:
            rt.with_context(work)
            rt.sync()

    Each Runtime object owns one reference.  close() (or leaving the `with`
    block) releases it; a Runtime that is garbage-collected or still open at
    interpreter exit is released then.  The runtime itself is torn down
    when its last reference goes, clones and bound handles included.

    A Runtime may be used from any number of threads at once.  Each thread
    works on its own stream slot (its sequence number modulo the slot
    count); bind_slot() gives a handle that uses one fixed slot from any
    thread.  Do not close() a Runtime while another thread still uses it:
    give that thread its own clone().

    Its methods, by the header's sections: queries and streams (here);
    cuBLAS, any library's work, events and retirement (stream_work.py);
    device memory and transfers (memory.py); NVRTC, modules and launches
    (kernels.py).
    """

    __slots__ = ("_handle", "_finalizer", "__weakref__")

    def __init__(self, ordinal=0, *, stream_slots=None, cublas_workspace_bytes=None,
                 retirement_capacity=None, download_threads=None,
                 download_chunk_bytes=None):
        api = _capi.api()
        ordinal = _capi.int32(ordinal, "ordinal")
        given = {name: value for name, value in (
            ("stream_slots", stream_slots),
            ("cublas_workspace_bytes", cublas_workspace_bytes),
            ("retirement_capacity", retirement_capacity),
            ("download_threads", download_threads),
            ("download_chunk_bytes", download_chunk_bytes)) if value is not None}
        out = ctypes.c_void_p()
        if given:
            opts = _options(api, given)
            st = api.tf_runtime_new_with_options(ordinal, ctypes.byref(opts),
                                                 ctypes.byref(out))
        else:
            st = api.tf_runtime_new(ordinal, ctypes.byref(out))
        _capi.check(st)
        self._own(out.value)

    def _own(self, handle):
        self._handle = handle
        self._finalizer = weakref.finalize(
            self, _capi.api().tf_runtime_release, handle)

    @classmethod
    def _adopt(cls, handle):
        """A Runtime owning the reference `handle` already holds."""
        rt = cls.__new__(cls)
        rt._own(handle)
        return rt

    @classmethod
    def from_handle(cls, handle):
        """A Runtime for a tf_runtime * made elsewhere (C code, another
        binding), given as an integer address.  It takes a reference of its
        own (tf_runtime_retain); the caller keeps and releases theirs."""
        handle = _capi.uint64(handle, "handle")
        _capi.check(_capi.api().tf_runtime_retain(handle))
        return cls._adopt(handle)

    # ---- lifetime --------------------------------------------------------

    @property
    def closed(self):
        """Whether close() was called."""
        return not self._finalizer.alive

    @property
    def handle(self):
        """The tf_runtime * as an integer, for C code.  Borrowed: valid
        while this Runtime is open.  Raises ValueError once closed."""
        if not self._finalizer.alive:
            raise ValueError("the tenferro_gpu.Runtime is closed")
        return self._handle

    def close(self):
        """Release this reference (tf_runtime_release).  Idempotent.  The
        last reference's release synchronizes the runtime's streams and
        frees what it owns; failures there go to the log."""
        if self._finalizer.detach() is not None:
            _capi.check(_capi.api().tf_runtime_release(self._handle))

    def __enter__(self):
        self.handle   # refuse a closed runtime here rather than later
        return self

    def __exit__(self, *exc_info):
        self.close()

    def clone(self):
        """Another Runtime on the same runtime, with its own reference
        (tf_runtime_retain): same identity, state and slots."""
        h = self.handle
        _capi.check(_capi.api().tf_runtime_retain(h))
        return Runtime._adopt(h)

    __copy__ = clone

    def bind_slot(self, slot):
        """A Runtime on the same runtime whose calls use stream slot `slot`
        whatever thread makes them (tf_runtime_bind_slot).  Raises
        InvalidArgumentError for a slot outside 0 .. slot_count - 1."""
        slot = _capi.int32(slot, "slot")
        return Runtime._adopt(self._get("tf_runtime_bind_slot", ctypes.c_void_p, slot))

    # ---- queries ----------------------------------------------------------

    def _get(self, fn_name, c_type, *args):
        """fn_name(handle, *args, &out) -> out, raising on failure."""
        value = c_type()
        _capi.check(getattr(_capi.api(), fn_name)(self.handle, *args, ctypes.byref(value)))
        return value.value

    @property
    def identity(self):
        """Number fresh for every new runtime in this process, equal for
        its clones and bound handles.  A cache key; it grants nothing."""
        return self._get("tf_runtime_identity", ctypes.c_uint64)

    @property
    def allocation_domain(self):
        """Device memory made through this runtime belongs to this domain."""
        return self._get("tf_runtime_allocation_domain", ctypes.c_uint64)

    @property
    def device(self):
        """DeviceProperties of the runtime's device (no driver call)."""
        h = self.handle
        return _query(lambda api, out: api.tf_runtime_device_info(h, out))

    @property
    def primary_context(self):
        """The device's primary context (a CUcontext) as an integer.  Valid
        while the runtime lives; prefer with_context() to making it current
        yourself."""
        return self._get("tf_runtime_primary_context", ctypes.c_void_p)

    @property
    def slot_count(self):
        """Number of stream slots."""
        return self._get("tf_runtime_slot_count", ctypes.c_int32)

    @property
    def current_slot(self):
        """Stream slot the calling thread uses (the bound slot of a handle
        from bind_slot())."""
        return self._get("tf_runtime_current_slot", ctypes.c_int32)

    def supports(self, capability):
        """Whether the runtime supports a Capability (an unknown value
        answers False)."""
        capability = _capi.int32(capability, "capability")
        return bool(self._get("tf_runtime_supports", ctypes.c_int32, capability))

    # ---- streams and context ----------------------------------------------

    def stream(self):
        """The calling thread's slot stream (a CUstream) as an integer,
        created on first use and never replaced while the runtime lives.
        Work enqueued on it is ordered with the library's own work on that
        slot.  Wrap it for other libraries:

            torch.cuda.ExternalStream(rt.stream(), device=f"cuda:{rt.device.ordinal}")
            cupy.cuda.ExternalStream(rt.stream(), rt.device.ordinal)
        """
        return self._get("tf_runtime_stream", ctypes.c_void_p)

    def slot_stream(self, slot):
        """As stream(), for an explicit slot 0 .. slot_count - 1."""
        slot = _capi.int32(slot, "slot")
        return self._get("tf_runtime_slot_stream", ctypes.c_void_p, slot)

    def with_context(self, fn, /, *args, **kwargs):
        """Call fn(*args, **kwargs) with the runtime's primary context
        current on this thread and return what it returns.

        The thread's previous current context (none included) is current
        again afterwards, however fn ends.  An exception fn raises is
        re-raised here unchanged (the library sees the callback fail with
        code -1 first).  fn may call this library, with_context included.
        """
        st, result = _callbacks.call_with_callback(
            _capi.api().tf_with_context, (self.handle,), _WITH_CONTEXT,
            fn, args, kwargs)
        _capi.check(st)
        return result

    def sync(self):
        """Wait for the work queued on the calling thread's slot stream,
        then run the workspace retirements the device has passed.  Other
        slots are not waited for."""
        _capi.check(_capi.api().tf_runtime_sync(self.handle))

    def __repr__(self):
        if self.closed:
            return "<tenferro_gpu.Runtime (closed)>"
        return (f"<tenferro_gpu.Runtime identity={self.identity} "
                f"device={self.device.ordinal} handle=0x{self._handle:x}>")

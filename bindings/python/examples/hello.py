# SPDX-License-Identifier: MIT OR Apache-2.0
"""The first program to run: list the devices, create a runtime on device
0, work on a Stream (one stream slot, whichever thread calls), run a
callable with the primary context current, synchronize, close.  Without a
usable GPU, or without libtenferro_gpu.so.1 itself, it says why and exits
with status 1.

    python3 bindings/python/examples/hello.py
"""

import array
import sys
import threading
from typing import Dict

import tenferro_gpu as tg


def main() -> int:
    try:
        print(f"tenferro-gpu {tg.library_version_string()} ({tg.library_path()})")
        devices = tg.devices()
    except (tg.LoadError, tg.TenferroError) as e:
        print(f"hello: cannot run on this machine: {e}", file=sys.stderr)
        return 1
    if not devices:
        print("hello: the driver reports no CUDA device", file=sys.stderr)
        return 1
    for d in devices:
        print(f"device {d.ordinal}: {d.name}, compute capability "
              f"{d.compute_capability[0]}.{d.compute_capability[1]}, "
              f"{d.total_memory_bytes / 2**30:.1f} GiB, {d.uuid_string}")

    with tg.Runtime(0, stream_slots=4) as rt:
        stream = rt.bind_stream(1)          # slot 1, whichever thread calls
        with stream:                        # rt's calls in this block use it
            data = rt.to_device(array.array("f", [1.0, 2.0, 3.0, 4.0]))
            # The primary context is current here: call any CUDA library.
            slot = rt.with_context(lambda: rt.current_slot)
        print(f"stream slot {stream.slot}, CUstream 0x{stream.ptr:x}: uploaded "
              f"{data.shape[0]} {data.dtype}; callback ran with the primary context "
              f"current on slot {slot}")

        # Another thread works on a slot of its own unless it enters the
        # stream, which keeps it ordered after the upload above.
        seen: Dict[str, object] = {}

        def worker() -> None:
            seen["own slot"] = rt.current_slot
            with stream:
                seen["value"] = data[2].item()
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        print(f"worker thread: own slot {seen['own slot']}; read data[2] = "
              f"{seen['value']} on the stream's slot")

        try:
            rt.slot_stream(99)
        except tg.InvalidArgumentError as e:
            print(f"as expected: {type(e).__name__}: {e.message}")  # it starts with the call
        data.free()
        stream.sync()
        stream.close()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

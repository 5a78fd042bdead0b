"""The first program to run: list the devices, create a runtime on device
0, run a callable with its primary context current, synchronize, close.
Without a usable GPU it says why and exits with status 1.

    python3 bindings/python/examples/hello.py
"""

import sys
import threading

import tenferro_gpu as tg


def main():
    print(f"tenferro-gpu {tg.library_version_string()} ({tg.library_path()})")
    try:
        devices = tg.devices()
    except tg.TenferroError as e:
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
        def inside():
            # The primary context is current here: call any CUDA library.
            return rt.current_slot, rt.stream()
        slot, stream = rt.with_context(inside)
        print(f"callback ran with the primary context current; "
              f"slot {slot}, stream 0x{stream:x}")

        # A worker thread gets its own slot and stream; a bound handle keeps
        # one slot whichever thread uses it.
        worker = {}
        t = threading.Thread(target=lambda: worker.update(slot=rt.current_slot))
        t.start()
        t.join()
        bound = rt.bind_slot(3)
        print(f"worker thread slot {worker['slot']}; bound handle slot {bound.current_slot}")
        bound.close()

        try:
            rt.slot_stream(99)
        except tg.InvalidArgumentError as e:
            print(f"as expected: {type(e).__name__} from {e.operation}: {e.message}")
        rt.sync()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: MIT OR Apache-2.0
"""examples/hello.py, the program docs/python.md starts with, runs; and it
starts and says why when there is no GPU, or no library at all."""

import os
import subprocess
import sys

import support

EXAMPLE = os.path.join(support.REPO, "bindings", "python", "examples", "hello.py")


def _run(**env):
    env = dict(os.environ, PYTHONPATH=os.path.join(support.REPO, "bindings", "python"), **env)
    return subprocess.run([sys.executable, EXAMPLE], env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_example_runs():
    done = _run()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("tenferro-gpu 1.")
    assert lines[1].startswith("device 0: ")
    assert lines[2].startswith("stream slot 1, CUstream 0x")
    assert lines[2].endswith("callback ran with the primary context current on slot 1")
    assert lines[3].endswith("read data[2] = 3.0 on the stream's slot")
    # The message starts with the operation; the example says it once.
    assert lines[4] == ("as expected: InvalidArgumentError: tf_runtime_slot_stream: "
                        "slot 99 is outside 0..3")
    assert lines[-1] == "ok"


def test_the_example_starts_and_explains_without_the_library():
    done = _run(TENFERRO_GPU_LIBRARY="/nonexistent/libtenferro_gpu.so.1", LD_LIBRARY_PATH="")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("hello: cannot run on this machine: TENFERRO_GPU_LIBRARY=")
    assert "Traceback" not in done.stderr

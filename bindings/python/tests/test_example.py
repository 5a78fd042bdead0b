"""examples/hello.py, the program docs/python.md starts with, runs."""

import os
import subprocess
import sys

import support


def test_the_example_runs():
    example = os.path.join(support.REPO, "bindings", "python", "examples", "hello.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(support.REPO, "bindings", "python"))
    done = subprocess.run([sys.executable, example], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("tenferro-gpu 1.")
    assert lines[1].startswith("device 0: ")
    assert "primary context current; slot " in lines[2]
    assert lines[3].endswith("bound handle slot 3")
    assert lines[4].startswith("as expected: InvalidArgumentError from tf_runtime_slot_stream")
    assert lines[-1] == "ok"

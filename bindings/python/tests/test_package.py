# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the package says about itself: its license matches the tree's, and
the wheel builder and pyproject.toml agree on it."""

import os
import re

import support

PYPROJECT = os.path.join(support.REPO, "bindings", "python", "pyproject.toml")


def test_the_license_is_the_trees():
    with open(os.path.join(support.REPO, "LICENSE")) as f:
        assert "MIT OR Apache-2.0" in f.read()
    with open(PYPROJECT) as f:
        text = f.read()
    assert re.search(r'^license = \{ text = "MIT OR Apache-2\.0" \}$', text, re.M)
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "build_wheel", os.path.join(support.REPO, "bindings", "python", "tools",
                                    "build_wheel.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.LICENSE == "MIT OR Apache-2.0"
    version = re.search(r'^version = "(.*)"$', text, re.M).group(1)
    import tenferro_gpu
    assert tenferro_gpu.__version__ == version

# SPDX-License-Identifier: MIT OR Apache-2.0
"""The current Stream of each runtime, per thread and per asyncio task.

`with stream:` replaces (never changes) the dict in this context variable:
runtime identity -> Stream.  A call on an unbound handle looks its runtime
up here (one ContextVar.get and one dict get).  A new thread starts with
none; an asyncio task starts with a copy of its creator's.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Dict, Optional

if TYPE_CHECKING:
    from .stream import Stream

current_streams: contextvars.ContextVar[Optional[Dict[int, "Stream"]]] = \
    contextvars.ContextVar("tenferro_gpu_current_streams", default=None)

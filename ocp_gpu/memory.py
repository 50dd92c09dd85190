"""Giving memory back to the system after a burst of work (the initial lists, a big upgrade).

NB: CPython keeps freed objects' memory in its own arenas and glibc keeps freed
blocks in its heaps, so without help the operator's RSS stays at the peak of its
start-up burst (parsing thousands of Nodes) for the rest of its life.  After a burst,
once the process is idle, a full collection and glibc's `malloc_trim` return most of
it; the live data (NodeFacts and pod records) is a few MiB per thousand nodes.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import gc
import logging
import os
from collections.abc import Callable

logger = logging.getLogger("ocp_gpu.memory")

# glibc's mallopt parameter for the number of malloc arenas (malloc.h: M_ARENA_MAX).
_M_ARENA_MAX = -8
# Arenas the operator allows itself: the main one and one for every other thread together.
ARENAS = 2

# The read buffer asyncio gives each TLS connection (see small_tls_read_buffers).
TLS_READ_BUFFER = 32 * 1024

# Wait this long after the last pass before trimming: kopf's per-object workers
# (settings.batching.idle_timeout, 5 s) must have exited first.
IDLE_S = 15.0


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        # Not glibc (musl, macOS): nothing to trim with.
        return None
    return trim


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas (as MALLOC_ARENA_MAX does); call before threads start.

    NB: glibc gives each thread that allocates while the others hold theirs an arena of its
    own, up to 8 per core; the executor's threads parse LIST and watch JSON, and each arena
    keeps its own free fragments, so RSS grows with the thread count rather than the data.
    An environment MALLOC_ARENA_MAX (the admin's choice) wins.  False where there is no glibc.
    """
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt: Callable[[int, int], int] = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


def small_tls_read_buffers(size: int = TLS_READ_BUFFER) -> bool:
    """Give each of asyncio's TLS connections a `size` read buffer instead of 256 KiB.

    NB: asyncio's SSLProtocol allocates its read buffer zero-filled (so it is resident) when
    the connection opens, and kopf keeps one connection per watch open for the process's
    life (about 30 watches: 7 MiB of zeros).  A TLS record is at most 16 KiB, so a 32 KiB
    buffer only means a few more read calls on a big LIST page.  Call before any connection
    opens; False when this Python's asyncio has no such buffer.
    """
    import asyncio.sslproto  # NB: here: the election child never pays for asyncio

    protocol = asyncio.sslproto.SSLProtocol
    if not isinstance(getattr(protocol, "max_size", None), int):
        return False
    protocol.max_size = min(protocol.max_size, size)
    return True


def release_free_memory() -> None:
    """Collect garbage, then hand free heap pages back to the kernel where glibc allows."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class Trimmer:
    """Trims once the process has been idle IDLE_S after work; never while quiet (no CPU then)."""

    def __init__(self, idle_s: float = IDLE_S) -> None:
        self._idle_s = idle_s
        self._pending: asyncio.TimerHandle | None = None

    def worked(self) -> None:
        """A pass ran: (re)start the idle timer."""
        if self._pending is not None:
            self._pending.cancel()
        self._pending = asyncio.get_running_loop().call_later(self._idle_s, self._trim)

    def _trim(self) -> None:
        self._pending = None
        release_free_memory()
        logger.debug("released free memory after a burst")

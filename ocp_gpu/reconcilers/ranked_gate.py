"""A gate of a few concurrent calls whose waiters go in rank order, not in the order they came.

asyncio.Semaphore wakes its waiters first come, first served: with no parallel limit every
node task asks for the upgrade gate at once, and each node's next call queues behind every
other node's first, so all nodes reach their driver restart together at the end (issue 13:
1,000 nodes, every old driver pod deleted ~50 s in).  Here the caller says its rank
(planning/upgrade_pipeline.gate_rank: the node furthest along first) and the lowest waiting
rank gets the next free place.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator


class RankedGate:
    """At most `limit` holders; a freed place goes to the waiter of lowest rank."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        # (rank, order of arrival, future): the order breaks ties, futures are never compared.
        self._waiting: list[tuple[tuple[int, int], int, asyncio.Future[None]]] = []
        self._tickets = itertools.count()
        self._arrivals = itertools.count()

    def ticket(self) -> int:
        """The next number in the order of asking (ranks of equal progress keep this order)."""
        return next(self._tickets)

    @property
    def waiting(self) -> int:
        """Callers waiting for a place (tests)."""
        return sum(not future.done() for *_, future in self._waiting)

    @contextlib.asynccontextmanager
    async def held(self, rank: tuple[int, int]) -> AsyncIterator[None]:
        """Hold one place for the block, after every waiter of lower rank got theirs."""
        # NB: a place is free only when nobody waits (a release hands it to a waiter first).
        if self._free > 0:
            self._free -= 1
        else:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiting, (rank, next(self._arrivals), future))
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    # Granted just as it was cancelled: hand the place on.
                    self._release()
                # NB: otherwise the cancelled future stays in the heap and is skipped on release.
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiting:
            *_, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)
                return
        self._free += 1

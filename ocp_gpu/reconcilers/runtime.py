"""The operator's shared state, in three parts, and the pool its passes write through.

- `view` (reconcilers/cluster_view.py): what the watches know; a pass plans from its snapshot.
- `scheduler` (reconcilers/scheduling.py): dirty marks, wake-ups, timers, coalescing.
- `cache` (reconcilers/applied_cache.py): what this process wrote and established.

The watches' views (watches.py) keep `view` and mark `scheduler`; the loops
(reconcilers/cluster.py, reconcilers/upgrade_reconciler.py) drain the marks and run the reconcilers.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar, cast

from ocp_gpu import memory
from ocp_gpu.kube import applying, clients
from ocp_gpu.reconcilers import applied_cache, cluster_view, scheduling

T = TypeVar("T")

# How many API calls one pass keeps in flight (node label patches, upgrade steps): enough to
# hide round trips at thousands of nodes, few enough not to flood the apiserver's priority levels.
WRITE_CONCURRENCY = 8


@dataclasses.dataclass(frozen=True)
class Runtime:
    api_client: clients.ApiClient
    namespace: str
    # The operator's environment: image defaults (DRIVER_IMAGE, ...).
    env: Mapping[str, str]
    view: cluster_view.ClusterView = dataclasses.field(default_factory=cluster_view.ClusterView)
    scheduler: scheduling.Scheduler = dataclasses.field(default_factory=scheduling.Scheduler)
    cache: applied_cache.AppliedCache = dataclasses.field(default_factory=applied_cache.AppliedCache)
    # Gives memory back once the process is idle after a burst of passes.
    trimmer: memory.Trimmer = dataclasses.field(default_factory=memory.Trimmer)
    # How many of kube/applying.apply_all's applies run at once, in every reconciler together.
    apply_gate: asyncio.Semaphore = dataclasses.field(
        default_factory=lambda: asyncio.Semaphore(applying.APPLY_CONCURRENCY)
    )
    # The drivers' applies, beside that gate (kube/applying.DRIVER_LANE_CONCURRENCY says why).
    driver_apply_gate: asyncio.Semaphore = dataclasses.field(
        default_factory=lambda: asyncio.Semaphore(applying.DRIVER_LANE_CONCURRENCY)
    )

    @property
    def ledger(self) -> applying.Ledger:
        """What kube/applying.apply_if_changed decides from and writes through: the watched owned
        objects (view) and what this process applied, removed and adopted (cache)."""
        return applying.Ledger(
            self.view.owned,
            self.cache.applied,
            self.cache.removed,
            self.cache.adopted,
            self.apply_gate,
            self.driver_apply_gate,
        )


async def in_threads(calls: Iterable[Callable[[], T]], limit: int = WRITE_CONCURRENCY) -> list[T | Exception]:
    """Run blocking calls in threads, at most `limit` at a time; results (or errors) in order.

    NB: one call's error never stops the others: each caller reports its failures per object.
    NB: `limit` workers take the calls in turn, not a task per call waiting on a semaphore: at
    thousands of nodes (the first pass labels every node) thousands of waiting tasks were
    megabytes at once, allocated among the node records the watches renew meanwhile, which
    then pin that memory's arenas for the life of the process (issue 13: idle RSS).
    """
    pending = list(calls)
    results: list[T | Exception | None] = [None] * len(pending)
    queue = iter(enumerate(pending))

    async def worker() -> None:
        for index, call in queue:
            try:
                results[index] = await asyncio.to_thread(call)
            except Exception as error:
                results[index] = error

    await asyncio.gather(*(worker() for _ in range(min(limit, len(pending)))))
    return cast(list[T | Exception], results)

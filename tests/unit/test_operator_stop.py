"""We test these aspects of stopping `ocp-gpu run` (ocp_gpu/operator.py): once a task ends (the
Lease lost, a signal) every other task is cancelled and the process stops within a bound, even when
a task swallows its cancellation and runs on (seen: a deposed leader's upgrade loop writing node
labels for minutes after "lost leadership lease", issue 30); the names of such tasks are reported.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ocp_gpu import operator


def test_cancelled_tasks_end_and_none_is_reported() -> None:
    async def scenario() -> tuple[set[str], bool]:
        sleeper = asyncio.ensure_future(asyncio.sleep(3600))
        tasks: dict[asyncio.Future[Any], str] = {sleeper: "upgrades"}
        await asyncio.sleep(0.01)
        stuck = await operator.stop_tasks(tasks, 5.0)
        return stuck, sleeper.cancelled()

    assert asyncio.run(scenario()) == (set(), True)


def test_a_task_that_swallows_its_cancellation_is_named_after_the_grace() -> None:
    async def deaf() -> None:
        # Swallows the first cancellation, as asyncio.wait_for did; a second one ends it.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        await asyncio.sleep(3600)

    async def scenario() -> tuple[set[str], float]:
        loop = asyncio.get_running_loop()
        tasks: dict[asyncio.Future[Any], str] = {
            asyncio.ensure_future(deaf()): "upgrades",
            asyncio.ensure_future(asyncio.sleep(3600)): "reconciler",
        }
        await asyncio.sleep(0.01)  # both running (a task cancelled before its first step just ends)
        began = loop.time()
        stuck = await operator.stop_tasks(tasks, 0.3)
        waited = loop.time() - began
        for task in tasks:
            task.cancel()  # the second cancellation: the deaf one ends too
        await asyncio.gather(*tasks, return_exceptions=True)
        return stuck, waited

    stuck, waited = asyncio.run(scenario())
    assert stuck == {"upgrades"}
    # Bounded: the grace, not forever.
    assert 0.3 <= waited < 5.0

"""We test `reconcilers.runtime.in_threads`, which carries out a pass's API calls in parallel:

- results come back in the order of the calls, errors as values (one failure never stops the others);
- no more than `limit` calls run at once;
- thousands of calls never become thousands of tasks at once (each one waiting its turn was
  megabytes at 5,000 nodes, issue 13), and none is nothing to do.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable

from ocp_gpu.reconcilers import runtime


def test_results_in_order_and_errors_isolated() -> None:
    def ok(value: int) -> int:
        time.sleep(0.01 * (5 - value))  # later calls finish first
        return value

    def boom() -> int:
        raise ValueError("node n3: conflict")

    calls: list[Callable[[], int]] = [functools.partial(ok, v) for v in range(5)]
    calls.insert(3, boom)
    results = asyncio.run(runtime.in_threads(calls, limit=3))
    assert [r for r in results if not isinstance(r, Exception)] == [0, 1, 2, 3, 4]
    assert isinstance(results[3], ValueError) and "n3" in str(results[3])


def test_concurrency_is_bounded() -> None:
    lock = threading.Lock()
    running, highest = 0, 0

    def call() -> None:
        nonlocal running, highest
        with lock:
            running += 1
            highest = max(highest, running)
        time.sleep(0.02)
        with lock:
            running -= 1

    asyncio.run(runtime.in_threads([call] * 20, limit=4))
    assert highest == 4


def test_calls_wait_their_turn_without_a_task_each() -> None:
    def call() -> None:
        time.sleep(0.001)

    async def run() -> int:
        highest, done = 0, False

        async def monitor() -> None:
            nonlocal highest
            while not done:
                highest = max(highest, len(asyncio.all_tasks()))
                await asyncio.sleep(0)

        watching = asyncio.create_task(monitor())
        results = await runtime.in_threads([call] * 200, limit=4)
        done = True
        await watching
        assert results == [None] * 200
        return highest

    # The test's own task, the monitor and the 4 workers.
    assert asyncio.run(run()) <= 6


def test_no_calls_no_results() -> None:
    assert asyncio.run(runtime.in_threads([], limit=4)) == []

"""We test `reconcilers.runtime.in_threads`, which carries out a pass's API calls in parallel:

- results come back in the order of the calls, errors as values (one failure never stops the others);
- no more than `limit` calls run at once.
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

"""We test `reconcilers.ranked_gate.RankedGate` (the node tasks' gate), without a server:

- never more holders than its limit;
- a freed place goes to the waiter of lowest rank, whatever the order they came in;
- a waiter cancelled while waiting neither holds a place nor loses one for the others.
"""

from __future__ import annotations

import asyncio

from ocp_gpu.reconcilers.ranked_gate import RankedGate


def test_a_freed_place_goes_to_the_lowest_rank_waiting() -> None:
    async def scenario() -> list[str]:
        gate = RankedGate(1)
        order: list[str] = []
        release = asyncio.Event()

        async def holder() -> None:
            async with gate.held((0, gate.ticket())):
                await release.wait()

        async def caller(name: str, rank: int) -> None:
            async with gate.held((rank, gate.ticket())):
                order.append(name)

        first = asyncio.ensure_future(holder())
        await asyncio.sleep(0)
        waiters = [asyncio.ensure_future(caller(name, rank)) for name, rank in [("c", 3), ("a", 1), ("b", 2)]]
        await asyncio.sleep(0)
        assert gate.waiting == 3
        release.set()
        await asyncio.gather(first, *waiters)
        return order

    assert asyncio.run(scenario()) == ["a", "b", "c"]


def test_never_more_holders_than_the_limit() -> None:
    async def scenario() -> int:
        gate = RankedGate(3)
        holding = 0
        most = 0

        async def caller(rank: int) -> None:
            nonlocal holding, most
            async with gate.held((rank, gate.ticket())):
                holding += 1
                most = max(most, holding)
                await asyncio.sleep(0.001)
                holding -= 1

        await asyncio.gather(*(caller(i % 5) for i in range(40)))
        return most

    assert asyncio.run(scenario()) == 3


def test_a_cancelled_waiter_gives_up_its_turn_not_a_place() -> None:
    async def scenario() -> list[str]:
        gate = RankedGate(1)
        order: list[str] = []
        release = asyncio.Event()

        async def holder() -> None:
            async with gate.held((0, gate.ticket())):
                await release.wait()

        async def caller(name: str, rank: int) -> None:
            async with gate.held((rank, gate.ticket())):
                order.append(name)

        first = asyncio.ensure_future(holder())
        await asyncio.sleep(0)
        doomed = asyncio.ensure_future(caller("doomed", 0))
        later = asyncio.ensure_future(caller("later", 5))
        await asyncio.sleep(0)
        doomed.cancel()
        release.set()
        await asyncio.gather(first, later)
        # The place is free again: a new caller gets it at once.
        await asyncio.wait_for(caller("after", 9), 1.0)
        return order

    assert asyncio.run(scenario()) == ["later", "after"]

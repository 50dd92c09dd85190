"""We test `reconcilers.ranked_gate.RankedGate` (the node tasks' gate), without a server:

- never more holders than its limit;
- a freed place goes to the waiter of lowest rank, whatever the order they came in;
- a waiter cancelled while waiting neither holds a place nor loses one for the others.
"""

from __future__ import annotations

import asyncio

from ocp_gpu.reconcilers.ranked_gate import RankedGate


class OnePlace:
    """A gate of one place; `holder` holds it until `release` is set; each `caller` records in
    `order` when it got the place."""

    def __init__(self) -> None:
        self.gate = RankedGate(1)
        self.order: list[str] = []
        self.release = asyncio.Event()

    async def holder(self) -> None:
        async with self.gate.held((0, self.gate.ticket())):
            await self.release.wait()

    async def caller(self, name: str, rank: int) -> None:
        async with self.gate.held((rank, self.gate.ticket())):
            self.order.append(name)


def test_a_freed_place_goes_to_the_lowest_rank_waiting() -> None:
    async def scenario() -> list[str]:
        one = OnePlace()
        first = asyncio.ensure_future(one.holder())
        await asyncio.sleep(0)
        waiters = [
            asyncio.ensure_future(one.caller(name, rank)) for name, rank in [("c", 3), ("a", 1), ("b", 2)]
        ]
        await asyncio.sleep(0)
        assert one.gate.waiting == 3
        one.release.set()
        await asyncio.gather(first, *waiters)
        return one.order

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
        one = OnePlace()
        first = asyncio.ensure_future(one.holder())
        await asyncio.sleep(0)
        doomed = asyncio.ensure_future(one.caller("doomed", 0))
        later = asyncio.ensure_future(one.caller("later", 5))
        await asyncio.sleep(0)
        doomed.cancel()
        one.release.set()
        await asyncio.gather(first, later)
        # The place is free again: a new caller gets it at once.
        await asyncio.wait_for(one.caller("after", 9), 1.0)
        return one.order

    assert asyncio.run(scenario()) == ["later", "after"]

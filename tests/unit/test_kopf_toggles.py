"""The counting toggle set (ocp_gpu/kopf_toggles.py) against kopf's own."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable

import pytest
from kopf._cogs.aiokits import aiotoggles

from ocp_gpu import kopf_toggles

ORIGINAL = aiotoggles.ToggleSet


@pytest.mark.parametrize("fn", [all, any])
@pytest.mark.parametrize("seed", range(20))
def test_same_state_as_kopfs_after_every_step(fn: Callable[[Iterable[bool]], bool], seed: int) -> None:
    async def run() -> None:
        rng = random.Random(seed)
        ours, theirs = kopf_toggles.CountingToggleSet(fn), ORIGINAL(fn)
        pairs: list[tuple[aiotoggles.Toggle, aiotoggles.Toggle]] = []
        dropped: list[tuple[aiotoggles.Toggle, aiotoggles.Toggle]] = []
        for _ in range(200):
            step = rng.choice(["make", "make", "turn", "turn", "drop", "drop-many", "turn-dropped"])
            if step == "make":
                value = rng.random() < 0.5
                pairs.append((await ours.make_toggle(value), await theirs.make_toggle(value)))
            elif step == "turn" and pairs:
                value = rng.random() < 0.5
                mine, kopfs = rng.choice(pairs)
                await mine.turn_to(value)
                await kopfs.turn_to(value)
            elif step == "drop" and pairs:
                pair = pairs.pop(rng.randrange(len(pairs)))
                dropped.append(pair)
                await ours.drop_toggle(pair[0])
                await theirs.drop_toggle(pair[1])
            elif step == "drop-many" and pairs:
                chosen = rng.sample(pairs, k=min(len(pairs), rng.randint(1, 3)))
                for pair in chosen:
                    pairs.remove(pair)
                    dropped.append(pair)
                await ours.drop_toggles([p[0] for p in chosen])
                await theirs.drop_toggles([p[1] for p in chosen])
            elif step == "turn-dropped" and dropped:
                # A dropped toggle turning must not count in its old set.
                value = rng.random() < 0.5
                mine, kopfs = rng.choice(dropped)
                await mine.turn_to(value)
                await kopfs.turn_to(value)
            assert ours.is_on() == theirs.is_on(), step
            assert len(ours) == len(theirs)

    asyncio.run(run())


def _start_up(toggle_set: aiotoggles.ToggleSet, objects: int) -> tuple[int, int]:
    """kopf's start-up barrier: a toggle per listed object, dropped once it is indexed, while
    each object's event waits for the whole set; (wake-ups of the set's waiters, events done)."""

    async def run() -> tuple[int, int]:
        condition = toggle_set._condition
        wakeups = 0
        notify_all = condition.notify_all

        def counting_notify_all() -> None:
            nonlocal wakeups
            wakeups += 1
            notify_all()

        condition.notify_all = counting_notify_all  # type: ignore[method-assign]
        listing = await toggle_set.make_toggle(name="resource listing")
        done = 0

        async def event(toggle: aiotoggles.Toggle) -> None:
            nonlocal done
            await toggle_set.drop_toggle(toggle)
            await toggle_set.wait_for(True)
            done += 1

        workers = []
        for index in range(objects):
            toggle = await toggle_set.make_toggle(name=str(index))
            workers.append(asyncio.create_task(event(toggle)))
            await asyncio.sleep(0)
        await toggle_set.drop_toggle(listing)
        await asyncio.wait_for(asyncio.gather(*workers), 60)
        return wakeups, done

    return asyncio.run(run())


def test_start_up_wakes_the_waiters_once_not_once_per_object() -> None:
    wakeups, done = _start_up(kopf_toggles.CountingToggleSet(all), 2000)
    assert done == 2000
    # The set flips twice: off when the listing starts, on once it and every object are indexed.
    assert wakeups == 2
    # kopf's own set wakes every waiter on every toggle made or dropped.
    kopf_wakeups, kopf_done = _start_up(ORIGINAL(all), 200)
    assert kopf_done == 200
    assert kopf_wakeups >= 2 * 200


def test_install_makes_kopf_build_counting_sets() -> None:
    try:
        kopf_toggles.install()
        kopf_toggles.install()
        assert isinstance(aiotoggles.ToggleSet(all), kopf_toggles.CountingToggleSet)
        assert issubclass(aiotoggles.ToggleSet, ORIGINAL)
    finally:
        aiotoggles.ToggleSet = ORIGINAL  # type: ignore[misc]


def test_the_index_barrier_s_first_opening_is_reported_once() -> None:
    async def run(objects: int) -> list[str]:
        reports: list[str] = []
        kopf_toggles.install(on_indexed=lambda: reports.append("indexed"))
        barrier = aiotoggles.ToggleSet(all)
        # kopf's pause set (any) never reports.
        paused = aiotoggles.ToggleSet(any)
        await paused.drop_toggle(await paused.make_toggle(True))
        assert barrier.is_on() and not reports, "empty before kopf's blocker: not yet listed"
        blocker = await barrier.make_toggle(name="orchestration blocker")
        kind = await barrier.make_toggle(name="nodes")
        await barrier.drop_toggle(blocker)
        listed = [await barrier.make_toggle(name=str(i)) for i in range(objects)]
        await barrier.drop_toggle(kind)
        assert reports == ([] if objects else ["indexed"]), "objects listed but not indexed yet"
        await barrier.drop_toggles(listed)
        assert reports == ["indexed"]
        # Later toggles (kopf makes none once open, but the set may flip): never reported again.
        await barrier.drop_toggle(await barrier.make_toggle(False))
        return reports

    try:
        assert asyncio.run(run(3)) == ["indexed"]
        # No object of any kopf kind: the barrier still opens, and says so.
        assert asyncio.run(run(0)) == ["indexed"]
    finally:
        aiotoggles.ToggleSet = ORIGINAL  # type: ignore[misc]
        kopf_toggles._on_indexed = None


def test_a_toggle_turning_on_can_open_the_barrier() -> None:
    async def run() -> list[str]:
        reports: list[str] = []
        kopf_toggles.install(on_indexed=lambda: reports.append("indexed"))
        barrier = aiotoggles.ToggleSet(all)
        toggle = await barrier.make_toggle(False)
        await toggle.turn_to(True)
        return reports

    try:
        assert asyncio.run(run()) == ["indexed"]
    finally:
        aiotoggles.ToggleSet = ORIGINAL  # type: ignore[misc]
        kopf_toggles._on_indexed = None

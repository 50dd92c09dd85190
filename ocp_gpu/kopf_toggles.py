"""kopf's start-up barrier in linear time: a counting `ToggleSet`, installed before kopf starts.

kopf holds every handler back until each indexed resource is listed and every listed object
is indexed: one toggle per object in one `ToggleSet(all)`, and each waiting event re-checks
the whole set whenever any toggle is made or dropped (an `asyncio.Condition.notify_all`
that wakes every waiter, each scanning every toggle). The work grows with the cube of the
objects present at start-up: 2,000 objects cost 6 s of CPU, the 4,000 operand pods of a
500-node cluster half a minute, and a restarted operator at 1,000 nodes or more did not get
through it within its Lease (bench/chaos_upgrade.py --nodes 500).

This set keeps a count of its toggles that are on, so its state costs O(1), and wakes its
waiters only when that state flips; a toggle's own waiters are still woken whenever the
toggle turns, as kopf's are. Same class interface, same semantics for `any` and `all`
(other functions fall back to kopf's scan).

It also tells the operator when kopf's index barrier (kopf's one `ToggleSet(all)`, closed by
its "orchestration blocker" until every indexed kind is listed and every listed object
indexed) opens for the first time: kopf's kinds are listed then, whether or not any of them
has an object (cluster_view.ClusterView.mark_listed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from kopf._cogs.aiokits import aiotoggles

# Called once when a counting `all` set created after `install` first opens after being
# closed (kopf's index barrier); None: nobody asked.
_on_indexed: Callable[[], None] | None = None


class _CountedToggle(aiotoggles.Toggle):
    """A toggle that tells its set when it turns (the set counts the toggles that are on)."""

    def __init__(
        self, state: bool, *, name: str | None, condition: asyncio.Condition, owner: CountingToggleSet
    ) -> None:
        super().__init__(state, name=name, condition=condition)
        self._owner = owner

    async def turn_to(self, __state: bool) -> None:
        async with self._condition:
            before = self._owner.is_on()
            if self._state != bool(__state) and self in self._owner:
                self._owner._on += 1 if __state else -1
            self._state = bool(__state)
            self._owner._report_if_opened(before)
            # Waiters on this toggle, and on the set, may both care: as kopf does, wake them all.
            self._condition.notify_all()


class CountingToggleSet(aiotoggles.ToggleSet):
    """kopf's `ToggleSet` with an O(1) state and wake-ups only when that state flips."""

    def __init__(self, fn: Callable[[Iterable[bool]], bool]) -> None:
        super().__init__(fn)
        self._on = 0
        # Closed once (kopf's blocker toggle): the first opening after that is reported.
        self._on_open = _on_indexed if fn is all else None
        self._was_closed = False

    def is_on(self) -> bool:
        if self._fn is all:
            return self._on == len(self._toggles)
        if self._fn is any:
            return self._on > 0
        return super().is_on()

    async def make_toggle(self, __val: bool = False, *, name: str | None = None) -> aiotoggles.Toggle:
        toggle = _CountedToggle(__val, name=name, condition=self._condition, owner=self)
        async with self._condition:
            before = self.is_on()
            self._toggles.add(toggle)
            self._on += toggle.is_on()
            self._notify_if_flipped(before)
        return toggle

    async def drop_toggle(self, toggle: aiotoggles.Toggle) -> None:
        await self.drop_toggles([toggle])

    async def drop_toggles(self, toggles: Iterable[aiotoggles.Toggle]) -> None:
        async with self._condition:
            before = self.is_on()
            for toggle in toggles:
                if toggle in self._toggles:
                    self._toggles.discard(toggle)
                    self._on -= toggle.is_on()
            self._notify_if_flipped(before)

    def _notify_if_flipped(self, before: bool) -> None:
        if self.is_on() != before:
            self._condition.notify_all()
        self._report_if_opened(before)

    def _report_if_opened(self, before: bool) -> None:
        now = self.is_on()
        if not now:
            self._was_closed = True
        elif not before and self._was_closed and self._on_open is not None:
            report, self._on_open = self._on_open, None
            report()


def install(on_indexed: Callable[[], None] | None = None) -> None:
    """Make kopf build its toggle sets (index barrier, pause) as counting ones. Idempotent.

    `on_indexed`: called once, when the index barrier of a kopf started after this call first
    opens (every kind with an index handler listed, every listed object indexed).
    """
    global _on_indexed
    _on_indexed = on_indexed
    module: Any = aiotoggles
    module.ToggleSet = CountingToggleSet

"""When the loops run: dirty marks, wake-ups, timers and the coalescing window.

Handlers and our watches' views (reconcilers/*_view.py) only mark things dirty and wake a
loop; the main loop (reconcilers/cluster.py) drains the marks once per pass (`take_changes`),
the upgrade loop (reconcilers/upgrade_reconciler.py) its own (`take_upgrade_marks`).  The first event
after a quiet spell runs a pass at once; bursts of events coalesce into one pass
(`Coalescer`), except the few urgent changes planning/urgency names, which run the next pass
at once.  Nothing here knows what the watches saw (reconcilers/cluster_view.py) or what a
pass applied (reconcilers/applied_cache.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from ocp_gpu.model import nodes
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.planning.upgrades.pool_upgrades import UpgradeRules, as_rules

# How long a burst of rollout progress alone (operand pods turning Ready, DaemonSet pod counts)
# may wait for its pass: such a pass can only move the status's progress, itself written at most
# every planning/status_writes.PROGRESS_INTERVAL_S; any other change ends the wait.
PROGRESS_WINDOW_S = 1.0


@dataclasses.dataclass(frozen=True)
class Changes:
    """What changed since the last pass."""

    nodes: frozenset[nodes.NodeName]
    policies: bool
    everything: bool
    # Only rollout progress woke the pass (`mark_progress`): nothing it plans from changed but
    # pods, DaemonSet counts and our own label patches coming back (reconcilers/cluster.py).
    progress_only: bool = False


class SoonerTimer:
    """One pending call at a time: asking again keeps whichever is due sooner."""

    def __init__(self) -> None:
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def call_within(self, seconds: float, callback: Callable[[], object]) -> None:
        """Call `callback` after `seconds`, unless a call already due sooner is pending."""
        now = _loop_time()
        if self._handle is not None and now < self._due <= now + seconds:
            return
        if self._handle is not None:
            self._handle.cancel()
        self._due = now + seconds
        self._handle = asyncio.get_running_loop().call_later(seconds, callback)


@dataclasses.dataclass
class Scheduler:
    """The two loops' marks and wake-ups, and the upgrade rules the main pass hands over."""

    wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    # Set with `wake` by a change that must not wait out the coalescing window (planning/urgency).
    urgent: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    # Set with `wake` by every change but rollout progress (`mark_progress`): a pass due to
    # progress alone may wait out PROGRESS_WINDOW_S, until this is set.
    substantive: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    upgrade_wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    # Set with `upgrade_wake` by a pod a node in flight waits for turning Ready (planning/urgency).
    upgrade_urgent: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    # The active policy's upgrade rules (and its NVIDIADriver pools'), set by the main pass;
    # None: no upgrades (no valid policy, drivers disabled, or the driver image cannot be resolved).
    upgrade_policy: UpgradeRules | None = None
    _upgrade_policy_changed: bool = True
    _dirty_nodes: set[nodes.NodeName] = dataclasses.field(default_factory=set)
    _policies_dirty: bool = True
    _everything_dirty: bool = True
    _poke: SoonerTimer = dataclasses.field(default_factory=SoonerTimer)
    _progress_poke: SoonerTimer = dataclasses.field(default_factory=SoonerTimer)

    def _wake_for_change(self) -> None:
        self.substantive.set()
        self.wake.set()

    def mark_node(self, name: nodes.NodeName) -> None:
        self._dirty_nodes.add(name)
        self._wake_for_change()
        self.upgrade_wake.set()

    def mark_urgent(self) -> None:
        """The next pass runs at once, even within the coalescing window (planning/urgency)."""
        self.urgent.set()
        self._wake_for_change()

    def mark_policies(self) -> None:
        self._policies_dirty = True
        self._wake_for_change()

    def mark_drivers(self) -> None:
        # NB: every pass plans the drivers; this only wakes the loops.
        self._wake_for_change()
        self.upgrade_wake.set()

    def mark_progress(self) -> None:
        """Rollout progress only (an operand pod changed, a driver DaemonSet's pod counts moved):
        the status's progress may change, nothing else (planning/urgency.is_progress)."""
        self.wake.set()

    def mark_operands(self) -> None:
        """An operand pod changed readiness: the status's progress may change."""
        self.mark_progress()

    def mark_owned(self) -> None:
        """An owned object changed or vanished: a pass re-applies what differs from the rendering."""
        self._wake_for_change()

    def mark_upgrades(self, urgent: bool = False) -> None:
        """Driver or validator pods, or ControllerRevisions changed: only the upgrade loop cares.

        `urgent`: the next upgrade pass runs at once, even within its window (planning/urgency).
        """
        if urgent:
            self.upgrade_urgent.set()
        self.upgrade_wake.set()

    def mark_everything(self) -> None:
        self._everything_dirty = True
        self._wake_for_change()

    def set_upgrade_policy(self, given: UpgradePolicy | UpgradeRules | None) -> None:
        """The main pass hands the active upgrade rules to the upgrade loop."""
        rules = None if given is None else as_rules(given)
        if rules != self.upgrade_policy:
            self.upgrade_policy = rules
            self._upgrade_policy_changed = True
            self.upgrade_wake.set()

    def take_upgrade_marks(self) -> bool:
        """Clear the upgrade loop's wake-up; True when the upgrade rules changed since the last call."""
        changed = self._upgrade_policy_changed
        self._upgrade_policy_changed = False
        self.upgrade_wake.clear()
        self.upgrade_urgent.clear()
        return changed

    def poke_after(self, seconds: float) -> None:
        """Run a pass again after `seconds` even if nothing changes (timeouts need passes)."""
        self._poke.call_within(seconds, self.mark_drivers)

    def poke_progress_after(self, seconds: float) -> None:
        """Judge readiness again after `seconds` (a status held back as progress only is written then).

        NB: its own timer: it never replaces a full pass `poke_after` has due (a retry, a timeout).
        """
        self._progress_poke.call_within(seconds, self.mark_progress)

    def take_changes(self) -> Changes:
        """Drain the dirty marks (the loop calls this once per pass)."""
        changes = Changes(
            frozenset(self._dirty_nodes),
            self._policies_dirty,
            self._everything_dirty,
            progress_only=not (
                self.substantive.is_set()
                or self._dirty_nodes
                or self._policies_dirty
                or self._everything_dirty
            ),
        )
        self._dirty_nodes.clear()
        self._policies_dirty = False
        self._everything_dirty = False
        self.wake.clear()
        self.urgent.clear()
        self.substantive.clear()
        return changes


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until `event` is set, or `timeout` seconds (None: no limit); whether it is set.

    NB: not `asyncio.wait_for`: on Python 3.11 it swallows a cancellation that arrives as the
    awaited wait ends (CPython gh-86296, fixed in 3.12).  The upgrade loop of a leader that lost
    its Lease, cancelled just as a node task woke it, went on planning from the stopped watches'
    view and writing node labels and deleting driver pods for minutes, while the process waited
    for it to end (issue 30: test_chaos under load)."""
    if timeout is None:
        await event.wait()
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True


@dataclasses.dataclass
class Coalescer:
    """Leading-edge coalescing: a pass at once after a quiet spell, at most one per window in a burst.

    NB: a trailing window (sleep after every wake-up) would delay even a lone event, such as
    a node moving to a new RHCOS version, by the whole window; here only events that arrive
    within `window_s` of the last pass wait, for the rest of that window.
    """

    window_s: float
    _last_end: float | None = None

    async def settle_progress(self, substantive: asyncio.Event, window_s: float) -> None:
        """After `settle`, when only rollout progress woke the loop: wait until `window_s` since
        the last pass ended, or until another change arrives (`substantive`)."""
        if self._last_end is None or substantive.is_set():
            return
        left = self._last_end + window_s - _loop_time()
        if left > 0:
            await wait_event(substantive, left)

    async def settle(self, urgent: asyncio.Event | None = None) -> None:
        """Wait out what is left of the window since the last pass ended (nothing after a quiet
        spell); `urgent`, once set, ends the wait at once."""
        if self._last_end is None:
            return
        left = self._last_end + self.window_s - _loop_time()
        if left <= 0:
            return
        if urgent is None:
            await asyncio.sleep(left)
            return
        await wait_event(urgent, left)

    def ended(self) -> None:
        """A pass just ended."""
        self._last_end = _loop_time()


def _loop_time() -> float:
    return asyncio.get_running_loop().time()

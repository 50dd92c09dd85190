"""The operator's shared runtime state: what the watches saw and what is dirty.

Handlers (handlers.py) only mark things dirty and wake the loop; the loop
(operator.py) drains the marks and runs the reconcilers.  The first event after a
quiet spell runs a pass at once; bursts of events coalesce into one pass
(`Coalescer`), except the few urgent changes planning/urgency names, which run the
next pass at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from ocp_gpu import memory
from ocp_gpu.kube import clients, owning
from ocp_gpu.model import custom_resources, labels, nodes, nvidia_driver, operands, snapshot, upgrades
from ocp_gpu.model.policy import UpgradePolicy
from ocp_gpu.planning import delivery

T = TypeVar("T")

# How long a burst of rollout progress alone (operand pods turning Ready, DaemonSet pod counts)
# may wait for its pass: such a pass can only move the status's progress, itself written at most
# every planning/status_writes.PROGRESS_INTERVAL_S; any other change ends the wait.
PROGRESS_WINDOW_S = 1.0

# How many API calls one pass keeps in flight (node label patches, upgrade steps): enough to
# hide round trips at thousands of nodes, few enough not to flood the apiserver's priority levels.
WRITE_CONCURRENCY = 8


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
class Runtime:
    api_client: clients.ApiClient
    namespace: str
    # The operator's environment: image defaults (DRIVER_IMAGE, ...).
    env: Mapping[str, str]
    # The in-memory view, maintained by the watch handlers.
    node_facts: dict[nodes.NodeName, nodes.NodeFacts] = dataclasses.field(default_factory=dict)
    policies: dict[str, custom_resources.PolicyObject] = dataclasses.field(default_factory=dict)
    api_groups: frozenset[str] = frozenset()
    # NVIDIADrivers by name (watched only when their CRD is served: `nvidia_driver_api`).
    nvidia_drivers: dict[str, nvidia_driver.NvidiaDriver] = dataclasses.field(default_factory=dict)
    nvidia_driver_api: bool = False
    # The active policy sets driver.useNvidiaDriverCRD (set by the main pass): which driver pods
    # the upgrade manages (planning.pod_selection.driver_pod_selector).
    nvidia_driver_mode: bool = False
    driver_daemonsets: dict[str, snapshot.DriverDaemonSet] = dataclasses.field(default_factory=dict)
    # The label and annotation patches the main pass is writing, until the node watch shows them
    # (reconcilers/node_view: our own write coming back is progress, planning/urgency.is_own_echo).
    label_echoes: dict[nodes.NodeName, tuple[Mapping[str, str | None], Mapping[str, str | None]]] = (
        dataclasses.field(default_factory=dict)
    )
    # Our other operand DaemonSets (container toolkit, ...), in the same record: counts and our annotations.
    operand_daemonsets: dict[str, snapshot.DriverDaemonSet] = dataclasses.field(default_factory=dict)
    # openshift/driver-toolkit, ClusterVersion `version` and Proxy `cluster` as JSON; None while
    # absent; delivery.NOT_DELIVERED from the moment their watch is registered until it has listed.
    dtk_imagestream: delivery.Singleton = None
    cluster_version: delivery.Singleton = None
    cluster_proxy: delivery.Singleton = None
    # Driver pods' image pulls, and since when each failing pod has been seen failing.
    driver_pod_pulls: dict[str, snapshot.DriverPodPull] = dataclasses.field(default_factory=dict)
    pull_failing_since: dict[str, datetime.datetime] = dataclasses.field(default_factory=dict)
    # What the upgrade controller reads, kept by the watches: driver and validator pods
    # (operator namespace) and the driver DaemonSets' ControllerRevisions (trimmed JSON).
    driver_pods: dict[str, upgrades.DriverPod] = dataclasses.field(default_factory=dict)
    validator_pods: dict[str, upgrades.ValidatorPod] = dataclasses.field(default_factory=dict)
    driver_revisions: dict[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    # The active policy's upgrade rules, set by the main pass; None: no upgrades (no valid
    # policy, drivers disabled, or the driver image cannot be resolved).
    upgrade_policy: UpgradePolicy | None = None
    upgrade_wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    # Set with `upgrade_wake` by a pod a node in flight waits for turning Ready (planning/urgency).
    upgrade_urgent: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    _upgrade_policy_changed: bool = True
    # Bumped by the node view whenever a node's marks a paused upgrade pass reads change
    # (planning/paused_upgrades): the paused upgrade loop compares this, not every node.
    paused_marks_version: int = 0
    # Facts this process established once, and objects of kinds no watch covers.
    # NB: never "already applied" for an owned kind: that is `owned`, kept by the watches.
    applied: dict[tuple[str, str, str], str] = dataclasses.field(default_factory=dict)
    # Objects of disabled operands this process deleted (kind, namespace, name): not deleted again.
    removed: set[tuple[str, str, str]] = dataclasses.field(default_factory=set)
    # The pod security labels this process set on the operand namespace (psa.enabled).
    namespace_labelled: dict[str, str] | None = None
    # Objects another operator made that adopt() took over this process ("Kind ns/name"), and the
    # ClusterPolicy uid whose leftovers were dealt with, and its status.migratedFrom.
    adopted: set[str] = dataclasses.field(default_factory=set)
    leftovers_done_for: str = ""
    migrated_from: dict[str, Any] | None = None
    # Every operand pod (driver, toolkit, validator, device plugin, GFD) in the operand namespace.
    operand_pods: dict[str, operands.OperandPod] = dataclasses.field(default_factory=dict)
    # Every owned object the watches see (kube/owning.OWNED_KINDS): applied hash and owner.
    # NB: never a memory of what this process applied: a deleted object must be re-applied.
    owned: dict[owning.ObjectIdent, owning.ObservedObject] = dataclasses.field(default_factory=dict)
    # When this process last wrote each ClusterPolicy's status (event loop clock, seconds).
    status_written_at: dict[str, float] = dataclasses.field(default_factory=dict)
    # The active ClusterPolicy's name and its spec errors, as last logged (logged on change only).
    active_policy: str | None = None
    logged_spec_errors: str = ""
    # Gives memory back once the process is idle after a burst of passes.
    trimmer: memory.Trimmer = dataclasses.field(default_factory=memory.Trimmer)
    # The kinds the watches cover (handlers.build_registry) and those listed completely once.
    watched: set[str] = dataclasses.field(default_factory=set)
    delivered: set[str] = dataclasses.field(default_factory=set)
    # The watched kinds our own watches cover (not kopf's: `mark_listed` does not vouch for them).
    own_watched: set[str] = dataclasses.field(default_factory=set)
    # Set once every watched kind has been listed completely (planning.delivery): no pass before.
    listed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    # Set with `wake` by a change that must not wait out the coalescing window (planning/urgency).
    urgent: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    # Set with `wake` by every change but rollout progress (`mark_progress`): a pass due to
    # progress alone may wait out PROGRESS_WINDOW_S, until this is set.
    substantive: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    _dirty_nodes: set[nodes.NodeName] = dataclasses.field(default_factory=set)
    _policies_dirty: bool = True
    _everything_dirty: bool = True
    _poke: SoonerTimer = dataclasses.field(default_factory=SoonerTimer)
    _progress_poke: SoonerTimer = dataclasses.field(default_factory=SoonerTimer)

    def watch(self, group: str, plural: str, own: bool = False) -> None:
        """A watch (with an index handler) is registered for this kind: a pass waits for its listing.

        `own`: the operator's own watch (kube/pod_watch.py), not kopf's; it reports its listing
        itself (`mark_delivered`), kopf's barrier knows nothing of it.
        """
        kind = f"{plural}.{group}" if group else plural
        self.watched.add(kind)
        if own:
            self.own_watched.add(kind)

    def mark_listed(self) -> None:
        """kopf ran an event handler: every kind with an index handler has been listed once.

        NB: kopf runs no event handler of any kind until every indexed kind's initial listing
        went through its index handlers (kopf's "indices readiness"), so one event is the
        proof for all of them; a singleton not seen by then does not exist.
        """
        if self.listed.is_set():
            return
        self.delivered |= self.watched - self.own_watched
        self.dtk_imagestream = delivery.settle(self.dtk_imagestream)
        self.cluster_version = delivery.settle(self.cluster_version)
        self.cluster_proxy = delivery.settle(self.cluster_proxy)
        if delivery.is_view_complete(self.watched, self.delivered):
            self.listed.set()

    def _wake_for_change(self) -> None:
        self.substantive.set()
        self.wake.set()

    def mark_delivered(self, group: str, plural: str) -> None:
        """One of our own watches listed its kind completely (kopf's kinds: `mark_listed`)."""
        self.delivered.add(f"{plural}.{group}" if group else plural)
        if not self.listed.is_set() and delivery.is_view_complete(self.watched, self.delivered):
            self.listed.set()

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

    def upgrade_state(self, node: nodes.NodeName) -> str | None:
        """The node's upgrade state label as the watch last showed it (None: unknown node or no label)."""
        facts = self.node_facts.get(node)
        return facts.labels.get(labels.UPGRADE_STATE) if facts is not None else None

    def set_upgrade_policy(self, rules: UpgradePolicy | None) -> None:
        """The main pass hands the active upgrade rules to the upgrade loop."""
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

    def mark_everything(self) -> None:
        self._everything_dirty = True
        self._wake_for_change()

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
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(substantive.wait(), left)

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
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(urgent.wait(), left)

    def ended(self) -> None:
        """A pass just ended."""
        self._last_end = _loop_time()


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


def _loop_time() -> float:
    return asyncio.get_running_loop().time()

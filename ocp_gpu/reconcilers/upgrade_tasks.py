"""The upgrade passes' writes as tasks: a pass starts them and does not wait for them.

Each node with an upgrade under way (planning/upgrade_pipeline.runs_alone) is carried by a
task of its own: it writes the steps the pass planned, and where only the node's own pods
stop it (no watch of the operator covers them) it reads them, watches the pods it deleted
go (kube/pod_following), and goes on (planning/upgrade_chain.continue_chain), until the
node waits for something the watches show (its new driver pod Ready, its validator).  The
other nodes' writes (a label on a node that takes no slot) go through a few workers per
pass, with a gate of their own so that they never queue in front of a node under way.

While a task runs, and after it until the watches show its writes, the node is "in flux":
the next pass counts it as planning/upgrade_pipeline.counted says and does not plan it.
A task that ends wakes the upgrade loop.

NB: the tasks read the live view (`rt.view`), not the pass's snapshot: a task outlives its pass
and goes on as the watches show its own writes coming back and its node's pods turning Ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import logging
from collections.abc import Coroutine, Sequence
from typing import Any

from ocp_gpu.kube import connecting, pod_following, reporting, requesting, upgrading
from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.upgrade_observations import PodRef, UpgradeNode
from ocp_gpu.planning.status import batched_events
from ocp_gpu.planning.upgrades import upgrade_chain, upgrade_pipeline, upgrade_plan
from ocp_gpu.reconcilers import ranked_gate, runtime

logger = logging.getLogger(labels.UPGRADE_LOGGER)


@dataclasses.dataclass(frozen=True)
class Written:
    """A node whose task ended: what the watches must show before it is planned again."""

    echoes: upgrade_chain.Echoes
    # The node as the task's writes left it (how the budget counts it meanwhile).
    node: UpgradeNode
    # Event loop time after which it is planned on the view as it is.
    deadline: float


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one run of a node's steps did (in a thread)."""

    # The node as the steps that succeeded left it.
    node: UpgradeNode
    applied: tuple[upgrade_plan.NodePlan, ...]
    error: Exception | None


class Pipeline:
    """The running node tasks, and the nodes whose writes the watches have not shown yet."""

    def __init__(self, rt: runtime.Runtime, announcer: upgrading.Announcer) -> None:
        self._rt = rt
        self._announcer = announcer
        # Nodes whose steps are being written, as the budget counts them.
        self._running: dict[NodeName, UpgradeNode] = {}
        self._written: dict[NodeName, Written] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        # NB: two gates: the nodes under way never queue behind the first pass's 1,000 labels;
        # and among them the node furthest along goes first (upgrade_pipeline.gate_rank).
        self._alone_gate = ranked_gate.RankedGate(runtime.WRITE_CONCURRENCY)
        self._batch_gate = asyncio.Semaphore(runtime.WRITE_CONCURRENCY)
        self._failed = False
        # NB: once a node's GPU pods are deleted its task watches them go (no LIST after LIST).
        self._follower = pod_following.PodFollower(
            lambda renew: connecting.connection_info(rt.api_client, renew=renew)
        )

    @property
    def active(self) -> bool:
        """Some node's writes are under way or not yet seen."""
        return bool(self._running or self._written)

    @property
    def awaiting_echoes(self) -> bool:
        return bool(self._written)

    def take_failed(self) -> bool:
        """Whether a node's steps failed since the last call."""
        failed, self._failed = self._failed, False
        return failed

    def in_flux(self) -> dict[NodeName, UpgradeNode]:
        """The nodes a pass must not plan now, as it must count them.

        NB: a written node leaves once the view shows its writes, when its time is up, or when
        the node is gone.
        """
        now = asyncio.get_running_loop().time()
        for name, written in list(self._written.items()):
            label = self._rt.view.upgrade_state(name)
            if (
                now >= written.deadline
                or name not in self._rt.view.node_facts
                or upgrade_chain.is_echoed(written.echoes, {name: label}, self._rt.view.driver_pods)
            ):
                del self._written[name]
        return {**{name: written.node for name, written in self._written.items()}, **self._running}

    def start(
        self,
        plan: upgrade_plan.UpgradePlan,
        snap: upgrade_observations.UpgradeSnapshot,
        shared: upgrade_plan.PassInputs,
    ) -> int:
        """Start the writes of every node plan with something to do; how many nodes."""
        busy = upgrading.busy_plans(plan.nodes)
        if not busy:
            return 0
        nodes = {node.name: node for node in snap.nodes}
        givers = frozenset(plan.slot_from.values())
        waiting = bool(plan.budget.blocked_by)
        for node_plan in busy:
            after = nodes[node_plan.node]
            for step in node_plan.steps:
                after = upgrade_chain.node_after(after, step)
            self._running[node_plan.node] = upgrade_pipeline.counted(nodes[node_plan.node], after)
        alone = [p for p in busy if upgrade_pipeline.runs_alone(p, plan.budget)]
        rest = [p for p in busy if not upgrade_pipeline.runs_alone(p, plan.budget)]
        loop = asyncio.get_running_loop()
        # The first-round nodes' first writes, for the nodes started on a slot freed in this pass.
        firsts: dict[NodeName, asyncio.Future[bool]] = {}
        if rest:
            batch_done: asyncio.Future[bool] = loop.create_future()
            self._spawn(self._batch(rest, nodes, shared, batch_done))
            firsts.update(dict.fromkeys((p.node for p in rest), batch_done))
        for node_plan in alone:
            if node_plan.node not in plan.after_others:
                firsts[node_plan.node] = loop.create_future()
        for node_plan in alone:
            name = node_plan.node
            if name in plan.after_others:
                giver = plan.slot_from.get(name)
                # NB: the slot it takes is freed by its giver's writes, or else by some first-round node's.
                awaited = [firsts[giver]] if giver in firsts else list(dict.fromkeys(firsts.values()))
                self._spawn(self._carry(node_plan, nodes[name], shared, None, awaited))
            else:
                self._spawn(
                    self._carry(node_plan, nodes[name], shared, firsts[name], [], name in givers, waiting)
                )
        return len(busy)

    async def close(self) -> None:
        """Cancel the tasks (the operator stops; the labels say where each node is)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._follower.close()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _done(self, name: NodeName, node: UpgradeNode, applied: Sequence[upgrade_plan.NodePlan]) -> None:
        self._running.pop(name, None)
        echoes = upgrade_chain.awaited_echoes(applied)
        if echoes.labels or echoes.deleted:
            deadline = asyncio.get_running_loop().time() + upgrade_pipeline.ECHO_LIMIT_S
            self._written[name] = Written(echoes, node, deadline)
        self._rt.scheduler.upgrade_wake.set()

    def _report(self, name: NodeName, error: Exception) -> None:
        self._failed = True
        # NB: one node's error never blocks the others; the next pass plans it again.
        detail = (
            f"{error.status} {error.reason}" if isinstance(error, requesting.ApiException) else repr(error)
        )
        logger.warning("node %s: upgrade step failed (%s); other nodes carry on", name, detail)

    def _turn(self, state: upgrade_observations.UpgradeState) -> contextlib.AbstractAsyncContextManager[None]:
        """A place at the node tasks' gate for a call of a node in `state`."""
        return self._alone_gate.held(upgrade_pipeline.gate_rank(state, self._alone_gate.ticket()))

    def _write(
        self,
        steps: Sequence[upgrade_plan.NodePlan],
        node: UpgradeNode,
        now: datetime.datetime,
        batched: list[upgrading.Announcement] | None,
    ) -> Outcome:
        """One node's steps in order, in a thread; the first failure stops the rest.

        The Events planning/batched_events says once for many nodes go to `batched` (list.append
        is atomic: the workers of one pass share it), the others to the announcer.
        """
        applied: list[upgrade_plan.NodePlan] = []
        for step in steps:
            try:
                done = upgrading.apply_node_plan(self._rt.api_client, step, now=now, announcing=False)
            except Exception as error:
                return Outcome(node, tuple(applied), error)
            applied.append(step)
            node = upgrade_chain.node_after(node, step)
            said = done.announcement
            if said is None:
                continue
            if batched is not None and batched_events.is_batched(step.state, step.transition):
                batched.append(said)
            else:
                self._announcer.post(said)
        return Outcome(node, tuple(applied), None)

    async def _carry(
        self,
        plan: upgrade_plan.NodePlan,
        node: UpgradeNode,
        shared: upgrade_plan.PassInputs,
        first_done: asyncio.Future[bool] | None,
        awaited: Sequence[asyncio.Future[bool]],
        giver: bool = True,
        waiting: bool = False,
    ) -> None:
        """One node under way: the pass's steps, then on through its own pods, until it must wait.

        `giver`: the pass granted the slot it frees again; `waiting`: nodes waited for a slot in
        that pass (a slot freed and not granted again runs the next pass at once).
        """
        name = plan.node
        before = node
        applied: list[upgrade_plan.NodePlan] = []
        steps = plan.steps
        wanted = upgrade_plan.states_needing_pods(shared.policy_for(name))
        try:
            if awaited and not all(await asyncio.gather(*awaited)):
                # Its slot's giver failed: the slot may still be held. The next pass plans it again.
                return
            # The node's pods as last read or followed (a watch of them starts there).
            known: pod_following.Followed | None = None
            for _ in range(upgrade_pipeline.MAX_ROUNDS):
                outcome, read = await self._write_round(name, steps, node, shared.now, wanted)
                node = outcome.node
                applied += outcome.applied
                if first_done is not None and not first_done.done():
                    first_done.set_result(outcome.error is None)
                if outcome.error is not None:
                    self._report(name, outcome.error)
                    return
                if node.state not in wanted:
                    # It waits for what the watches show (a pod Ready), or for time.
                    return
                removed = upgrade_pipeline.removed_pods(steps)
                if read is None or removed:
                    read = await self._pods_after(name, node.state, removed, known)
                if read is None:
                    # Still there after the task's watch or reads: the passes poll from here.
                    return
                known = read
                shared = dataclasses.replace(
                    shared,
                    snapshot=dataclasses.replace(shared.snapshot, pods={name: read.pods}),
                    now=datetime.datetime.now(datetime.UTC),
                )
                steps = upgrade_chain.continue_chain(node, plan.driver, shared)
                if not steps:
                    return
        except Exception as error:
            self._report(name, error)
        finally:
            if first_done is not None and not first_done.done():
                first_done.set_result(False)
            self._done(name, node, applied)
            if upgrade_pipeline.hands_on_slot(before, node, giver, waiting):
                self._rt.scheduler.upgrade_urgent.set()

    async def _write_round(
        self,
        name: NodeName,
        steps: Sequence[upgrade_plan.NodePlan],
        node: UpgradeNode,
        now: datetime.datetime,
        wanted: frozenset[upgrade_observations.UpgradeState],
    ) -> tuple[Outcome, pod_following.Followed | None]:
        """Write `steps`; and the node's pods, when they may be read beside the last label
        (upgrade_pipeline.read_beside), else None."""
        split = upgrade_pipeline.read_beside(node, steps, wanted)
        if split is None:
            async with self._turn(node.state):
                return await asyncio.to_thread(self._write, steps, node, now, None), None
        async with self._turn(node.state):
            head = await asyncio.to_thread(self._write, steps[:split], node, now, None)
        if head.error is not None:
            return head, None

        async def last() -> Outcome:
            async with self._turn(head.node.state):
                return await asyncio.to_thread(self._write, steps[split:], head.node, now, None)

        tail, pods = await asyncio.gather(last(), self._pods_after(name, head.node.state, (), None))
        return Outcome(tail.node, head.applied + tail.applied, tail.error), pods

    async def _pods_after(
        self,
        name: NodeName,
        state: upgrade_observations.UpgradeState,
        removed: Sequence[PodRef],
        known: pod_following.Followed | None,
    ) -> pod_following.Followed | None:
        """The node's pods (the node in `state`): read now, or once the `removed` pods are gone;
        None if they are not gone in time (upgrade_pipeline.FOLLOW_S), or a read failed.

        Once pods were removed they are watched from the last read (`known`); without one, or
        should the watch fail, read on upgrade_pipeline.POD_POLL_DELAYS.
        """
        if removed and known is not None:
            try:
                return await self._follower.follow(
                    name,
                    known,
                    functools.partial(upgrade_pipeline.are_gone, removed),
                    upgrade_pipeline.FOLLOW_S,
                )
            except pod_following.FollowFailed as error:
                logger.debug("node %s: could not watch its pods (%s); reading them instead", name, error)
        delays = upgrade_pipeline.POD_POLL_DELAYS if removed else (0.0,)
        for delay in delays:
            if delay:
                await asyncio.sleep(delay)
            try:
                async with self._turn(state):
                    pods, version = await asyncio.to_thread(
                        upgrading.list_pods_on_node_at, self._rt.api_client, name
                    )
            except Exception as error:
                logger.warning(
                    "could not list the pods of node %s: %s", name, requesting.describe_error(error)
                )
                return None
            if upgrade_pipeline.are_gone(removed, pods):
                return pod_following.Followed(pods, version)
        return None

    async def _batch(
        self,
        plans: Sequence[upgrade_plan.NodePlan],
        nodes: dict[NodeName, UpgradeNode],
        shared: upgrade_plan.PassInputs,
        done: asyncio.Future[bool],
    ) -> None:
        """The pass's other nodes (labels only), by WRITE_CONCURRENCY workers, not a task each."""
        batched: list[upgrading.Announcement] = []
        queue = iter(plans)
        ok = True

        async def worker() -> None:
            nonlocal ok
            for node_plan in queue:
                name = node_plan.node
                try:
                    async with self._batch_gate:
                        outcome = await asyncio.to_thread(
                            self._write, node_plan.steps, nodes[name], shared.now, batched
                        )
                except Exception as error:
                    outcome = Outcome(nodes[name], (), error)
                if outcome.error is not None:
                    ok = False
                    self._report(name, outcome.error)
                self._done(name, outcome.node, outcome.applied)

        try:
            await asyncio.gather(*(worker() for _ in range(min(runtime.WRITE_CONCURRENCY, len(plans)))))
        finally:
            if not done.done():
                done.set_result(ok)
            for node_plan in queue:
                # Cancelled: what was never written is planned again.
                self._running.pop(node_plan.node, None)
        if batched:
            await self._announce_batched(batched)

    async def _announce_batched(self, batched: Sequence[upgrading.Announcement]) -> None:
        """One GPUDriverUpgrade Event on the active ClusterPolicy per state, naming the nodes."""
        rt = self._rt
        active = rt.view.policies.get(rt.cache.active_policy) if rt.cache.active_policy else None
        if active is None:
            # Deleted meanwhile: nobody to tell (the nodes' labels say it).
            return
        for state in sorted({said.state for said in batched}):
            names = [said.node for said in batched if said.state is state]
            message = batched_events.batched_message(state, names)
            await asyncio.to_thread(
                reporting.post_event, rt.api_client, active.ref(), upgrade_observations.EVENT_REASON, message
            )

"""Builders for upgrade tests: nodes in a state, driver pods, workload pods, and a simulated cluster.

Fluent on purpose: `node("n1", S.POD_RESTART_REQUIRED, driver=CURRENT, cordon=OURS)` reads as
the situation it builds.  `World` applies plans the way the reconciler and a healthy cluster
would (a deleted driver pod comes back current and Ready), for the invariant tests.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import (
    Drain,
    GpuPodDeletion,
    PodSelector,
    UpgradePolicy,
    WaitForCompletion,
)
from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.model.upgrade_observations import (
    DriverPod,
    DriverRevision,
    PodRef,
    UpgradeNode,
    UpgradeSnapshot,
    UpgradeState,
    ValidatorPod,
    WorkloadPod,
)
from ocp_gpu.planning.upgrades import upgrade_plan

S = UpgradeState

# `ocp-gpu status`'s upgrade metrics for three nodes, one upgrading in the only slot and two
# waiting for it (the mid-upgrade scene of tests/unit/test_status_command.py and of
# tests/e2e/test_status_live.py).
ONE_UPGRADING_TWO_WAITING = {
    "auto_upgrade_enabled": 1,
    "in_progress": 1,
    "done": 0,
    "failed": 0,
    "available": 0,
    "pending": 2,
}
NOW = datetime.datetime(2025, 3, 1, 12, 0, tzinfo=datetime.UTC)
NS = "nvidia-gpu-operator"
DS = "nvidia-driver-daemonset-416.94.202407030122-0"
DS_NEW_RHCOS = "nvidia-driver-daemonset-417.94.202410090854-0"
CURRENT_HASH = "7c9a5d"
NEW_RHCOS_HASH = "b41f02"
REVISIONS = {
    DS: DriverRevision(daemonset=DS, current_hash=CURRENT_HASH),
    DS_NEW_RHCOS: DriverRevision(daemonset=DS_NEW_RHCOS, current_hash=NEW_RHCOS_HASH),
}

# Driver situations (the `driver=` argument of `node`).
OUTDATED = "outdated"
CURRENT = "current"  # current and Ready
STARTING = "starting"  # current, not Ready
FAILING = "failing"  # current, not Ready, many restarts
TERMINATING = "terminating"  # outdated and going away
MISSING = "missing"
NO_REVISION = "no-revision"  # its DaemonSet has no known revision
ORPHAN = "orphan"
NEW_RHCOS = "new-rhcos"  # current and Ready, made by the next RHCOS version's DaemonSet
DRIVERS = (OUTDATED, CURRENT, STARTING, FAILING, TERMINATING, MISSING, NO_REVISION, ORPHAN, NEW_RHCOS)

# Cordon situations (the `cordon=` argument).
NONE = "schedulable"
OURS = "ours"  # the upgrade cordoned it
ADMIN = "admin"  # unschedulable before the upgrade, recorded
ADMIN_UNRECORDED = "admin-unrecorded"  # unschedulable, no record either way
CORDONS = (NONE, OURS, ADMIN, ADMIN_UNRECORDED)


def driver_pod(name: str, situation: str = OUTDATED) -> tuple[DriverPod, ...]:
    if situation == MISSING:
        return ()
    ds: str | None = DS
    revision: str | None = {OUTDATED: "1a2b3c", TERMINATING: "1a2b3c"}.get(situation, CURRENT_HASH)
    if situation == NEW_RHCOS:
        ds, revision = DS_NEW_RHCOS, NEW_RHCOS_HASH
    if situation == NO_REVISION:
        ds = "nvidia-driver-daemonset-unknown"
    if situation == ORPHAN:
        ds = None
    return (
        DriverPod(
            ref=PodRef(namespace=NS, name=f"nvidia-driver-{name}", uid=f"uid-driver-{name}"),
            node=NodeName(name),
            daemonset=ds,
            revision_hash=revision,
            ready=situation in (CURRENT, NEW_RHCOS, OUTDATED, TERMINATING, NO_REVISION, ORPHAN),
            terminating=situation == TERMINATING,
            restart_count=12 if situation == FAILING else 0,
            waiting_reason="CrashLoopBackOff" if situation == FAILING else "",
        ),
    )


def node(
    name: str = "n1",
    state: UpgradeState = S.UNKNOWN,
    *,
    driver: str = OUTDATED,
    cordon: str = NONE,
    ready: bool = True,
    skip: bool = False,
    enabled: bool = True,
    timers: Mapping[str, datetime.datetime] | None = None,
    started: datetime.datetime | None = None,
) -> UpgradeNode:
    """A GPU node in `state`; `started` sets the current state's timer (default: just entered it)."""
    rule = upgrade_plan.TABLE[state]
    all_timers = dict(timers or {})
    if rule.timer and rule.timer not in all_timers:
        all_timers[rule.timer] = started or NOW
    return UpgradeNode(
        name=NodeName(name),
        state_label=state.value,
        unschedulable=cordon != NONE,
        ready=ready,
        skip=skip,
        upgrade_enabled=enabled,
        initially_unschedulable=cordon == ADMIN,
        cordoned_by_upgrade=cordon == OURS,
        timers=all_timers,
        driver_pods=driver_pod(name, driver),
    )


def pod(
    name: str,
    node_name: str = "n1",
    *,
    gpu: bool = True,
    controller: str | None = "ReplicaSet",
    empty_dir: bool = False,
    phase: str = "Running",
    pod_labels: Mapping[str, str] | None = None,
    terminating: bool = False,
    namespace: str = "work",
    claims: tuple[str, ...] = (),
) -> WorkloadPod:
    return WorkloadPod(
        ref=PodRef(namespace=namespace, name=name, uid=f"uid-{name}"),
        node=NodeName(node_name),
        labels=dict(pod_labels or {}),
        phase=phase,
        requests_gpu=gpu,
        claims=claims,
        controller_kind=controller,
        uses_empty_dir=empty_dir,
        terminating=terminating,
    )


def validator(node_name: str = "n1", ready: bool = True) -> ValidatorPod:
    return ValidatorPod(
        ref=PodRef(namespace=NS, name=f"nvidia-operator-validator-{node_name}"),
        node=NodeName(node_name),
        ready=ready,
    )


def snapshot(
    *nodes: UpgradeNode,
    pods: Iterable[WorkloadPod] = (),
    validators: Iterable[ValidatorPod] | None = None,
    read_pods: bool = True,
    claims: Mapping[str, ClaimHold] | None = None,
) -> UpgradeSnapshot:
    """`validators=None`: no validator deployed; `read_pods=False`: no node's pods were read;
    `claims`: what each ResourceClaim holds (None: the claims are unknown)."""
    by_node: dict[NodeName, list[WorkloadPod]] = {n.name: [] for n in nodes} if read_pods else {}
    for p in pods:
        by_node.setdefault(p.node, []).append(p)
    by_validator: dict[NodeName, list[ValidatorPod]] = {}
    for v in validators or ():
        by_validator.setdefault(v.node, []).append(v)
    return UpgradeSnapshot(
        nodes=tuple(nodes),
        daemonsets=REVISIONS,
        pods={name: tuple(group) for name, group in by_node.items()},
        validator_deployed=validators is not None,
        validator_pods={name: tuple(group) for name, group in by_validator.items()},
        claims=claims,
    )


def policy(
    *,
    auto: bool = True,
    parallel: int = 1,
    unavailable: int | str = "25%",
    wait_selector: str = "",
    wait_timeout: int = 0,
    force: bool = False,
    empty_dir: bool = False,
    deletion_timeout: int = 300,
    drain: bool = False,
    drain_force: bool = False,
    drain_empty_dir: bool = False,
    drain_selector: str = "",
    drain_timeout: int = 300,
) -> UpgradePolicy:
    return UpgradePolicy(
        auto_upgrade=auto,
        max_parallel_upgrades=parallel,
        max_unavailable=unavailable,
        wait_for_completion=WaitForCompletion(
            timeout_seconds=wait_timeout, pod_selector=PodSelector(wait_selector)
        ),
        gpu_pod_deletion=GpuPodDeletion(
            force=force, timeout_seconds=deletion_timeout, delete_empty_dir=empty_dir
        ),
        drain=Drain(
            enable=drain,
            force=drain_force,
            pod_selector=PodSelector(drain_selector),
            timeout_seconds=drain_timeout,
            delete_empty_dir=drain_empty_dir,
        ),
    )


def plan_one(
    n: UpgradeNode,
    upgrade_policy: UpgradePolicy | None = None,
    *,
    now: datetime.datetime = NOW,
    **snapshot_args: Any,
) -> upgrade_plan.NodePlan:
    """The plan of a single-node cluster."""
    result = upgrade_plan.plan_upgrades(snapshot(n, **snapshot_args), upgrade_policy or policy(), now)
    return result.nodes[0]


# --- a simulated cluster --------------------------------------------------------------------------


def unavailable_after(snap: UpgradeSnapshot, plan: upgrade_plan.UpgradePlan) -> int:
    """Nodes unschedulable, NotReady or cordon-required once the plan is applied."""
    count = 0
    by_name = {n.name: n for n in snap.nodes}
    for node_plan in plan.nodes:
        n = by_name[node_plan.node]
        unschedulable = n.unschedulable
        for action in node_plan.actions:
            if isinstance(action, upgrade_plan.Cordon):
                unschedulable = True
            elif isinstance(action, upgrade_plan.Uncordon):
                unschedulable = False
        count += unschedulable or not n.ready or node_plan.state_after is S.CORDON_REQUIRED
    return count


@dataclasses.dataclass
class World:
    """Nodes and their pods, changed by applying plans as a healthy cluster would."""

    nodes: dict[NodeName, UpgradeNode]
    pods: dict[NodeName, list[WorkloadPod]]
    validator_deployed: bool = False
    now: datetime.datetime = NOW
    # Counts per node: how often it entered upgrade-required.
    upgrade_required_entries: dict[NodeName, int] = dataclasses.field(default_factory=dict)

    def snapshot(self, upgrade_policy: UpgradePolicy) -> UpgradeSnapshot:
        wanted = set(upgrade_plan.nodes_needing_pods(self.nodes.values(), upgrade_policy))
        return UpgradeSnapshot(
            nodes=tuple(self.nodes[name] for name in sorted(self.nodes)),
            daemonsets=REVISIONS,
            pods={name: tuple(self.pods.get(name, ())) for name in wanted},
            validator_deployed=self.validator_deployed,
            validator_pods={name: (validator(name),) for name in self.nodes}
            if self.validator_deployed
            else {},
        )

    def apply(self, plan: upgrade_plan.UpgradePlan) -> None:
        for node_plan in plan.nodes:
            n = self.nodes[node_plan.node]
            for action in node_plan.actions:
                n = self._act(n, action)
            annotations = dict(node_plan.annotations)
            if node_plan.transition is not None:
                n = dataclasses.replace(n, state_label=node_plan.transition.value)
                if node_plan.transition is S.UPGRADE_REQUIRED:
                    self.upgrade_required_entries[n.name] = self.upgrade_required_entries.get(n.name, 0) + 1
            self.nodes[n.name] = annotate(n, annotations)
        self.now += datetime.timedelta(seconds=10)

    def _act(self, n: UpgradeNode, action: upgrade_plan.Action) -> UpgradeNode:
        if isinstance(action, upgrade_plan.Cordon):
            return annotate(dataclasses.replace(n, unschedulable=True), action.annotations)
        if isinstance(action, upgrade_plan.Uncordon):
            return dataclasses.replace(n, unschedulable=False)
        if isinstance(action, upgrade_plan.DeletePods | upgrade_plan.EvictPods):
            gone = set(action.pods)
            self.pods[n.name] = [p for p in self.pods.get(n.name, []) if p.ref not in gone]
            return n
        # DeleteDriverPod: the DaemonSet (OnDelete) makes a current pod, which becomes Ready.
        old = n.driver_pod
        assert old is not None and old.ref == action.pod
        situation = NEW_RHCOS if old.daemonset == DS_NEW_RHCOS else CURRENT
        return dataclasses.replace(n, driver_pods=driver_pod(n.name, situation))

    def move_to_new_rhcos(self, name: NodeName) -> None:
        """Upgrade day: the node rebooted into the next RHCOS and got that DaemonSet's pod."""
        self.nodes[name] = dataclasses.replace(self.nodes[name], driver_pods=driver_pod(name, NEW_RHCOS))

    def admin_cordon(self, name: NodeName) -> None:
        self.nodes[name] = dataclasses.replace(self.nodes[name], unschedulable=True)

    def admin_relabel(self, name: NodeName, state: UpgradeState) -> None:
        self.nodes[name] = dataclasses.replace(self.nodes[name], state_label=state.value)

    def finish_jobs(self) -> None:
        """The pods of nodes waiting for jobs complete (jobs end between passes)."""
        for name, group in self.pods.items():
            if self.nodes[name].state is S.WAIT_FOR_JOBS_REQUIRED:
                self.pods[name] = [dataclasses.replace(p, phase="Succeeded") for p in group]


def annotate(n: UpgradeNode, annotations: Mapping[str, str | None]) -> UpgradeNode:
    """The node after a merge patch of these annotations."""
    timers = dict(n.timers)
    fields: dict[str, Any] = {}
    for key, value in annotations.items():
        if key in upgrade_observations.TIMER_ANNOTATIONS:
            moment = upgrade_observations.parse_timestamp(value)
            if moment is None:
                timers.pop(key, None)
            else:
                timers[key] = moment
        elif key == upgrade_observations.INITIAL_UNSCHEDULABLE:
            fields["initially_unschedulable"] = value is not None
        elif key == upgrade_observations.CORDONED_BY_UPGRADE:
            fields["cordoned_by_upgrade"] = value is not None
        elif key == labels.UPGRADE_ENABLED_ANNOTATION:
            fields["upgrade_enabled"] = value == "true"
        else:
            raise AssertionError(f"the plan wrote an unexpected annotation {key}")
    return dataclasses.replace(n, timers=timers, **fields)


def apply_in_worst_order(
    world: World,
    plan: upgrade_plan.UpgradePlan,
    after_node: Callable[[NodeName], None],
    on_transition: Callable[[NodeName, UpgradeState], None] = lambda node, state: None,
) -> None:
    """Carry out every step of every node plan as the reconciler does, in the worst order it allows:
    the nodes that wait for nobody first, those that free a slot last among them, then the nodes
    started after others; `after_node` after each node's writes (a check of the slots held), then
    10 s pass."""
    first = sorted(
        (p for p in plan.nodes if p.node not in plan.after_others),
        key=lambda p: p.state_after not in upgrade_plan.HOLDS_SLOT,
    )
    for node_plan in [*first, *(p for p in plan.nodes if p.node in plan.after_others)]:
        for step in node_plan.steps:
            n = world.nodes[step.node]
            for action in step.actions:
                n = world._act(n, action)
            if step.transition is not None:
                n = dataclasses.replace(n, state_label=step.transition.value)
                on_transition(step.node, step.transition)
            world.nodes[step.node] = annotate(n, step.annotations)
        after_node(node_plan.node)
    world.now += datetime.timedelta(seconds=10)

"""`ocp-gpu status`: where every GPU node is in its driver upgrade, and why it waits.

One row per GPU node: its RHCOS build (NFD's OSTREE_VERSION; the OS on vanilla
Kubernetes), its driver DaemonSet (the one whose pod runs there, else the one whose
nodeSelector picks the node), the driver pod and whether it is current (its
`controller-revision-hash` is its DaemonSet's current revision) and Ready, the
`nvidia.com/gpu-driver-upgrade-state` label, and why the node waits: which pod,
which budget, which timeout and how much of it is left.  Above the rows: the
ClusterPolicy's state and conditions, the upgrade policy, and the six
`gpu_operator_*` upgrade metrics as the planner computes them.

The rows come from the operator's own code path: `kube.upgrading.read_upgrade_snapshot`
reads what an upgrade pass reads, and `planning.upgrades.upgrade_plan.plan_upgrades` decides what
that pass would do.  "next: <state>" is the transition the operator's next pass would
make; it is shown, never applied.  Read-only: GET and LIST requests only.

Usage::

    ocp-gpu status [--kubeconfig PATH] [--namespace NS] [--policy-name NAME]
                   [-o table|wide|json] [--watch]

  `--namespace` defaults to the ClusterPolicy's `status.namespace` (where the operator
  runs its operands), else nvidia-gpu-operator; `--policy-name` to the policy the
  operator follows (the oldest).  `-o table` (default) is a rich table on a terminal
  and plain aligned text otherwise (pipe it to grep or awk); `-o wide` adds the
  revisions, the driver check (ready, starting, failing, outdated, missing, no-revision) and the actions the next pass would take; `-o json`
  is for scripts (one document; one per line with `--watch`).  `--watch` refreshes
  every 2 s until Ctrl-C.

GPUS: which plugin owns the node's GPUs (planning/operands/gpu_handover.gpu_owner): `plugin`,
`dra <allocated>/<published>` (the gpu.nvidia.com devices the ResourceClaims' allocations hold
on the node, of those its ResourceSlices publish), or `-` (neither, e.g. while a switch to DRA
waits for the device plugin's pods).

MIG: the column MIG says whether the MIG manager is Ready on the node ("-" on a node
that is not MIG-capable); MIG CONFIG shows `nvidia.com/mig.config` and, in brackets,
the MIG manager's `nvidia.com/mig.config.state` (pending, success, failed); a line
above the rows counts the nodes per state.

Example: a driver version change rolling through three RHCOS nodes with `maxParallelUpgrades: 1`;
gpu-a holds the one slot, waiting for a batch job (`waitForCompletion.podSelector: job=batch`)::

    $ ocp-gpu status
    ClusterPolicy cluster-policy: state ready, generation 2 (observed 2), namespace nvidia-gpu-operator
      Ready=True Reconciled: 3 GPU node(s), 1 driver DaemonSet(s) on openshift
      Error=False Reconciled
    upgrades: autoUpgrade true, maxParallelUpgrades 1, maxUnavailable 25% (= 1 of 3 GPU nodes)
      auto_upgrade_enabled=1 in_progress=1 done=0 failed=0 available=0 pending=2
    NODE   RHCOS/OS               DAEMONSET                                      DRIVER POD                                           CURRENT  READY  STATE                              WAITING / NEXT
    gpu-a  416.94.202407030122-0  nvidia-driver-daemonset-416.94.202407030122-0  nvidia-driver-daemonset-416.94.202407030122-0-qhhpd  no       yes    wait-for-jobs-required [cordoned]  waiting for 1 pod(s) matching 'job=batch' to complete: default/train-0 (timeout 10m00s, 9m58s left)
    gpu-b  416.94.202407030122-0  nvidia-driver-daemonset-416.94.202407030122-0  nvidia-driver-daemonset-416.94.202407030122-0-pgngz  no       yes    upgrade-required                   waiting for an upgrade slot: 1 of maxParallelUpgrades 1 taken (gpu-a)
    gpu-c  416.94.202407030122-0  nvidia-driver-daemonset-416.94.202407030122-0  nvidia-driver-daemonset-416.94.202407030122-0-2hj7r  no       yes    upgrade-required                   waiting for an upgrade slot: 1 of maxParallelUpgrades 1 taken (gpu-a)

  Other reasons read, e.g.: "deleting 1 GPU pod(s): ml/train-0 (timeout 5m00s, 4m31s
  left)", "evicting 2 pod(s): ... (timeout 5m00s, 2m10s left); a PodDisruptionBudget may
  be refusing evictions", "waiting for an upgrade slot: 1 of 3 GPU nodes unavailable,
  maxUnavailable 25% allows 1", "driver pod ... is not Ready yet (PodInitializing)",
  "skipped: nvidia.com/gpu-driver-upgrade.skip=true", "paused:
  driver.upgradePolicy.autoUpgrade is false", or "next: cordon-required" (the transition
  the operator's next pass makes).  NB: the example is as wide as the real output.

Exit status: 0 shown; 1 the cluster could not be read, the ClusterPolicy CRD is not
installed, or no (such) ClusterPolicy exists (the message says which); 2 a bad
command line.
"""  # noqa: E501

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ocp_gpu.kube import clients, reading, requesting, upgrading
from ocp_gpu.model import (
    apis,
    custom_resources,
    driver_snapshot,
    labels,
    nvidia_driver_spec,
    operand_types,
    releases,
    resource_claims,
)
from ocp_gpu.model.nodes import NodeFacts, NodeName
from ocp_gpu.model.policy import policy_parser, policy_spec
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.upgrade_observations import UpgradeNode, UpgradeSnapshot, UpgradeState
from ocp_gpu.planning.drivers import driver_plan, driver_pools
from ocp_gpu.planning.operands import gpu_handover, mig_planning, operand_planning, workloads
from ocp_gpu.planning.status import policies
from ocp_gpu.planning.upgrades import pod_selection, pool_upgrades, upgrade_plan
from ocp_gpu.planning.upgrades.pool_upgrades import PoolRules, UpgradeRules
from ocp_gpu.rendering.operands import operand_catalog

EXIT_SHOWN: Final = 0
EXIT_UNREADABLE: Final = 1

OUTPUTS: Final = ("table", "wide", "json")
WATCH_INTERVAL_S: Final = 2.0

# The reason of the Error condition the operator sets when it applies nothing (reconcilers.cluster).
_INVALID_SPEC: Final = "InvalidSpec"
# Table cells for "nothing there" and "not known".
_NONE: Final = "-"
_UNKNOWN: Final = "?"


class StatusError(Exception):
    """The cluster could not be read, or holds nothing to show; the message says which."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        metavar="PATH",
        help="default: $KUBECONFIG, ~/.kube/config, or in-cluster",
    )
    parser.add_argument(
        "--namespace",
        default=None,
        help=f"where the driver pods run (default: the ClusterPolicy's status.namespace, "
        f"else {labels.OPENSHIFT_NAMESPACE})",
    )
    parser.add_argument(
        "--policy-name",
        metavar="NAME",
        default=None,
        help="the ClusterPolicy to show (default: the one the operator follows, the oldest)",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="table",
        help="table (default; rich on a terminal, plain text otherwise), wide, or json",
    )
    parser.add_argument(
        "--watch", action="store_true", help=f"refresh every {WATCH_INTERVAL_S:g} s until Ctrl-C"
    )


# --- what is shown: plain frozen records ------------------------------------------------------


# One status.conditions entry, as the operator wrote it.
ConditionView = custom_resources.Condition


@dataclasses.dataclass(frozen=True)
class PolicyView:
    """The ClusterPolicy shown, as the operator last reported it."""

    name: str
    generation: int
    # status.observedGeneration; 0 when the operator never wrote a status.
    observed_generation: int
    # status.state (ready, notReady, ignored); "" without a status.
    state: str
    # status.namespace: where the operator runs the operands; "" without a status.
    namespace: str
    conditions: tuple[ConditionView, ...]
    # The spec, as written (parse_policy checks it).
    spec: Mapping[str, Any]
    # The other ClusterPolicies, which the operator ignores.
    ignored: tuple[str, ...] = ()
    # The operator follows this one (false only when --policy-name names an ignored one).
    active: bool = True


@dataclasses.dataclass(frozen=True)
class NvidiaDriverView:
    """An NVIDIADriver (driver.useNvidiaDriverCRD), as the operator last reported it."""

    status: PolicyView
    # status.nodes (the GPU nodes it owns) and status.driverDaemonSets[].name.
    nodes: tuple[str, ...] = ()
    daemonsets: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class StatusInputs:
    """One read of the cluster: everything a status report is computed from."""

    policy: PolicyView
    namespace: str
    snapshot: UpgradeSnapshot
    # GPU nodes by name (the same selector as the snapshot's, listed separately).
    nodes: Mapping[NodeName, NodeFacts]
    # Driver DaemonSets by name -> their pod template's nodeSelector.
    daemonset_selectors: Mapping[str, Mapping[str, str]]
    # The pods of the other operands (toolkit, validator, device plugin, GFD).
    operand_pods: tuple[operand_types.OperandPod, ...] = ()
    # Every NVIDIADriver (none when their CRD is not installed).
    nvidia_drivers: tuple[NvidiaDriverView, ...] = ()
    # Per node, NVIDIA's DRA driver's devices: published in ResourceSlices, held by claims
    # (none when resource.k8s.io/v1 is not served).
    dra_devices: Mapping[str, resource_claims.NodeDevices] = dataclasses.field(default_factory=dict)
    # NVIDIA's GPUClusters (none when their CRD is not installed).
    gpu_clusters: tuple[custom_resources.GpuClusterObject, ...] = ()


@dataclasses.dataclass(frozen=True)
class StatusRow:
    """One GPU node."""

    node: str
    # NFD's OSTREE_VERSION; None off RHCOS (or before NFD labelled the node).
    rhcos: str | None
    # NFD's ID + VERSION_ID (rhcos4.16, ubuntu22.04); None when not labelled.
    os: str | None
    # The RHCOS build status.nodeInfo.osImage names, when it differs from NFD's label (stale NFD).
    os_image_rhcos: str | None
    daemonset: str | None
    # How the DaemonSet was found: "pod" (its pod runs here), "selector" (it would select the node), "".
    daemonset_via: str
    driver_pod: str | None
    pod_revision: str | None
    daemonset_revision: str | None
    # The pod's revision is its DaemonSet's current one; None when there is no pod or no known revision.
    current: bool | None
    ready: bool | None
    # planning.upgrades.upgrade_plan.DriverCheck value and its human detail.
    driver_check: str
    driver_detail: str
    # The upgrade state label as found ("" when absent).
    state: str
    # The transition the operator's next pass would make; None when it would leave the label.
    next: str | None
    # What the next pass would do on the node before that transition.
    actions: tuple[str, ...]
    # Why the node stays where it is ("" when it moves or waits for nothing).
    waiting: str
    skipped: bool
    unschedulable: bool
    # Per operand but the driver (model/operands.GENERIC names): "yes" (a Ready pod), "no"
    # (should run here, no Ready pod), "off" (disabled in the policy), "-" (not for this node).
    operands: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # nvidia.com/mig.config and nvidia.com/mig.config.state ("" when absent).
    mig_config: str = ""
    mig_state: str = ""
    # Which plugin owns the node's GPUs (planning/operands/gpu_handover.GpuOwner value: "dra",
    # "plugin", "-"), and through DRA how many devices its slices publish and claims hold.
    gpu_owner: str = gpu_handover.GpuOwner.NONE.value
    dra_published: int = 0
    dra_allocated: int = 0
    # The stack the node's deploy labels show (container, vm-passthrough, vm-vgpu), and the workload its
    # nvidia.com/gpu.workload.config asks for when that is another one (a move under way or held).
    workload: str = ""


@dataclasses.dataclass(frozen=True)
class StatusReport:
    policy: PolicyView
    namespace: str
    upgrade_policy: UpgradePolicy
    # Why the operator makes no upgrade pass at all ("" when it does).
    halted: str
    counts: upgrade_plan.UpgradeCounts
    budget: upgrade_plan.Budget
    rows: tuple[StatusRow, ...]
    time: datetime.datetime
    nvidia_drivers: tuple[NvidiaDriverView, ...] = ()
    # With driver.useNvidiaDriverCRD: each NVIDIADriver's upgrade rules, by its name.
    pool_rules: Mapping[str, PoolRules] = dataclasses.field(default_factory=dict)
    gpu_clusters: tuple[custom_resources.GpuClusterObject, ...] = ()
    # GPU nodes whose running driver (GFD's label) is newer than this release's default while
    # driver.version is unset: the operator keeps them on it (DriverNewerThanDefault).
    newer_than_default: tuple[str, ...] = ()


# --- deciding what to show (pure) ------------------------------------------------------------


def upgrade_policy_of(policy: PolicyView) -> tuple[UpgradePolicy, str]:
    """driver.upgradePolicy, and why the operator makes no upgrade pass ("" when it does).

    Mirrors `reconcilers.cluster.reconcile_once`: an ignored policy, a spec with errors
    (as the operator reported them in its Error condition) or `driver.enabled: false`
    stop every upgrade pass.
    """
    try:
        parsed = policy_parser.parse_policy(policy.spec)
    except policy_parser.PolicyParseError as error:
        # A shape the CRD schema rejects: the server cannot hold it, but say so rather than crash.
        return UpgradePolicy(), f"the ClusterPolicy's spec does not parse: {error}"
    rules = parsed.driver.upgrade_policy
    if not policy.active:
        return rules, f"ClusterPolicy {policy.name} is ignored by the operator (another one is older)"
    invalid = next(
        (
            c
            for c in policy.conditions
            if c.type == "Error" and c.status == "True" and c.reason == _INVALID_SPEC
        ),
        None,
    )
    if invalid is not None:
        # NB: the operator's verdict, not ours: it validated against its own env (image defaults).
        return rules, f"the ClusterPolicy's spec is invalid, the operator applies nothing: {invalid.message}"
    if not parsed.driver.enabled:
        return rules, "driver.enabled is false: the operator runs no driver and no upgrade"
    return rules, ""


def is_selected(node_selector: Mapping[str, str], node_labels: Mapping[str, str]) -> bool:
    """Whether a pod template's nodeSelector picks a node with these labels."""
    return all(node_labels.get(key) == value for key, value in node_selector.items())


def describe_action(action: upgrade_plan.Action) -> str:
    """One action of a node plan, in words."""
    if isinstance(action, upgrade_plan.Cordon):
        return "cordon"
    if isinstance(action, upgrade_plan.Uncordon):
        return "uncordon"
    if isinstance(action, upgrade_plan.DeletePods):
        return f"delete GPU pods {', '.join(str(ref) for ref in action.pods)}"
    if isinstance(action, upgrade_plan.EvictPods):
        return f"evict {', '.join(str(ref) for ref in action.pods)}"
    return f"delete driver pod {action.pod}"


def _daemonset_of(
    plan: upgrade_plan.NodePlan,
    view: NodeFacts | None,
    daemonset_selectors: Mapping[str, Mapping[str, str]],
) -> tuple[str | None, str]:
    pod = plan.driver.pod
    if pod is not None and pod.daemonset:
        # Its pod runs here: that DaemonSet, even if the node's labels now point at another.
        return pod.daemonset, "pod"
    if view is None:
        # The node appeared between the two reads: no labels to match.
        return None, ""
    selecting = sorted(name for name, sel in daemonset_selectors.items() if is_selected(sel, view.labels))
    # No pod (yet): the DaemonSet whose nodeSelector picks the node (at most one: keys are disjoint).
    return (selecting[0], "selector") if selecting else (None, "")


def operand_cells(
    policy: policy_spec.Policy | None,
    node_labels: Mapping[str, str],
    node: str,
    pods: Sequence[operand_types.OperandPod],
) -> dict[str, str]:
    """One cell per operand but the driver: is it Ready on this node (planning.operands.operand_planning'
    rule)?"""
    cells: dict[str, str] = {}
    for operand in operand_catalog.GENERIC:
        if policy is not None and not operand.is_enabled(policy):
            cells[operand.name] = "off"
        elif not operand_planning.should_run(operand, node_labels):
            cells[operand.name] = _NONE
        else:
            unready = operand_planning.unready_nodes(operand, {node: node_labels}, pods)
            cells[operand.name] = "no" if unready else "yes"
    return cells


def status_row(
    node: UpgradeNode,
    plan: upgrade_plan.NodePlan,
    snapshot: UpgradeSnapshot,
    view: NodeFacts | None,
    daemonset_selectors: Mapping[str, Mapping[str, str]],
    halted: str = "",
    operand_row: Mapping[str, str] | None = None,
    dra_devices: resource_claims.NodeDevices | None = None,
) -> StatusRow:
    """The row of one GPU node, from the planner's verdict on it."""
    gpu = driver_snapshot.GpuNode.from_labels(
        node.name, view.labels if view else {}, os_image=view.os_image if view else ""
    )
    running = gpu.running_rhcos_version
    daemonset, via = _daemonset_of(plan, view, daemonset_selectors)
    pod = plan.driver.pod
    revision = snapshot.daemonsets.get(daemonset) if daemonset else None
    check = plan.driver.check
    current: bool | None
    if check is upgrade_plan.DriverCheck.OUTDATED:
        current = False
    elif check in upgrade_plan.CURRENT:
        current = True
    else:
        # No pod, or no known revision to compare with.
        current = None
    transition = plan.transition.value if plan.transition is not None else None
    actions = tuple(describe_action(action) for action in plan.actions)
    waiting = plan.waiting
    if halted and (transition is not None or actions or waiting):
        # The planner would act, but the operator makes no pass: say why instead.
        transition, actions, waiting = None, (), f"no upgrade pass: {halted}"
    return StatusRow(
        node=plan.node,
        rhcos=gpu.ostree_version,
        os=gpu.os_key,
        os_image_rhcos=running if running and gpu.ostree_version and running != gpu.ostree_version else None,
        daemonset=daemonset,
        daemonset_via=via,
        driver_pod=pod.ref.name if pod else None,
        pod_revision=pod.revision_hash if pod else None,
        daemonset_revision=revision.current_hash if revision else None,
        current=current,
        ready=pod.ready if pod else None,
        driver_check=check.value,
        driver_detail=plan.driver.detail,
        state=node.state_label,
        next=transition,
        actions=actions,
        waiting=waiting,
        skipped=plan.skipped,
        unschedulable=node.unschedulable,
        operands=dict(operand_row or {}),
        mig_config=view.labels.get(labels.MIG_CONFIG, "") if view else "",
        mig_state=view.labels.get(labels.MIG_CONFIG_STATE, "") if view else "",
        gpu_owner=gpu_handover.gpu_owner(
            view.labels if view else {}, operand_catalog.DEPLOY_LABELS.exclusive
        ).value,
        dra_published=dra_devices.published if dra_devices else 0,
        dra_allocated=dra_devices.allocated if dra_devices else 0,
        workload=workload_of(view.labels) if view else "",
    )


def workload_of(node_labels: Mapping[str, str]) -> str:
    """The WORKLOAD cell: the stack the node runs, and the label's value when it asks for another."""
    running = workloads.stack_of(node_labels, operand_catalog.DEPLOY_LABELS.vm).value
    asked = node_labels.get(labels.GPU_WORKLOAD_CONFIG)
    return running if asked in (None, running) else f"{running} (label {asked})"


def status_rows(
    plan: upgrade_plan.UpgradePlan,
    snapshot: UpgradeSnapshot,
    nodes: Mapping[NodeName, NodeFacts],
    daemonset_selectors: Mapping[str, Mapping[str, str]],
    halted: str = "",
    policy: policy_spec.Policy | None = None,
    operand_pods: Sequence[operand_types.OperandPod] = (),
    dra_devices: Mapping[str, resource_claims.NodeDevices] | None = None,
) -> tuple[StatusRow, ...]:
    """One row per GPU node of the snapshot, by name."""
    plans = plan.by_node()
    by_node: dict[str, list[operand_types.OperandPod]] = {}
    for pod in operand_pods:
        by_node.setdefault(pod.node, []).append(pod)
    rows = (
        status_row(
            node,
            plans[node.name],
            snapshot,
            nodes.get(node.name),
            daemonset_selectors,
            halted,
            operand_cells(
                policy,
                nodes[node.name].labels if node.name in nodes else {},
                node.name,
                by_node.get(node.name, []),
            ),
            (dra_devices or {}).get(node.name),
        )
        for node in snapshot.nodes
    )
    return tuple(sorted(rows, key=lambda row: row.node))


def _standing(plan: upgrade_plan.UpgradePlan) -> upgrade_plan.UpgradePlan:
    """The plan with no transitions and no starts: the labels as they stay when no pass runs."""
    return dataclasses.replace(
        plan,
        nodes=tuple(dataclasses.replace(node, transition=None, actions=()) for node in plan.nodes),
        budget=dataclasses.replace(plan.budget, starts=(), newly_unavailable=0),
    )


def _parsed(policy: PolicyView) -> policy_spec.Policy | None:
    """The policy's spec with defaults; None when it cannot be parsed (then no operand is "off")."""
    try:
        return policy_parser.parse_policy(policy.spec)
    except policy_parser.PolicyParseError:
        return None


def pool_rules_of(policy: PolicyView, drivers: Sequence[NvidiaDriverView]) -> dict[str, PoolRules]:
    """Each NVIDIADriver's upgrade rules as the operator plans its nodes with them, by name
    (reconcilers/nvidia_drivers.upgrade_pools): its upgradePolicy over the ClusterPolicy's; held
    while the operator reports its spec invalid.  None without driver.useNvidiaDriverCRD."""
    if not nvidia_driver_spec.is_mode_enabled(policy.spec):
        return {}
    found: dict[str, PoolRules] = {}
    for driver in drivers:
        view = driver.status
        try:
            parsed = policy_parser.parse_policy(
                nvidia_driver_spec.cluster_policy_spec(policy.spec, view.spec)
            )
        except policy_parser.PolicyParseError as error:
            found[view.name] = PoolRules(
                view.name, UpgradePolicy(), held=f"has a spec that does not parse: {error}"
            )
            continue
        invalid = any(
            c.type == "Error" and c.status == "True" and c.reason == _INVALID_SPEC for c in view.conditions
        )
        found[view.name] = PoolRules(
            view.name, parsed.driver.upgrade_policy, held=pool_upgrades.HELD if invalid else ""
        )
    return found


def status_report(inputs: StatusInputs, now: datetime.datetime) -> StatusReport:
    """Plan one upgrade pass as the operator would, and turn it into rows (never applied)."""
    rules, halted = upgrade_policy_of(inputs.policy)
    pools = pool_rules_of(inputs.policy, inputs.nvidia_drivers)
    plan = pool_upgrades.plan_pool_upgrades(
        inputs.snapshot,
        UpgradeRules(rules, {driver_pools.owner_label_value(name): pool for name, pool in pools.items()}),
        now,
        chained=False,
    )
    # No pass runs while halted: the metrics and the budget then count the labels as they are.
    counted = _standing(plan) if halted else plan
    return StatusReport(
        policy=inputs.policy,
        namespace=inputs.namespace,
        upgrade_policy=rules,
        halted=halted,
        counts=upgrade_plan.summarize(counted),
        budget=counted.budget,
        rows=status_rows(
            plan,
            inputs.snapshot,
            inputs.nodes,
            inputs.daemonset_selectors,
            halted,
            _parsed(inputs.policy),
            inputs.operand_pods,
            inputs.dra_devices,
        ),
        time=now,
        nvidia_drivers=inputs.nvidia_drivers,
        pool_rules=pools,
        gpu_clusters=inputs.gpu_clusters,
        newer_than_default=_newer_than_default(inputs),
    )


def _newer_than_default(inputs: StatusInputs) -> tuple[str, ...]:
    """The nodes kept on a driver newer than the release default (none when driver.version is set)."""
    policy = _parsed(inputs.policy)
    if policy is None or driver_plan.is_version_pinned(policy):
        return ()
    return driver_plan.newer_than_default_nodes(
        {name: facts.labels for name, facts in inputs.nodes.items()}, releases.DEFAULT_DRIVER.version
    )


# --- output (pure) ------------------------------------------------------------------------------


def report_json(report: StatusReport) -> dict[str, Any]:
    """The report as JSON-ready data (`-o json`).

    Keys are snake_case, except where they echo the API (the ClusterPolicy's fields and
    conditions, camelCase as there); the metric keys are the metric names without their
    `gpu_operator_`/`gpu_operator_nodes_upgrades_` prefix.
    """
    policy = report.policy
    rules = report.upgrade_policy
    budget = report.budget
    return {
        "time": report.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "policy": {
            "name": policy.name,
            "active": policy.active,
            "state": policy.state,
            "generation": policy.generation,
            "observedGeneration": policy.observed_generation,
            "conditions": [dataclasses.asdict(condition) for condition in policy.conditions],
            "ignored": list(policy.ignored),
        },
        "namespace": report.namespace,
        "newer_than_default": list(report.newer_than_default),
        "upgradePolicy": _rules_json(rules),
        "halted": report.halted,
        "metrics": dataclasses.asdict(report.counts),
        "budget": {
            "nodes": budget.total,
            "max_unavailable_nodes": budget.max_unavailable,
            "holding": list(budget.holding),
            "unavailable": list(budget.unavailable),
            "starts": list(budget.starts),
            "blocked_by": budget.blocked_by,
        },
        "nodes": [
            {**dataclasses.asdict(row), "actions": list(row.actions), "operands": dict(row.operands)}
            for row in report.rows
        ],
        "nvidiaDrivers": [
            {
                "name": driver.status.name,
                "state": driver.status.state,
                "generation": driver.status.generation,
                "observedGeneration": driver.status.observed_generation,
                "nodes": list(driver.nodes),
                "driverDaemonSets": list(driver.daemonsets),
                "conditions": [dataclasses.asdict(condition) for condition in driver.status.conditions],
                **(
                    {"upgradePolicy": _rules_json(pool.policy), "upgradesHeld": pool.held}
                    if (pool := report.pool_rules.get(driver.status.name))
                    else {}
                ),
            }
            for driver in report.nvidia_drivers
        ],
        "gpuClusters": [
            {
                "name": cluster.name,
                "state": cluster.state,
                "conditions": [dataclasses.asdict(condition) for condition in cluster.conditions],
            }
            for cluster in report.gpu_clusters
        ],
    }


def _rules_json(rules: UpgradePolicy) -> dict[str, Any]:
    return {
        "autoUpgrade": rules.auto_upgrade,
        "maxParallelUpgrades": rules.max_parallel_upgrades,
        "maxUnavailable": rules.max_unavailable,
    }


def header_lines(report: StatusReport) -> list[str]:
    """The ClusterPolicy, the upgrade policy and the six metrics, as text lines."""
    policy = report.policy
    state = policy.state or "(no status yet: is the operator running?)"
    lines = [
        f"ClusterPolicy {policy.name}: state {state}, generation {policy.generation} "
        f"(observed {policy.observed_generation or 'never'}), namespace {report.namespace}"
    ]
    if policy.observed_generation and policy.observed_generation < policy.generation:
        lines.append(f"  the operator has not yet reported on generation {policy.generation}")
    for condition in policy.conditions:
        message = f": {condition.message}" if condition.message else ""
        lines.append(f"  {condition.type}={condition.status} {condition.reason}{message}")
    if policy.ignored:
        lines.append(f"  ignored by the operator: {', '.join(policy.ignored)}")
    rules = report.upgrade_policy
    parallel = rules.max_parallel_upgrades or "0 (unlimited)"
    lines.append(
        f"upgrades: autoUpgrade {str(rules.auto_upgrade).lower()}, maxParallelUpgrades {parallel}, "
        f"maxUnavailable {rules.max_unavailable} "
        f"(= {report.budget.max_unavailable} of {report.budget.total} GPU nodes)"
    )
    if report.halted:
        lines.append(f"  no upgrade pass: {report.halted}")
    if report.newer_than_default:
        nodes = report.newer_than_default
        named = ", ".join(nodes[:5]) + (" ..." if len(nodes) > 5 else "")
        lines.append(
            f"  drivers newer than the release default {releases.DEFAULT_DRIVER.version}: "
            f"{len(nodes)} node(s) kept on theirs ({named}); "
            "set driver.version to decide (DriverNewerThanDefault)"
        )
    metrics = dataclasses.asdict(report.counts)
    lines.append("  " + " ".join(f"{name}={value}" for name, value in metrics.items()))
    for driver in report.nvidia_drivers:
        # driver.useNvidiaDriverCRD: one line per pool, then what is wrong with it
        view = driver.status
        lines.append(
            f"NVIDIADriver {view.name}: state {view.state or '(no status yet)'}, "
            f"{len(driver.nodes)} node(s), DaemonSets: {', '.join(driver.daemonsets) or 'none'}"
        )
        pool = report.pool_rules.get(view.name)
        if pool is not None:
            pool_parallel = pool.policy.max_parallel_upgrades or "0 (unlimited)"
            lines.append(
                f"  upgrades: autoUpgrade {str(pool.policy.auto_upgrade).lower()}, "
                f"maxParallelUpgrades {pool_parallel}, maxUnavailable {pool.policy.max_unavailable}"
                + (f"; held: {pool.held}" if pool.held else "")
            )
        for condition in view.conditions:
            if (condition.type == "Ready") == (condition.status == "False") and condition.type != "Error":
                lines.append(f"  {condition.type}={condition.status} {condition.reason}: {condition.message}")
    for cluster in report.gpu_clusters:
        # NVIDIA's GPUCluster: whether it owns the DRA driver, and if not why (its Ready condition)
        lines.append(f"GPUCluster {cluster.name}: state {cluster.state or '(no status yet)'}")
        for condition in cluster.conditions:
            if condition.type == "Ready" and condition.status == "False":
                lines.append(f"  {condition.type}={condition.status} {condition.reason}: {condition.message}")
    mig_states = [
        mig_planning.MigNodeState(row.node, row.mig_config, row.mig_state)
        for row in report.rows
        if row.mig_config
    ]
    if mig_states:
        # The MIG manager's progress: an admin changing nvidia.com/mig.config watches this line.
        summary = " ".join(f"{state}={count}" for state, count in mig_planning.summarize(mig_states).items())
        lines.append(f"MIG: {len(mig_states)} node(s) with {labels.MIG_CONFIG}: {summary}")
    return lines


def _yes_no(value: bool | None, missing: str = _NONE) -> str:
    if value is None:
        return missing
    return "yes" if value else "no"


def _rhcos_cell(row: StatusRow) -> str:
    cell = row.rhcos or row.os or _UNKNOWN
    if row.os_image_rhcos:
        # NFD's label lags the OS the kubelet runs: the driver would be built for the wrong kernel.
        cell += f" (osImage {row.os_image_rhcos})"
    return cell


def _state_cell(row: StatusRow) -> str:
    state = row.state or "(none)"
    flags = [flag for flag, on in (("skip", row.skipped), ("cordoned", row.unschedulable)) if on]
    return f"{state} [{', '.join(flags)}]" if flags else state


def _why_cell(row: StatusRow) -> str:
    if row.next is not None:
        return f"next: {row.next}"
    return row.waiting or _NONE


def _mig_cell(row: StatusRow) -> str:
    if not row.mig_config and not row.mig_state:
        return _NONE
    return f"{row.mig_config or _UNKNOWN} ({row.mig_state or _UNKNOWN})"


def _gpus_cell(row: StatusRow) -> str:
    # Through DRA: devices held by claims / published in its slices.
    if row.gpu_owner == gpu_handover.GpuOwner.DRA.value:
        return f"{row.gpu_owner} {row.dra_allocated}/{row.dra_published}"
    return row.gpu_owner


def _current_cell(row: StatusRow) -> str:
    # No pod: "-"; a pod whose DaemonSet revision is unknown: "?".
    return _yes_no(row.current, _NONE if row.driver_pod is None else _UNKNOWN)


# The column header of each operand but the driver, by operand name.
OPERAND_COLUMNS: Final = {
    operand_catalog.CONTAINER_TOOLKIT.name: "TOOLKIT",
    operand_catalog.OPERATOR_VALIDATOR.name: "VALIDATOR",
    operand_catalog.DEVICE_PLUGIN.name: "PLUGIN",
    # NVIDIA's DRA driver: per node it or the device plugin owns the GPUs.
    operand_catalog.DRA_DRIVER.name: "DRA",
    operand_catalog.MPS_CONTROL_DAEMON.name: "MPS",
    operand_catalog.DCGM.name: "DCGM",
    operand_catalog.DCGM_EXPORTER.name: "EXPORTER",
    operand_catalog.GPU_FEATURE_DISCOVERY.name: "GFD",
    operand_catalog.MIG_MANAGER.name: "MIG",
    operand_catalog.NODE_STATUS_EXPORTER.name: "NSE",
}
COLUMNS: Final = (
    "NODE",
    "RHCOS/OS",
    "DAEMONSET",
    "DRIVER POD",
    "CURRENT",
    "READY",
    "STATE",
    # One column per operand but the driver: Ready on this node? (operand_cells)
    *OPERAND_COLUMNS.values(),
    # Which plugin owns the GPUs: "plugin", "dra <allocated>/<published>", "-" (_gpus_cell).
    "GPUS",
    # nvidia.com/mig.config (nvidia.com/mig.config.state)
    "MIG CONFIG",
    # The stack the node runs: container, vm-passthrough or vm-vgpu (planning/operands/workloads.py).
    "WORKLOAD",
    "WAITING / NEXT",
)
WIDE_COLUMNS: Final = (*COLUMNS[:-1], "POD REV", "DS REV", "CHECK", "ACTIONS", COLUMNS[-1])


def row_cells(row: StatusRow, wide: bool = False) -> tuple[str, ...]:
    """A row's cells, in COLUMNS (or WIDE_COLUMNS) order."""
    daemonset = row.daemonset or _NONE
    if row.daemonset and row.daemonset_via == "selector":
        daemonset += " (no pod)"
    cells: tuple[str, ...] = (
        row.node,
        _rhcos_cell(row),
        daemonset,
        row.driver_pod or _NONE,
        _current_cell(row),
        _yes_no(row.ready),
        _state_cell(row),
        *(row.operands.get(name, _NONE) for name in OPERAND_COLUMNS),
        _gpus_cell(row),
        _mig_cell(row),
        row.workload or _NONE,
    )
    if wide:
        cells += (
            row.pod_revision or _NONE,
            row.daemonset_revision or _NONE,
            row.driver_check,
            "; ".join(row.actions) or _NONE,
        )
    return (*cells, _why_cell(row))


def plain_text(report: StatusReport, wide: bool = False) -> str:
    """The header, then the rows as aligned columns (the last column is not padded)."""
    table = [WIDE_COLUMNS if wide else COLUMNS, *(row_cells(row, wide) for row in report.rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]) - 1)]
    lines = header_lines(report)
    for line in table:
        padded = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        lines.append("  ".join([*padded, line[-1]]))
    if not report.rows:
        lines.append(f"(no GPU node: none is labelled {upgrading.GPU_NODE_SELECTOR})")
    return "\n".join(lines) + "\n"


_STATE_STYLES: Final = {
    UpgradeState.UPGRADE_DONE.value: "green",
    UpgradeState.UPGRADE_FAILED.value: "bold red",
    UpgradeState.UPGRADE_REQUIRED.value: "yellow",
    **{state.value: "cyan" for state in upgrade_plan.IN_PROGRESS},
}


# Columns whose cells are a few characters: never wrapped.
_SHORT_COLUMNS: Final = frozenset(
    {"NODE", "CURRENT", "READY", "CHECK", "GPUS", "WORKLOAD", *OPERAND_COLUMNS.values()}
)


def rich_table(report: StatusReport, wide: bool = False) -> RenderableType:
    """The header and a rich table, for a terminal."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    columns = WIDE_COLUMNS if wide else COLUMNS
    for column in columns:
        if column in _SHORT_COLUMNS:
            table.add_column(column, no_wrap=True)
        else:
            # NB: long names fold onto more lines so the reason keeps room on a narrow terminal
            # (unfoldable columns would make rich squeeze the reason to a sliver or drop columns;
            # a min_width on it makes rich crop lines instead).
            table.add_column(column, overflow="fold")
    for row in report.rows:
        cells: list[RenderableType] = list(row_cells(row, wide))
        styles = {
            4: "yellow" if row.current is False else "",
            5: "yellow" if row.ready is False else "",
            6: _STATE_STYLES.get(row.state, ""),
            len(cells) - 1: "bold" if row.next else ("dim" if not row.waiting else ""),
        }
        for index, style in styles.items():
            # NB: a Text cell does not inherit the column's overflow; without "fold" it is cropped.
            cells[index] = Text(str(cells[index]), style=style, overflow="fold")
        table.add_row(*cells)
    header = Text("\n".join(header_lines(report)))
    if not report.rows:
        return Group(header, Text(f"(no GPU node: none is labelled {upgrading.GPU_NODE_SELECTOR})"))
    return Group(header, table)


# --- reading the cluster: GET and LIST only --------------------------------------------------------


def policy_view(obj: Mapping[str, Any], ignored: Sequence[str] = (), active: bool = True) -> PolicyView:
    """The PolicyView of a ClusterPolicy (or NVIDIADriver) object."""
    return _view(reading.cluster_policy(obj), ignored, active)


def _view(found: custom_resources.PolicyObject, ignored: Sequence[str], active: bool) -> PolicyView:
    return PolicyView(
        name=found.name,
        generation=found.generation,
        observed_generation=found.observed_generation,
        state=found.state,
        namespace=found.namespace,
        conditions=found.conditions,
        spec=found.spec,
        ignored=tuple(ignored),
        active=active,
    )


def choose_policy(items: Sequence[Mapping[str, Any]], wanted: str | None, server: str) -> PolicyView:
    """The ClusterPolicy to show: `wanted`, else the one the operator follows (planning.status.policies)."""
    by_name = {found.name: found for found in map(reading.cluster_policy, items)}
    if not by_name:
        raise StatusError(f"{server} has no ClusterPolicy: create one (e.g. cluster-policy) first")
    selection = policies.select_active_policy(
        [policies.PolicyRef(found.name, found.created) for found in by_name.values()]
    )
    name = wanted or selection.active
    if name not in by_name:
        found = ", ".join(sorted(by_name))
        raise StatusError(f"{server} has no ClusterPolicy named {wanted!r} (found: {found})")
    return _view(by_name[name], ignored=sorted(selection.ignored), active=name == selection.active)


def read_status(api: Any, namespace: str | None, policy_name: str | None) -> StatusInputs:
    """Everything a report needs, with GET and LIST requests only.  Raises StatusError."""
    server = api.credentials.server
    try:
        listed = requesting.request(api, "GET", apis.POLICY_PATH)
    except requesting.ApiException as error:
        if error.status == 404:
            raise StatusError(
                f"{server} serves no ClusterPolicy API: the clusterpolicies.nvidia.com CRD is not installed"
            ) from None
        raise StatusError(f"cannot list ClusterPolicies on {server}: {error.status} {error.reason}") from None
    except Exception as error:  # connection refused, TLS, a proxy: all mean "unreadable"
        raise StatusError(f"cannot reach {server}: {error}") from None
    policy = choose_policy(
        [item for item in listed.get("items") or [] if isinstance(item, Mapping)], policy_name, server
    )
    where = namespace or policy.namespace or labels.OPENSHIFT_NAMESPACE
    what = f"the GPU nodes and the driver pods in {where}"
    try:
        try:
            pools = requesting.list_items(api, apis.NVIDIA_DRIVER_PATH)
        except requesting.ApiException as error:
            if error.status != 404:
                raise StatusError(
                    f"cannot list NVIDIADrivers on {server}: {error.status} {error.reason}"
                ) from None
            # the NVIDIADriver CRD is not installed: there are none
            pools = []
        pool_views = tuple(nvidia_driver_view(item) for item in pools if isinstance(item, Mapping))
        default_rules, _ = upgrade_policy_of(policy)
        # NB: each pool's nodes' pods are read as its own rules need them (a wait for jobs).
        rules = UpgradeRules(
            default_rules,
            {
                driver_pools.owner_label_value(name): pool
                for name, pool in pool_rules_of(policy, pool_views).items()
            },
        )
        # NB: the operator's own choice of driver pods (NVIDIADriver pools: by component).
        driver_selector = pod_selection.driver_pod_selector(nvidia_driver_spec.is_mode_enabled(policy.spec))
        snap = upgrading.read_upgrade_snapshot(api, where, rules, driver_selector=driver_selector)
        nodes = {
            view.name: view
            # NB: the selector lists GPU nodes only, and NodeFacts keeps every label of a GPU node.
            for view in map(
                reading.node_facts,
                requesting.list_items(api, "/api/v1/nodes", [("labelSelector", upgrading.GPU_NODE_SELECTOR)]),
            )
        }
        daemonsets = requesting.list_items(
            api,
            f"/apis/apps/v1/namespaces/{where}/daemonsets",
            [("labelSelector", driver_selector)],
        )
        stack_apps = ",".join(o.app for o in operand_catalog.GENERIC)
        stack_pods = requesting.list_items(
            api, f"/api/v1/namespaces/{where}/pods", [("labelSelector", f"{labels.APP} in ({stack_apps})")]
        )
    except StatusError:
        raise
    except requesting.ApiException as error:
        raise StatusError(f"cannot read {what} on {server}: {error.status} {error.reason}") from None
    except Exception as error:  # connection lost midway
        raise StatusError(f"cannot read {what} on {server}: {error}") from None
    try:
        clusters = requesting.list_items(
            api, f"/apis/{apis.GPU_CLUSTER_API_VERSION}/{apis.GPU_CLUSTER_PLURAL}"
        )
    except requesting.ApiException as error:
        if error.status not in (403, 404):
            raise StatusError(f"cannot list GPUClusters on {server}: {error.status} {error.reason}") from None
        # NVIDIA's GPUCluster CRD is not installed (or not ours to read): none shown
        clusters = []
    return StatusInputs(
        dra_devices=_dra_devices(api, server),
        policy=policy,
        namespace=where,
        snapshot=snap,
        nodes=nodes,
        daemonset_selectors={
            str((ds.get("metadata") or {}).get("name", "")): reading.pod_node_selector(ds)
            for ds in daemonsets
        },
        operand_pods=tuple(reading.operand_pod(pod) for pod in stack_pods),
        nvidia_drivers=pool_views,
        gpu_clusters=tuple(reading.gpu_cluster(item) for item in clusters if isinstance(item, Mapping)),
    )


def _dra_devices(api: Any, server: str) -> dict[str, resource_claims.NodeDevices]:
    """Per node, the gpu.nvidia.com devices the ResourceSlices publish and the ResourceClaims' allocations
    hold; none when resource.k8s.io/v1 is not served.  Raises StatusError."""
    resource = f"/apis/{resource_claims.API_GROUP}/{resource_claims.API_VERSION}"
    try:
        slices = requesting.list_items(
            api,
            f"{resource}/resourceslices",
            [("fieldSelector", f"spec.driver={resource_claims.GPU_DRIVER}")],
        )
        claims = requesting.list_items(api, f"{resource}/{resource_claims.CLAIMS_PLURAL}")
    except requesting.ApiException as error:
        if error.status == 404:
            # No DRA API served: no devices through it.
            return {}
        raise StatusError(
            f"cannot list ResourceSlices and ResourceClaims on {server}: {error.status} {error.reason}"
        ) from None
    except Exception as error:  # connection lost midway
        raise StatusError(f"cannot list ResourceSlices and ResourceClaims on {server}: {error}") from None
    return resource_claims.devices_by_node(
        map(reading.published_pool, slices),
        (device for claim in claims for device in reading.allocated_devices(claim)),
    )


def nvidia_driver_view(obj: Mapping[str, Any]) -> NvidiaDriverView:
    """The NvidiaDriverView of an NVIDIADriver object."""
    status = obj.get("status") or {}
    return NvidiaDriverView(
        status=policy_view(obj),
        nodes=tuple(str(node) for node in status.get("nodes") or ()),
        daemonsets=tuple(
            str(item.get("name", ""))
            for item in status.get("driverDaemonSets") or ()
            if isinstance(item, Mapping)
        ),
    )


# --- the command -----------------------------------------------------------------------------------


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write(report: StatusReport, output: str, out: TextIO, *, watching: bool) -> None:
    """Print one report as plain text or JSON (a terminal's rich table goes through Live or Console)."""
    if output == "json":
        # --watch: JSON Lines, one document per refresh.
        out.write(json.dumps(report_json(report), indent=None if watching else 2) + "\n")
    else:
        if watching:
            out.write(f"--- {report.time:%Y-%m-%d %H:%M:%S} UTC\n")
        out.write(plain_text(report, wide=output == "wide"))
    out.flush()


def _next_report(
    fetch: Callable[[], StatusReport], sleep: Callable[[float], None], err: TextIO
) -> StatusReport:
    """The next report, WATCH_INTERVAL_S from now; a failed read is said and retried, never fatal."""
    while True:
        sleep(WATCH_INTERVAL_S)
        try:
            return fetch()
        except StatusError as error:
            # A blip (apiserver restart, expired token) does not end the watch; the last report stays up.
            print(f"ocp-gpu status: error: {error} (retrying)", file=err, flush=True)


def main(
    args: argparse.Namespace,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    now: Callable[[], datetime.datetime] = _now,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        api = clients.load_api_client(args.kubeconfig)
    except Exception as error:  # missing file, bad YAML, no current context: all unreadable
        where = args.kubeconfig or "(default)"
        print(f"ocp-gpu status: error: cannot load the kubeconfig {where}: {error}", file=err)
        return EXIT_UNREADABLE

    def fetch() -> StatusReport:
        return status_report(read_status(api, args.namespace, args.policy_name), now())

    try:
        report = fetch()
    except StatusError as error:
        print(f"ocp-gpu status: error: {error}", file=err)
        return EXIT_UNREADABLE
    wide = args.output == "wide"
    console = Console(file=out) if args.output != "json" and out.isatty() else None
    if not args.watch:
        if console is not None:
            console.print(rich_table(report, wide=wide))
        else:
            _write(report, args.output, out, watching=False)
        return EXIT_SHOWN
    live = Live(console=console, auto_refresh=False) if console is not None else None
    try:
        if live is not None:
            live.start()
        while True:
            if live is not None:
                live.update(rich_table(report, wide=wide), refresh=True)
            else:
                _write(report, args.output, out, watching=True)
            report = _next_report(fetch, sleep, err)
    except KeyboardInterrupt:
        return EXIT_SHOWN
    finally:
        if live is not None:
            live.stop()

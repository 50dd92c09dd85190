"""Whether OLM may replace this operator now: its OperatorCondition's `Upgradeable`, as we decide it.

OLM does not replace an installed operator's CSV by a newer one while the operator's
OperatorCondition says `Upgradeable=False` (the new CSV waits in Pending); an admin can override
it (`spec.overrides`).  We say False while a driver rollout is mid-way (a node between
`upgrade-required` and `uncordon-required`, or a driver DaemonSet with outdated pods): a new
operator version taking over then would inherit cordoned nodes and half-replaced driver pods
planned by other rules.  And while a node is `upgrade-failed`: the admin's fix comes first.
True otherwise.  (OpenShift's own upgrades are gated by the CSV's `olm.maxOpenShiftVersion`,
hack/olm.py; an OperatorCondition does not hold them.)

Decides from the node labels and the driver DaemonSets' counters only; it never reads, writes
or looks at a clock (`kube/upgrade_gating.py` writes the OperatorCondition).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping

from ocp_gpu.model import labels
from ocp_gpu.model.upgrade_observations import UpgradeState
from ocp_gpu.planning.drivers import driver_coverage
from ocp_gpu.planning.upgrades.upgrade_table import IN_PROGRESS

# OLM's condition type (operator-framework/api, conditions.Upgradeable).
UPGRADEABLE = "Upgradeable"
# Nodes named in a message at most; the rest are counted.
NAMED_NODES = 5


class GateReason(enum.StrEnum):
    """The reasons the condition carries (CamelCase, as Kubernetes condition reasons are)."""

    # nothing in flight, nothing failed
    DRIVERS_SETTLED = "DriversSettled"
    # a driver rollout is mid-way
    DRIVER_UPGRADE_IN_PROGRESS = "DriverUpgradeInProgress"
    # a node's driver upgrade failed
    DRIVER_UPGRADE_FAILED = "DriverUpgradeFailed"


@dataclasses.dataclass(frozen=True)
class Upgradeable:
    """The `Upgradeable` condition to write: status "True" or "False", with its reason and message."""

    status: str
    reason: GateReason
    message: str

    def as_condition(self, now_rfc3339: str) -> dict[str, str]:
        """The condition as OperatorCondition's spec.conditions holds it (metav1.Condition)."""
        return {
            "type": UPGRADEABLE,
            "status": self.status,
            "reason": self.reason.value,
            "message": self.message,
            "lastTransitionTime": now_rfc3339,
        }


@dataclasses.dataclass(frozen=True)
class OutdatedDaemonSet:
    """A driver DaemonSet as the gate reads it: how many of its pods run its current template."""

    name: str
    desired: int
    updated: int


def plan_upgradeable(
    node_labels: Mapping[str, Mapping[str, str]], daemonsets: Iterable[OutdatedDaemonSet]
) -> Upgradeable:
    """The `Upgradeable` condition for GPU nodes with these labels and these driver DaemonSets."""
    failed: list[str] = []
    in_flight: list[str] = []
    # NB: the state first: most nodes are upgrade-done, and this runs at every upgrade wake-up.
    for name, node in node_labels.items():
        state = node.get(labels.UPGRADE_STATE, "")
        failing = state == UpgradeState.UPGRADE_FAILED
        if not (failing or state in IN_PROGRESS or state == UpgradeState.UPGRADE_REQUIRED):
            continue
        if not driver_coverage.wants_driver(node):
            continue  # not a GPU node, or opted out of the driver: no upgrade of ours runs there
        (failed if failing else in_flight).append(name)
    failed.sort()
    in_flight.sort()
    outdated = sorted(
        f"{ds.name} ({ds.desired - ds.updated} of {ds.desired} pods outdated)"
        for ds in daemonsets
        if ds.updated < ds.desired
    )
    if failed:
        # a failed node first: it needs the admin, whatever else is moving
        return Upgradeable(
            "False",
            GateReason.DRIVER_UPGRADE_FAILED,
            f"the driver upgrade failed on {_nodes(failed)}: fix the driver (ocp-gpu status names "
            f"the cause), then relabel {labels.UPGRADE_STATE}=upgrade-required; "
            "OLM holds upgrades of this operator until then",
        )
    if in_flight or outdated:
        # a rollout is mid-way: a new operator version must not take over half of it
        parts = [f"{_nodes(in_flight)} upgrading"] if in_flight else []
        parts += [f"DaemonSet {', '.join(outdated)}"] if outdated else []
        return Upgradeable(
            "False",
            GateReason.DRIVER_UPGRADE_IN_PROGRESS,
            f"a driver rollout is in progress ({'; '.join(parts)}); "
            "OLM holds upgrades of this operator until it ends",
        )
    # every GPU node's driver is current and none failed
    return Upgradeable("True", GateReason.DRIVERS_SETTLED, "no driver rollout in progress and no node failed")


def is_written(current: Iterable[Mapping[str, object]], wanted: Upgradeable) -> bool:
    """The OperatorCondition's conditions already say `wanted` (nothing to write)."""
    for condition in current:
        if condition.get("type") == UPGRADEABLE:
            return (
                condition.get("status") == wanted.status
                and condition.get("reason") == wanted.reason.value
                and condition.get("message") == wanted.message
            )
    return False


def with_condition(
    current: Iterable[Mapping[str, object]], wanted: Upgradeable, now_rfc3339: str
) -> list[dict[str, object]]:
    """The conditions list with `Upgradeable` set to `wanted`, the others kept as they are.

    NB: lastTransitionTime moves only when the status does (metav1.Condition's rule).
    """
    kept: list[dict[str, object]] = []
    new: dict[str, object] = dict(wanted.as_condition(now_rfc3339))
    for condition in current:
        if condition.get("type") == UPGRADEABLE:
            if condition.get("status") == wanted.status and condition.get("lastTransitionTime"):
                new["lastTransitionTime"] = condition["lastTransitionTime"]
            continue
        kept.append(dict(condition))
    return [*kept, new]


def _nodes(names: list[str]) -> str:
    shown = ", ".join(names[:NAMED_NODES])
    more = f" and {len(names) - NAMED_NODES} more" if len(names) > NAMED_NODES else ""
    return f"{len(names)} node(s) ({shown}{more})"

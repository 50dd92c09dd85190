"""How a node's driver pod compares with its DaemonSet's current revision (DESIGN §5).

Decides whether the pod is missing, of an unknown revision, outdated, starting, failing or
Ready, with a sentence for humans.  Never reads the cluster: the upgrade snapshot is given.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Final

from ocp_gpu.model.upgrades import DriverPod, UpgradeNode, UpgradeSnapshot

# A current driver pod whose unready containers restarted more often than this is failing (NVIDIA's).
DRIVER_RESTART_LIMIT: Final = 10


# --- the driver pod of a node -----------------------------------------------------------


class DriverCheck(enum.StrEnum):
    """How a node's driver pod compares with its DaemonSet's current revision."""

    # No driver pod on the node (not scheduled yet, or between two pods).
    MISSING = "missing"
    # The pod has no DaemonSet, or its DaemonSet's current revision is unknown.
    NO_REVISION = "no-revision"
    # The pod's controller-revision-hash is not the DaemonSet's current revision.
    OUTDATED = "outdated"
    # Current, not Ready yet.
    STARTING = "starting"
    # Current, not Ready, and its containers restarted more than DRIVER_RESTART_LIMIT times.
    FAILING = "failing"
    # Current and Ready.
    READY = "ready"


CURRENT: Final = frozenset({DriverCheck.STARTING, DriverCheck.FAILING, DriverCheck.READY})


@dataclasses.dataclass(frozen=True)
class DriverStatus:
    check: DriverCheck
    pod: DriverPod | None
    # For humans: which pod, which revisions, what it waits for.
    detail: str

    @property
    def current(self) -> bool:
        return self.check in CURRENT


def check_driver(node: UpgradeNode, snapshot: UpgradeSnapshot) -> DriverStatus:
    """The node's driver pod against its DaemonSet's current revision (DESIGN §5)."""
    pod = node.driver_pod
    if pod is None:
        # Not scheduled yet, or the old pod is gone and the new one not created yet.
        return DriverStatus(DriverCheck.MISSING, None, "no driver pod on the node")
    revision = snapshot.daemonsets.get(pod.daemonset) if pod.daemonset else None
    if revision is None or revision.current_hash is None:
        # NB: an unknown revision must not read as "outdated": the node would be upgraded for nothing.
        owner = f"DaemonSet {pod.daemonset}" if pod.daemonset else "no DaemonSet"
        return DriverStatus(
            DriverCheck.NO_REVISION, pod, f"driver pod {pod.ref.name}: {owner} has no known current revision"
        )
    if pod.revision_hash != revision.current_hash:
        # The DaemonSet's template changed since this pod was made.
        going = ", terminating" if pod.terminating else ""
        return DriverStatus(
            DriverCheck.OUTDATED,
            pod,
            f"driver pod {pod.ref.name} is outdated (revision {pod.revision_hash or 'none'}, "
            f"{pod.daemonset} is at {revision.current_hash}{going})",
        )
    if pod.ready:
        return DriverStatus(DriverCheck.READY, pod, f"driver pod {pod.ref.name} is current and Ready")
    why = f" ({pod.waiting_reason})" if pod.waiting_reason else ""
    if pod.restart_count > DRIVER_RESTART_LIMIT:
        # NVIDIA's rule: a pod that keeps restarting will not get better by waiting.
        return DriverStatus(
            DriverCheck.FAILING,
            pod,
            f"driver pod {pod.ref.name} is failing: {pod.restart_count} restarts{why}",
        )
    return DriverStatus(DriverCheck.STARTING, pod, f"driver pod {pod.ref.name} is not Ready yet{why}")

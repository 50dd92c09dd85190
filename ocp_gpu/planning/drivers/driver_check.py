"""How a node's driver pod compares with its DaemonSet's current revision (DESIGN §5).

Decides whether the pod is missing, of an unknown revision, outdated, starting, failing or
Ready, with a sentence for humans.  Never reads the cluster: the upgrade snapshot is given.

NB: a pod of an older template (another revision hash) is outdated only when what it installs
differs (planning/driver_currency.outdated_reasons): a new operator, or a change to labels,
probes or the operator's own mounts, is not a new driver.  Such a pod is current
(`DriverStatus.previous_template`); the new template lands at its next natural restart.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from ocp_gpu.model.upgrade_observations import DriverPod, DriverRevision, UpgradeNode, UpgradeSnapshot
from ocp_gpu.planning.drivers import driver_currency

# A current driver pod whose unready containers restarted more often than this is failing (NVIDIA's).
DRIVER_RESTART_LIMIT: Final = 10


# --- the driver pod of a node -----------------------------------------------------------


class DriverCheck(enum.StrEnum):
    """How a node's driver pod compares with its DaemonSet's current revision."""

    # No driver pod on the node (not scheduled yet, or between two pods).
    MISSING = "missing"
    # The pod has no DaemonSet, or its DaemonSet's current revision is unknown.
    NO_REVISION = "no-revision"
    # The pod's controller-revision-hash is not the DaemonSet's current revision, and it installs
    # another driver (planning/driver_currency).
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
    # Current, yet made from an older template of its DaemonSet (it installs the desired driver).
    previous_template: bool = False

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
    previous = pod.revision_hash != revision.current_hash
    if previous:
        # The DaemonSet's template changed since this pod was made: outdated if the driver did.
        reasons = _install_changes(pod, revision)
        if reasons == () and _unhealthy(pod):
            # NB: the rule spares a working driver a restart; one that fails gains from it
            reasons = (f"not healthy on the previous template ({_unhealthy(pod)})",)
        if reasons is None or reasons:
            going = ", terminating" if pod.terminating else ""
            why = f": {'; '.join(reasons)}" if reasons else ""
            return DriverStatus(
                DriverCheck.OUTDATED,
                pod,
                f"driver pod {pod.ref.name} is outdated (revision {pod.revision_hash or 'none'}, "
                f"{pod.daemonset} is at {revision.current_hash}{going}{why})",
            )
    if pod.terminating and previous:
        # NB: going away (someone deleted it): its successor will be of the current template.
        return DriverStatus(DriverCheck.STARTING, pod, f"driver pod {pod.ref.name} is terminating", previous)
    on = f" (on the previous template {pod.revision_hash or 'none'}, the same driver)" if previous else ""
    if pod.ready:
        return DriverStatus(
            DriverCheck.READY, pod, f"driver pod {pod.ref.name} is current and Ready{on}", previous
        )
    why = f" ({pod.waiting_reason})" if pod.waiting_reason else ""
    if pod.restart_count > DRIVER_RESTART_LIMIT:
        # NVIDIA's rule: a pod that keeps restarting will not get better by waiting.
        return DriverStatus(
            DriverCheck.FAILING,
            pod,
            f"driver pod {pod.ref.name} is failing: {pod.restart_count} restarts{why}{on}",
            previous,
        )
    return DriverStatus(
        DriverCheck.STARTING, pod, f"driver pod {pod.ref.name} is not Ready yet{why}{on}", previous
    )


# Waiting reasons of a container that is starting normally, not failing.
_STARTING_REASONS: Final = frozenset({"", "ContainerCreating", "PodInitializing"})


def _unhealthy(pod: DriverPod) -> str:
    """Why a driver pod is failing ("" when it is Ready or only starting)."""
    if pod.ready:
        return ""
    if pod.waiting_reason not in _STARTING_REASONS:
        return pod.waiting_reason
    if pod.restart_count > DRIVER_RESTART_LIMIT:
        return f"{pod.restart_count} restarts"
    return ""


def _install_changes(pod: DriverPod, revision: DriverRevision) -> tuple[str, ...] | None:
    """Why the pod's install is not its DaemonSet's (driver_currency); None: unknown, so it differs."""
    if pod.install is None or revision.install is None:
        # NB: not known either side (a pod without a driver container): the revision rules, as before.
        return None
    return driver_currency.outdated_reasons(pod.install, revision.install)


def on_previous_template(
    pods: Iterable[DriverPod], revisions: Mapping[str, DriverRevision]
) -> list[DriverPod]:
    """The driver pods of an older template of their DaemonSet that install its driver: current.

    By name; a pod whose DaemonSet or current revision is unknown is not counted.
    """
    found = []
    for pod in pods:
        revision = revisions.get(pod.daemonset) if pod.daemonset else None
        if revision is None or revision.current_hash is None or pod.revision_hash == revision.current_hash:
            continue
        if not pod.terminating and _install_changes(pod, revision) == () and not _unhealthy(pod):
            found.append(pod)
    return sorted(found, key=lambda pod: pod.ref.name)


def describe_previous_template(pods: Sequence[DriverPod], named: int = 5) -> str:
    """The DriverPodsOnPreviousTemplate condition's message ("" when there are none)."""
    if not pods:
        return ""
    more = f" (+{len(pods) - named} more)" if len(pods) > named else ""
    names = ", ".join(f"{pod.ref.name} on {pod.node}" for pod in pods[:named])
    return (
        f"{len(pods)} driver pod(s) run an older template of their DaemonSet with the desired driver "
        f"(image, kernel modules and configuration): current, so not restarted; the new template "
        f"applies at their next restart: {names}{more}"
    )

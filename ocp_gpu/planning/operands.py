"""Decisions shared by every operand DaemonSet except the driver's.

The driver's DaemonSets are always `OnDelete`: the upgrade controller decides when a
driver pod restarts (planning/upgrade.py).  Every other operand follows
`spec.daemonsets.updateStrategy`: `RollingUpdate` (the default) lets the DaemonSet
controller replace pods itself, `maxUnavailable` (`daemonsets.rollingUpdate`) at a
time; `OnDelete` leaves the old pods running until someone deletes them.
"""

from __future__ import annotations

from typing import Any

from ocp_gpu.model.policy import ContainerRuntime, DaemonsetsSpec, UpdateStrategy


def update_strategy(daemonsets: DaemonsetsSpec) -> dict[str, Any]:
    """The `spec.updateStrategy` of a non-driver operand DaemonSet."""
    if daemonsets.update_strategy is UpdateStrategy.ON_DELETE:
        return {"type": "OnDelete"}
    limit = daemonsets.max_unavailable
    if isinstance(limit, str) and limit.strip().isdigit():
        # NB: the apiserver takes "25%" or 1, never "1": a count written as a string becomes a number.
        limit = int(limit)
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": limit}}


def container_runtime(configured: ContainerRuntime | None, openshift: bool) -> ContainerRuntime:
    """The node's container runtime: the policy's `operator.defaultRuntime`, else the platform's."""
    if configured is not None:
        return configured
    return ContainerRuntime.CRIO if openshift else ContainerRuntime.CONTAINERD

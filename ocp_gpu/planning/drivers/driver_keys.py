"""Driver keys: which key a GPU node has under a strategy, and which key an existing DaemonSet serves.

A node's key is its RHCOS build (Driver Toolkit), its OS (vanilla) or its kernel + OS
(precompiled), read from NFD labels; an existing DaemonSet is identified by its labels
only, never by its name.
"""

from __future__ import annotations

from collections.abc import Mapping

from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import DriverDaemonSet, DriverKey, GpuNode
from ocp_gpu.planning.drivers.driver_strategy import Strategy

# --- keys -------------------------------------------------------------------

# The NFD labels each strategy needs on a node, as (label key, GpuNode attribute).
_REQUIRED: Mapping[Strategy, tuple[tuple[str, str], ...]] = {
    Strategy.DTK: (
        (labels.OSTREE_VERSION, "ostree_version"),
        (labels.OS_ID, "os_id"),
        (labels.OS_VERSION_ID, "os_version_id"),
    ),
    Strategy.VANILLA: ((labels.OS_ID, "os_id"), (labels.OS_VERSION_ID, "os_version_id")),
    Strategy.PRECOMPILED: (
        (labels.KERNEL_VERSION_FULL, "kernel"),
        (labels.OS_ID, "os_id"),
        (labels.OS_VERSION_ID, "os_version_id"),
    ),
}


def missing_key_labels(node: GpuNode, strategy: Strategy) -> tuple[str, ...]:
    """The NFD labels `strategy` needs that `node` lacks (empty when it can be keyed)."""
    return tuple(label for label, attribute in _REQUIRED[strategy] if not getattr(node, attribute))


def node_key(node: GpuNode, strategy: Strategy) -> DriverKey | None:
    """The node's key under `strategy`, or None when a needed NFD label is missing."""
    # NFD has not labelled the node (fully): it cannot be keyed
    if missing_key_labels(node, strategy):
        return None
    # Driver Toolkit: the RHCOS build, which names the ImageStream tag
    if strategy is Strategy.DTK:
        return DriverKey(str(node.ostree_version))
    # vanilla: the OS, which names the driver image's tag suffix
    if strategy is Strategy.VANILLA:
        return DriverKey(str(node.os_key))
    # precompiled: the modules fit one kernel of one OS
    return DriverKey(f"{node.kernel}-{node.os_key}")


def node_selector(node: GpuNode, strategy: Strategy) -> dict[str, str]:
    """The NFD labels that select exactly the nodes sharing this node's key."""
    if strategy is Strategy.DTK:
        return {labels.OSTREE_VERSION: str(node.ostree_version)}
    selector = {labels.OS_ID: str(node.os_id), labels.OS_VERSION_ID: str(node.os_version_id)}
    if strategy is Strategy.PRECOMPILED:
        selector[labels.KERNEL_VERSION_FULL] = str(node.kernel)
    return selector


def identify_daemonset(daemonset: DriverDaemonSet) -> tuple[Strategy, str] | None:
    """(strategy, key label value) of an existing driver DaemonSet, from its labels only."""
    found = daemonset.labels
    strategy: Strategy | None
    try:
        strategy = Strategy(found.get(labels.DRIVER_STRATEGY, ""))
    except ValueError:
        # no (valid) strategy label: only the Driver Toolkit labels can still identify it
        strategy = Strategy.DTK if found.get(labels.DTK_DAEMONSET) == "true" else None
    # neither ours nor a Driver Toolkit DaemonSet: unidentified, never touched
    if strategy is None:
        return None
    key = found.get(labels.DRIVER_KEY) if strategy is not Strategy.DTK else daemonset.key
    # a strategy but no key label: unidentified as well
    return (strategy, key) if key else None

"""The actions an upgrade plan asks of the reconciler before it writes a node's transition.

Plain records, one per kind of work (cordon, uncordon, delete GPU pods, evict pods, delete the
outdated driver pod); `planning.upgrades.upgrade_table` decides which, `kube/upgrading` carries them out.
Never does any I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ocp_gpu.model.upgrade_observations import PodRef

# --- actions: what the reconciler does before writing a transition ----------------------


@dataclasses.dataclass(frozen=True)
class Cordon:
    """Mark the node unschedulable; `annotations` go in the same patch (the upgrade's marker)."""

    annotations: Mapping[str, str | None]


@dataclasses.dataclass(frozen=True)
class Uncordon:
    """Mark the node schedulable again (only ever a cordon the upgrade made itself)."""


@dataclasses.dataclass(frozen=True)
class DeletePods:
    """Delete these GPU pods (gpuPodDeletion)."""

    pods: tuple[PodRef, ...]


@dataclasses.dataclass(frozen=True)
class EvictPods:
    """Evict these pods through the eviction API (drain); a PodDisruptionBudget may refuse."""

    pods: tuple[PodRef, ...]


@dataclasses.dataclass(frozen=True)
class DeleteDriverPod:
    """Delete the outdated driver pod; its DaemonSet (OnDelete) creates a current one."""

    pod: PodRef


Action = Cordon | Uncordon | DeletePods | EvictPods | DeleteDriverPod

"""What the operator remembers of a Node: a small frozen record, not the Node.

NB: at thousands of nodes a full Node object is tens of kilobytes (images,
conditions, managed fields); we keep only the labels we decide on and a few
status fields, so memory stays flat (DESIGN §6).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import NewType

from ocp_gpu.model import labels

NodeName = NewType("NodeName", str)

# Label prefixes whose values decisions depend on; every other label is dropped.
_KEPT_PREFIXES = (
    labels.NFD_NVIDIA_PCI,
    # OSTREE_VERSION, ID, VERSION_ID, RHEL_VERSION, OPENSHIFT_VERSION: the driver keys and image tags.
    "feature.node.kubernetes.io/system-os_release.",
    labels.KERNEL_VERSION_FULL,
    "nvidia.com/",
)
# Annotation prefix kept: the upgrade controller's memory (cordon owner, timers, enabled flag).
_KEPT_ANNOTATION_PREFIX = "nvidia.com/gpu-driver-upgrade"


@dataclasses.dataclass(frozen=True, slots=True)
class NodeFacts:
    name: NodeName
    # Only the labels in _KEPT_PREFIXES.
    labels: Mapping[str, str]
    os_image: str
    kernel_version: str
    unschedulable: bool
    # Allocatable `nvidia.com/gpu` as reported by the device plugin (or kwok).
    gpus: int
    # The Ready condition (True unless a Ready condition says otherwise, as NVIDIA reads it).
    ready: bool = True
    # Only the annotations under _KEPT_ANNOTATION_PREFIX.
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def is_gpu_node(self) -> bool:
        """NFD found an NVIDIA PCI device on this node."""
        return self.labels.get(labels.NFD_NVIDIA_PCI) == "true"


def kept_labels(all_labels: Mapping[str, str]) -> dict[str, str]:
    """The subset of a node's labels that NodeFacts keeps: every label of a GPU node.

    NB: a GPU node keeps all its labels, because an NVIDIADriver's nodeSelector may name
    any label (a machine pool, a node role); other nodes keep only the prefixes above.
    NB: interned: thousands of nodes carry the same keys and mostly the same values (an
    RHCOS build, "true"), and each watch event would otherwise hold its own copies.
    """
    gpu = all_labels.get(labels.NFD_NVIDIA_PCI) == "true"
    return {
        sys.intern(key): sys.intern(value)
        for key, value in all_labels.items()
        if gpu or key.startswith(_KEPT_PREFIXES)
    }


# A workload move's memory on the node (planning/operands/workload_moves.py).
_MOVE_ANNOTATIONS = frozenset({labels.WORKLOAD_MOVE_CORDON, labels.WORKLOAD_MOVE_DRAIN_START})


def kept_annotations(all_annotations: Mapping[str, str]) -> dict[str, str]:
    """The subset of a node's annotations that NodeFacts keeps (the upgrade controller's, and the
    cordon and drain timer of a workload move)."""
    return {
        key: value
        for key, value in all_annotations.items()
        if key.startswith(_KEPT_ANNOTATION_PREFIX) or key in _MOVE_ANNOTATIONS
    }

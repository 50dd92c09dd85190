"""What the operator remembers of a Node: a small frozen record, not the Node.

NB: at thousands of nodes a full Node object is tens of kilobytes (images,
conditions, managed fields); we keep only the labels we decide on and a few
status fields, so memory stays flat (DESIGN §6).
"""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    name: NodeName
    # Only the labels in _KEPT_PREFIXES.
    labels: Mapping[str, str]
    os_image: str
    kernel_version: str
    unschedulable: bool
    # Allocatable `nvidia.com/gpu` as reported by the device plugin (or kwok).
    gpus: int

    @property
    def is_gpu_node(self) -> bool:
        """NFD found an NVIDIA PCI device on this node."""
        return self.labels.get(labels.NFD_NVIDIA_PCI) == "true"


def kept_labels(all_labels: Mapping[str, str]) -> dict[str, str]:
    """The subset of a node's labels that NodeFacts keeps."""
    return {key: value for key, value in all_labels.items() if key.startswith(_KEPT_PREFIXES)}

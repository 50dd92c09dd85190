"""What the node status exporter reports about its node (NVIDIA's gpu_operator_node_* gauges).

Decides, from what one look at the node found (which validation markers exist in
/run/nvidia/validations, how many `nvidia.com/gpu*` devices the node advertises, how many
NVIDIA PCI devices sysfs lists), the value of each gauge, with NVIDIA's meanings (its
node status exporter, `nvidia-validator metrics`), so NVIDIA's alerts read the same numbers.
Never reads files or the API itself (commands/node_status.py does) and never sets a metric.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

from ocp_gpu.planning.operands import validation
from ocp_gpu.planning.operands.validation import Component

# NVIDIA's PCI vendor id, as sysfs writes it in /sys/bus/pci/devices/*/vendor.
NVIDIA_VENDOR: Final = "0x10de"
# Extended resources a device plugin advertises for GPUs (full GPUs, MIG slices, renamed shares).
GPU_RESOURCE_PREFIX: Final = "nvidia.com/"


@dataclass(frozen=True)
class NodeLook:
    """One look at the node; None where the look failed."""

    markers: Collection[str]
    # The node's status.allocatable (None: the node could not be read).
    allocatable: Mapping[str, str] | None
    # The `vendor` file of each PCI device (None: sysfs could not be read).
    pci_vendors: Collection[str] | None


@dataclass(frozen=True)
class NodeStatus:
    driver_ready: int
    toolkit_ready: int
    cuda_ready: int
    plugin_ready: int
    # -1: the node spec could not be read (NVIDIA's sentinel).
    device_plugin_devices: int
    # -1: the PCI devices could not be counted.
    nvidia_pci_devices: int


def _devices(allocatable: Mapping[str, str]) -> int:
    total = 0
    for name, value in allocatable.items():
        if name.startswith(GPU_RESOURCE_PREFIX) and value.isdigit():
            total += int(value)
    return total


def plan_node_status(look: NodeLook) -> NodeStatus:
    """The gauges for one look."""
    ready = {component: int(validation.MARKERS[component] in look.markers) for component in Component}
    return NodeStatus(
        driver_ready=ready[Component.DRIVER],
        toolkit_ready=ready[Component.TOOLKIT],
        cuda_ready=ready[Component.CUDA],
        plugin_ready=ready[Component.PLUGIN],
        # the node could not be read: NVIDIA's -1, so `== 0` alerts do not fire on a read error
        device_plugin_devices=-1 if look.allocatable is None else _devices(look.allocatable),
        nvidia_pci_devices=-1
        if look.pci_vendors is None
        else sum(1 for vendor in look.pci_vendors if vendor.strip().lower() == NVIDIA_VENDOR),
    )

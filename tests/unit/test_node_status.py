"""We test these aspects of planning/node_status (the node status exporter's gauges):

- each validation marker present -> its *_ready gauge 1, absent -> 0;
- devices: the sum of the node's allocatable nvidia.com/* resources (full GPUs, MIG slices,
  renamed shares), -1 when the node could not be read;
- NVIDIA PCI devices: sysfs vendor 0x10de counted (case and newline tolerant), -1 when unreadable.
"""

from __future__ import annotations

from ocp_gpu.planning.operands import node_status_gauges


def test_markers_map_to_ready_gauges() -> None:
    got = node_status_gauges.plan_node_status(
        node_status_gauges.NodeLook(["driver-ready", "plugin-ready"], {}, [])
    )
    assert (got.driver_ready, got.toolkit_ready, got.cuda_ready, got.plugin_ready) == (1, 0, 0, 1)


def test_devices_sum_every_nvidia_resource_and_minus_one_when_unreadable() -> None:
    allocatable = {"cpu": "8", "nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "7", "example.com/x": "3"}
    assert (
        node_status_gauges.plan_node_status(
            node_status_gauges.NodeLook([], allocatable, [])
        ).device_plugin_devices
        == 9
    )
    assert (
        node_status_gauges.plan_node_status(node_status_gauges.NodeLook([], None, [])).device_plugin_devices
        == -1
    )


def test_nvidia_pci_devices_counted_and_minus_one_when_unreadable() -> None:
    vendors = ["0x10de\n", "0x8086\n", "0x10DE", "0x15b3"]
    assert (
        node_status_gauges.plan_node_status(node_status_gauges.NodeLook([], {}, vendors)).nvidia_pci_devices
        == 2
    )
    assert (
        node_status_gauges.plan_node_status(node_status_gauges.NodeLook([], {}, None)).nvidia_pci_devices
        == -1
    )

"""SIMULATION: the vGPU devices NVIDIA's vGPU device manager creates, and what the KubeVirt GPU device
plugin advertises for them.

kwok runs no containers, so no vgpu-device-manager creates mediated devices and no
kubevirt-gpu-device-plugin finds them.  The node agent (node_agent.py) plays both on a vm-vgpu node:

- **The device manager** (NVIDIA/vgpu-device-manager v0.5.0, cmd/nvidia-k8s-vgpu-dm): with a Ready
  `nvidia-vgpu-device-manager` pod and a Ready vGPU manager pod on the node, the config named by the
  node's `nvidia.com/vgpu.config` (else the pod's DEFAULT_VGPU_CONFIG) is read from the file
  CONFIG_FILE of the pod's `vgpu-config` ConfigMap; its entries whose `device-filter` matches the
  node's GPU (or that have none) give each GPU their `vgpu-devices`.  The devices made are the node
  annotation `VGPU_DEVICES` (JSON, vGPU type -> count on the node) and the state label
  `nvidia.com/vgpu.config.state` becomes `success`; a config that is not in the file leaves the
  devices as they are and the state `failed` (its `assert --valid-config`).  Without a Ready vGPU
  manager pod the devices go (they live in the vGPU host driver).
- **The plugin** (NVIDIA/kubevirt-gpu-device-plugin v1.6.0, pkg/device_plugin/device_plugin.go
  createVgpuIDMap and getDeviceName): each mediated device's type name (`mdev_type/name`, which the
  vGPU host driver gives as `NVIDIA <type>`, e.g. `NVIDIA A10-4Q`) with its runs of whitespace made
  `_`; it is no PCI device name in pci.ids, so that is the resource: `nvidia.com/NVIDIA_A10-4Q`, one
  device per mediated device.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from ocp_gpu_harness import vfio_devices

# The node annotation the simulated device manager writes: the vGPU devices on the node, by type.
VGPU_DEVICES: Final = "ocp-gpu.harness/vgpu-devices"
# What the vGPU host driver names a type in mdev_type/name.
MDEV_NAME_PREFIX: Final = "NVIDIA "


def resource_name(vgpu_type: str) -> str:
    """The plugin's resource for mediated devices of a vGPU type."""
    name = re.sub(r"\s+", "_", MDEV_NAME_PREFIX + vgpu_type)
    return f"{vfio_devices.NAMESPACE}/{name}"


def device_filter(product: str) -> str:
    """The device manager's `device-filter` for a simulated GPU product: 0x<device><vendor>."""
    return f"0x{vfio_devices.PCI_DEVICES[product][0].upper()}10DE"


def devices_for(document: Any, config: str, product: str, gpus: int) -> dict[str, int] | None:
    """The vGPU devices config `config` makes on `gpus` GPUs of `product`; None: no such config."""
    entries = ((document or {}).get("vgpu-configs") or {}).get(config)
    if not isinstance(entries, list):
        return None
    made: dict[str, int] = {}
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        wanted = entry.get("device-filter")
        filters = wanted if isinstance(wanted, list) else [wanted] if wanted else []
        if filters and device_filter(product).upper() not in [str(f).upper() for f in filters]:
            continue
        for vgpu_type, count in (entry.get("vgpu-devices") or {}).items():
            made[str(vgpu_type)] = made.get(str(vgpu_type), 0) + int(count) * gpus
    return made


def created(annotations: Mapping[str, str]) -> dict[str, int] | None:
    """The vGPU devices the simulated device manager made on a node (None: none made)."""
    text = annotations.get(VGPU_DEVICES)
    if not text:
        return None
    loaded = json.loads(text)
    return {str(k): int(v) for k, v in loaded.items()} if isinstance(loaded, dict) else None

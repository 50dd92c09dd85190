"""SIMULATION: the resources NVIDIA's KubeVirt GPU device plugin advertises for passed-through GPUs.

kwok runs no containers, so no kubevirt-gpu-device-plugin finds GPUs bound to vfio-pci.  The
node agent (node_agent.py) advertises, for a node whose GPUs the simulated VFIO manager bound
(`VFIO_BOUND`) and whose sandbox device plugin pod is Ready, what the plugin would: one resource
per GPU model, `nvidia.com/<name>`, with one device per GPU.

The name is the plugin's (NVIDIA/kubevirt-gpu-device-plugin v1.6.0,
pkg/device_plugin/device_plugin.go getDeviceName, and generic_device_plugin.go's
DeviceNamespace "nvidia.com"): the PCI device's name in the pci.ids file the image ships
(`/usr/pci.ids`, the repository's utils/pci.ids), upper-cased, `/` and `.` and runs of spaces
made `_`, and every other character but letters, digits and `_` dropped; e.g. device 2236
"GA102GL [A10]" -> `nvidia.com/GA102GL_A10`.  The pci.ids names of the products the harness
simulates are below (the lines of that file, by device ID).
"""

from __future__ import annotations

import re
from typing import Final

# The node annotation the simulated VFIO manager writes once it bound the node's GPUs to vfio-pci
# (`vfio-manage bind --all`); removed when its pod goes (its preStop unbinds them).
VFIO_BOUND: Final = "ocp-gpu.harness/vfio-bound"
# The plugin's resource namespace (generic_device_plugin.go DeviceNamespace).
NAMESPACE: Final = "nvidia.com"
# A simulated GPU product (GFD's nvidia.com/gpu.product) -> (PCI device ID, its name in the
# plugin's pci.ids at v1.6.0).
PCI_DEVICES: Final = {
    "NVIDIA-L40S": ("26b9", "AD102GL [L40S]"),
    "NVIDIA-A10": ("2236", "GA102GL [A10]"),
    "NVIDIA-A100-SXM4-80GB": ("20b2", "GA100 [A100 SXM4 80GB]"),
    "NVIDIA-A100-SXM4-40GB": ("20b0", "GA100 [A100 SXM4 40GB]"),
    "NVIDIA-H100-80GB-HBM3": ("2330", "GH100 [H100 SXM5 80GB]"),
    "NVIDIA-A30": ("20b7", "GA100GL [A30 PCIe]"),
    "Tesla-T4": ("1eb8", "TU104GL [Tesla T4]"),
}


def device_name(pci_name: str) -> str:
    """The plugin's device name for a pci.ids device name (getDeviceName's steps, in its order)."""
    name = pci_name.strip().upper().replace("/", "_").replace(".", "_")
    name = re.sub(r"\s+", "_", name)
    return re.sub(r"[^a-zA-Z0-9_.]+", "", name)


def resource_name(product: str) -> str:
    """The resource the plugin advertises for a GPU of this product; KeyError names the known ones."""
    if product not in PCI_DEVICES:
        raise KeyError(f"no PCI device known for {product!r}; known: {', '.join(sorted(PCI_DEVICES))}")
    return f"{NAMESPACE}/{device_name(PCI_DEVICES[product][1])}"

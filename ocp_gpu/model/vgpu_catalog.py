"""The vGPU types the vGPU device manager's default ConfigMap offers, and the configs it names.

NVIDIA's `default-vgpu-devices-config` (assets/state-vgpu-device-manager/0500_configmap.yaml
at v26.7.0) has one config per vGPU type (`<type>: [{devices: all, vgpu-devices: {<type>: N}}]`)
and a `default` config picking one type per GPU model (`device-filter`: the PCI device and
vendor ID).  For the time-sliced vGPU types of the products below it follows one rule, which
this module generates instead of copying the file (checked against NVIDIA's file: every one
of its 123 such entries is what `default_configs` generates):

- a Q (virtual workstation) type per divisor `s` of the GPU's framebuffer in GB, a C (compute)
  type per divisor of 4 GB or more, named `<product>-<s><Q|C>`;
- each fits `min(framebuffer / s, 32)` times on a GPU (NVIDIA's limit of 32 vGPUs per GPU);
- `default`: the half-framebuffer Q type, twice per GPU.

NB: a subset: NVIDIA's file also lists MIG-backed types (A30-1-6C, A100D-3-40C, ...), the
Hopper and Blackwell C types and older GPUs; an admin who needs them names a ConfigMap of their
own (`vgpuDeviceManager.config.name`, docs/virtual-machines.md).  Pure data.
"""

from __future__ import annotations

from typing import Any, Final

# A product's vGPU type prefix -> (PCI device ID, framebuffer per GPU in GB).
PRODUCTS: Final[dict[str, tuple[str, int]]] = {
    "A2": ("25B6", 16),
    "A10": ("2236", 24),
    "A16": ("25B6", 16),
    "A40": ("2235", 48),
    "L2": ("27B6", 24),
    "L4": ("27B8", 24),
    "L20": ("26BA", 48),
    "L40": ("26B5", 48),
    "L40S": ("26B9", 48),
}
# NVIDIA's limit of vGPUs on one physical GPU.
MAX_PER_GPU: Final = 32
# The config a node without nvidia.com/vgpu.config gets (vgpuDeviceManager.config.default's default).
DEFAULT_CONFIG: Final = "default"
CONFIG_KEY: Final = "config.yaml"
NVIDIA_VENDOR: Final = "10DE"


def vgpu_types(product: str) -> dict[str, int]:
    """Every time-sliced vGPU type of a product and how many fit on one GPU."""
    framebuffer = PRODUCTS[product][1]
    sizes = [size for size in range(1, framebuffer + 1) if framebuffer % size == 0]
    types: dict[str, int] = {}
    for letter, smallest in (("Q", 1), ("C", 4)):
        for size in sizes:
            if size >= smallest:
                types[f"{product}-{size}{letter}"] = min(framebuffer // size, MAX_PER_GPU)
    return types


def default_type(product: str) -> str:
    """The type the `default` config creates on a GPU of this product: half its framebuffer, Q."""
    return f"{product}-{PRODUCTS[product][1] // 2}Q"


def default_configs() -> dict[str, Any]:
    """The vgpu-device-manager config file (`version: v1`, `vgpu-configs`)."""
    configs: dict[str, Any] = {}
    for product in PRODUCTS:
        for name, count in vgpu_types(product).items():
            configs[name] = [{"devices": "all", "vgpu-devices": {name: count}}]
    configs[DEFAULT_CONFIG] = [
        {
            "device-filter": f"0x{device}{NVIDIA_VENDOR}",
            "devices": "all",
            "vgpu-devices": {default_type(product): 2},
        }
        for product, (device, _) in PRODUCTS.items()
    ]
    return {"version": "v1", "vgpu-configs": configs}

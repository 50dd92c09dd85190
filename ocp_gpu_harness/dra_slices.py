"""SIMULATION: the ResourceSlices NVIDIA's DRA kubelet plugin publishes for one node's GPUs.

kwok runs no kubelet plugin, so nothing announces a node's GPUs to the scheduler's DRA
allocator. The node agent (node_agent.py) publishes, once the DRA kubelet plugin pod is
Ready on a node with simulated GPUs, what NVIDIA's plugin would, and removes it when the
pod goes; the allocation itself is the real kube-scheduler's.  Pure: this module builds
the slice; the agent writes it.

What it assumes of the real plugin, checked against kubernetes-sigs/dra-driver-nvidia-gpu
(NVIDIA's k8s-dra-driver-gpu, moved there) at commit 95932046 (`VERSION` v0.5.0-dev, the
newest source we have of v0.5.0, the image NVIDIA's operator v26.7.0 ships), the same at tag
v0.4.1 for every name used here:
- the driver name `gpu.nvidia.com` (cmd/gpu-kubelet-plugin/main.go DriverName);
- without the DynamicMIG feature gate (its default) one slice holds every device, in one pool
  named after the node, `spec.nodeName` the node, owned by the Node (driver.go
  publishResources; the kubelet plugin helper's owner), named `0-gpu.nvidia.com-<node>-<random>`
  (k8s.io/dynamic-resource-allocation/resourceslice: `<index>-<driver>-<owner>-`);
- a whole GPU is device `gpu-<minor>` with attributes `type` "gpu", `uuid`, `productName` (NVML's
  name, with spaces), `brand`, `architecture` (go-nvlib's strings: "Ampere", "Hopper", "Ada
  Lovelace"), `cudaComputeCapability`, `driverVersion` and `cudaDriverVersion` as semver
  versions (Masterminds' loose parse: "9.0" is "9.0.0", "550.54.15" stays), the standard
  `resource.kubernetes.io/pciBusID`, and capacity `memory` in bytes (deviceinfo.go
  GpuInfo.Attributes, partitions.go fullGpuCapacity);
- under MIG (static: MIG devices made by the MIG manager) the GPU itself is not announced, each
  MIG device is `gpu-<minor>-mig-<profile without dots>-<GI profile id>-<placement start>`
  with `type` "mig", `uuid`, `parentUUID`, `profile` and the parent's product, brand,
  architecture and versions, capacities `multiprocessors`, `copyEngines`, `decoders`,
  `encoders`, `jpegEngines`, `ofaEngines`, `memory` (bytes) and one `memorySlice<i>` per
  memory slice it spans (mig.go CommonAttributesMig, CommonCapacitiesMig, ToCanonicalName;
  deviceinfo.go MigDeviceInfo.GetDevice; nvlib.go: a MIG-enabled GPU announces only its
  MIG devices).

The hardware facts (names, memory, SMs per slice, placements) are the simulation's own table
for the products the harness uses, close to what NVML reports, not read from NVML.

SIMULATION of the compute-domain kubelet plugin (the plugin pod's `compute-domains` container,
ComputeDomains on), checked against the same commit: at start it publishes, whether or not a
ComputeDomain exists, one slice of driver `compute-domain.nvidia.com` in the pool named after the
node (cmd/compute-domain-kubelet-plugin/main.go DriverName; driver.go NewDriver,
computeDomainPublishedDevices) with IMEX channel 0 only (the others are never published by the
node) and, unless the HostManagedIMEXDaemon feature gate is on (alpha, off by default), the
compute-domain daemon device: `channel-0` and `daemon-0`, each with attributes `type` ("channel",
"daemon") and `id` (an int, 0) and no capacity (deviceinfo.go GetDevice, types.go). NVIDIA's
DeviceClass `compute-domain-default-channel.nvidia.com` selects channel 0 by those attributes.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import Any, Final

from ocp_gpu.model import resource_claims

DRIVER: Final = resource_claims.GPU_DRIVER
# The compute-domain kubelet plugin's driver (ComputeDomains: IMEX channels and daemons).
COMPUTE_DOMAIN_DRIVER: Final = "compute-domain.nvidia.com"
# The standard attribute of a device's PCI address (k8s.io/dynamic-resource-allocation/deviceattribute).
PCI_BUS_ID: Final = "resource.kubernetes.io/pciBusID"
# The driver version announced when no driver pod on the node tells one (the GFD simulation's).
DEFAULT_DRIVER_VERSION: Final = "550.54.15"
# CUDA driver API version per driver branch (NVML's SystemGetCudaDriverVersion, as "major.minor").
CUDA_BY_BRANCH: Final = {
    "535": "12.2",
    "550": "12.4",
    "565": "12.7",
    "570": "12.8",
    "575": "12.9",
    "580": "13.0",
}
# Marks the slices the simulation wrote (a real plugin's carry no label; tests tell them apart).
SIMULATED_LABEL: Final = "ocp-gpu.harness/simulated"


@dataclasses.dataclass(frozen=True)
class Product:
    """One GPU product as NVML describes it."""

    nvml_name: str
    architecture: str
    brand: str
    compute_capability: str
    memory_mib: int
    # SMs per MIG compute slice (0: no MIG) and memory slices of the whole GPU.
    sms_per_slice: int = 0
    memory_slices: int = 8


# GFD's nvidia.com/gpu.product (NVML's name, spaces as dashes) -> the product.
PRODUCTS: Final = {
    "NVIDIA-L40S": Product("NVIDIA L40S", "Ada Lovelace", "Nvidia", "8.9", 46068),
    "NVIDIA-A100-SXM4-40GB": Product("NVIDIA A100-SXM4-40GB", "Ampere", "Nvidia", "8.0", 40960, 14),
    "NVIDIA-A100-PCIE-40GB": Product("NVIDIA A100-PCIE-40GB", "Ampere", "Nvidia", "8.0", 40960, 14),
    "NVIDIA-A100-SXM4-80GB": Product("NVIDIA A100-SXM4-80GB", "Ampere", "Nvidia", "8.0", 81920, 14),
    "NVIDIA-A100-80GB-PCIe": Product("NVIDIA A100 80GB PCIe", "Ampere", "Nvidia", "8.0", 81920, 14),
    "NVIDIA-H100-80GB-HBM3": Product("NVIDIA H100 80GB HBM3", "Hopper", "Nvidia", "9.0", 81559, 16),
    "NVIDIA-H100-PCIe": Product("NVIDIA H100 PCIe", "Hopper", "Nvidia", "9.0", 81559, 16),
    "NVIDIA-A30": Product("NVIDIA A30", "Ampere", "Nvidia", "8.0", 24576, 14, memory_slices=4),
}
# NVML's GPU instance profile ids by compute slices (NVML_GPU_INSTANCE_PROFILE_*), "+me" (REV1)
# and the "1g" with twice the memory (REV2).
_GI_PROFILE_IDS: Final = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
_GI_PROFILE_ME: Final = {1: 7, 2: 12}
_GI_PROFILE_1G_DOUBLE: Final = 9


def product(name: str) -> Product:
    """The product GFD calls `name`; an unknown one is taken for an 80 GB Hopper."""
    return PRODUCTS.get(name) or Product(name.replace("-", " "), "Hopper", "Nvidia", "9.0", 81920, 16)


def driver_version_of(image: str) -> str | None:
    """The driver version in a driver image's tag (`...:550.54.15-rhcos4.16`); None if none is there."""
    if "@" in image or ":" not in image.rsplit("/", 1)[-1]:
        # By digest (the release's default), or no tag: the version is not in the reference.
        return None
    version = image.rsplit(":", 1)[1].split("-", 1)[0]
    parts = version.split(".")
    return version if len(parts) in (2, 3) and all(p.isdigit() for p in parts) else None


def semver(version: str) -> str:
    """A version as the plugin announces it (Masterminds semver, loose): missing parts are 0,
    leading zeros dropped."""
    parts = [str(int(part)) for part in version.split(".")]
    return ".".join([*parts, "0", "0"][:3])


def _uuid(prefix: str, *names: str) -> str:
    return f"{prefix}-{uuid.uuid5(uuid.NAMESPACE_URL, '/'.join(('ocp-gpu-sim', *names)))}"


def _common(gpu: Product, driver_version: str) -> dict[str, dict[str, str]]:
    cuda = CUDA_BY_BRANCH.get(driver_version.split(".", 1)[0], "12.4")
    return {
        "productName": {"string": gpu.nvml_name},
        "brand": {"string": gpu.brand},
        "architecture": {"string": gpu.architecture},
        "cudaComputeCapability": {"version": semver(gpu.compute_capability)},
        "driverVersion": {"version": semver(driver_version)},
        "cudaDriverVersion": {"version": semver(cuda)},
    }


def _slice_gb(gpu: Product) -> int:
    """The GB of one memory slice (a 40 GB A100: 5; 80 GB: 10; an A30: 6)."""
    return max(1, (gpu.memory_mib // 1024 + gpu.memory_slices - 1) // gpu.memory_slices)


def _profile_facts(profile: str, gpu: Product) -> tuple[int, int, int, bool]:
    """(compute slices, memory GB, GI profile id, media extensions) of a profile like `1g.10gb+me`."""
    base, _, extension = profile.partition("+")
    slices_text, _, memory_text = base.partition(".")
    slices = int(slices_text.rstrip("g"))
    memory_gb = int(memory_text.rstrip("gb"))
    media = extension == "me"
    if media:
        profile_id = _GI_PROFILE_ME.get(slices, _GI_PROFILE_IDS[slices])
    elif slices == 1 and memory_gb > _slice_gb(gpu):
        # A 1g profile with more than one memory slice (1g.10gb on a 40 GB A100, 1g.20gb on 80 GB).
        profile_id = _GI_PROFILE_1G_DOUBLE
    else:
        profile_id = _GI_PROFILE_IDS[slices]
    return slices, memory_gb, profile_id, media


def _mig_device(
    node: str,
    minor: int,
    gpu_uuid: str,
    profile: str,
    start: int,
    size: int,
    gpu: Product,
    common: Mapping[str, Any],
) -> dict[str, Any]:
    slices, memory_gb, profile_id, media = _profile_facts(profile, gpu)
    name_profile = profile.replace(".", "").replace("+", "-")
    capacity: dict[str, dict[str, str]] = {
        "multiprocessors": {"value": str(slices * gpu.sms_per_slice)},
        "copyEngines": {"value": str(slices)},
        "decoders": {"value": str({1: 0, 2: 1, 3: 2, 4: 2, 7: 5}.get(slices, slices // 2) + int(media))},
        "encoders": {"value": "0"},
        "jpegEngines": {"value": "1" if media or slices == 7 else "0"},
        "ofaEngines": {"value": "1" if media or slices == 7 else "0"},
        "memory": {"value": f"{memory_gb * 1024}Mi"},
    }
    for index in range(start, start + size):
        capacity[f"memorySlice{index}"] = {"value": "1"}
    return {
        "name": f"gpu-{minor}-mig-{name_profile}-{profile_id}-{start}",
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": _uuid("MIG", node, str(minor), profile, str(start))},
            "parentUUID": {"string": gpu_uuid},
            "profile": {"string": profile},
            **common,
        },
        "capacity": capacity,
    }


def _placements(per_gpu: Mapping[str, int], gpu: Product) -> list[tuple[str, int, int]]:
    """(profile, placement start, size in memory slices) of each MIG device on one GPU: the
    largest first, each at the next start aligned to its size (NVML places them alike)."""
    slice_gb = _slice_gb(gpu)
    wanted = sorted(
        ((profile, count) for profile, count in per_gpu.items() if count > 0),
        key=lambda item: -_profile_facts(item[0], gpu)[1],
    )
    placed: list[tuple[str, int, int]] = []
    cursor = 0
    for profile, count in wanted:
        size = max(1, -(-_profile_facts(profile, gpu)[1] // slice_gb))
        for _ in range(count):
            start = -(-cursor // size) * size
            placed.append((profile, start, size))
            cursor = start + size
    return placed


def devices(
    node: str, product_name: str, gpus: int, mig_devices: Mapping[str, int] | None, driver_version: str
) -> list[dict[str, Any]]:
    """The devices of the node's slice: a GPU each, or its MIG devices when MIG mode is on.

    `mig_devices`: the node's MIG devices (profile -> count over all its GPUs, spread evenly,
    as the MIG manager makes them); None when MIG mode is off.
    """
    gpu = product(product_name)
    common = _common(gpu, driver_version)
    found: list[dict[str, Any]] = []
    for minor in range(gpus):
        gpu_uuid = _uuid("GPU", node, str(minor))
        if mig_devices is None:
            found.append(
                {
                    "name": f"gpu-{minor}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "uuid": {"string": gpu_uuid},
                        **common,
                        PCI_BUS_ID: {"string": f"0000:{0x18 + 0x10 * minor:02x}:00.0"},
                    },
                    "capacity": {"memory": {"value": f"{gpu.memory_mib}Mi"}},
                }
            )
            continue
        per_gpu = {profile: count // gpus for profile, count in mig_devices.items()} if gpus else {}
        mig_common = {**common, PCI_BUS_ID: {"string": f"0000:{0x18 + 0x10 * minor:02x}:00.0"}}
        for profile, start, size in _placements(per_gpu, gpu):
            found.append(_mig_device(node, minor, gpu_uuid, profile, start, size, gpu, mig_common))
    # NB: sorted by name, as the plugin's DynamicMIG path sorts them (without it, the order of a
    # Go map: any order is the plugin's); the scheduler tries them in this order.
    return sorted(found, key=lambda device: str(device["name"]))


def compute_domain_devices() -> list[dict[str, Any]]:
    """The devices of a node's compute-domain.nvidia.com slice: IMEX channel 0 and the daemon."""
    return [
        {"name": f"{kind}-0", "attributes": {"type": {"string": kind}, "id": {"int": 0}}}
        for kind in ("channel", "daemon")
    ]


def resource_slice(
    node: str, node_uid: str, slice_devices: list[dict[str, Any]], generation: int, driver: str = DRIVER
) -> dict[str, Any]:
    """The one ResourceSlice of the node's pool of `driver`, as the plugin's slice controller creates it."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": f"0-{driver}-{node}-",
            "labels": {SIMULATED_LABEL: "true"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
            ],
        },
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": slice_devices,
        },
    }

"""ResourceClaims (Dynamic Resource Allocation, `resource.k8s.io/v1`) as the operator sees them.

A pod may hold a GPU without asking for `nvidia.com/gpu`: through a ResourceClaim that the
scheduler allocated from a device of NVIDIA's DRA driver (`gpu.nvidia.com`). The driver upgrade
must treat such a pod as a GPU pod, as NVIDIA's operator does (its `PodHasNVIDIAGPUClaim`,
controllers/nodelabeling_controller.go at v26.7.0, used by the pod-deletion filter in
cmd/gpu-operator/main.go). Here: what one claim holds (`ClaimHold`), decided from its
allocation results, and the key a claim is known by. Pure data; no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

# The name of NVIDIA's DRA driver for GPUs and MIG devices (k8s-dra-driver-gpu; NVIDIA's
# operator calls it NVIDIAGPUDRADriverName): its ResourceSlices and allocation results carry it.
GPU_DRIVER: Final = "gpu.nvidia.com"
# The API group and version the operator reads claims in (GA since Kubernetes 1.34).
API_GROUP: Final = "resource.k8s.io"
API_VERSION: Final = "v1"
CLAIMS_PLURAL: Final = "resourceclaims"


class ClaimHold(enum.Enum):
    """What one ResourceClaim holds, as far as a driver upgrade cares."""

    # Not allocated (yet): no device is held (NVIDIA: `Status.Allocation == nil`).
    UNALLOCATED = "unallocated"
    # Allocated, but no device of gpu.nvidia.com.
    OTHER = "other"
    # Allocated gpu.nvidia.com devices with adminAccess only: a monitoring view that consumes
    # nothing (NVIDIA's pod-deletion filter passes includeAdminAccess=false), but whose devices
    # the DRA kubelet plugin still has to unprepare (its teardown ordering counts them).
    GPU_ADMIN_ACCESS = "gpu-admin-access"
    # Allocated with at least one gpu.nvidia.com device: its pods are GPU pods.
    GPU = "gpu"


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One entry of a claim's `status.allocation.devices.results`."""

    driver: str
    # The pool (NVIDIA's DRA driver names its pools after the node) and the device in it.
    pool: str = ""
    device: str = ""
    admin_access: bool = False


def claim_hold(allocated: bool, devices: Iterable[AllocatedDevice]) -> ClaimHold:
    """What a claim holds, from whether it is allocated and its allocation's devices."""
    if not allocated:
        # No allocation: nothing prepared on any node for it.
        return ClaimHold.UNALLOCATED
    admin_view = False
    for device in devices:
        if device.driver == GPU_DRIVER and not device.admin_access:
            # A GPU consumed through the claim.
            return ClaimHold.GPU
        admin_view = admin_view or device.driver == GPU_DRIVER
    return ClaimHold.GPU_ADMIN_ACCESS if admin_view else ClaimHold.OTHER


def claim_key(namespace: str, name: str) -> str:
    """The key of a claim in the operator's view: claims are namespaced, names are not unique."""
    return f"{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class PublishedPool:
    """One ResourceSlice of NVIDIA's DRA driver: the node it is for, its pool and device names."""

    node: str
    pool: str
    devices: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """A node's GPU devices through DRA: how many its slices publish, how many claims hold."""

    published: int = 0
    allocated: int = 0


def devices_by_node(
    slices: Iterable[PublishedPool], allocations: Iterable[AllocatedDevice]
) -> dict[str, NodeDevices]:
    """Per node, the gpu.nvidia.com devices published and allocated (`ocp-gpu status`).

    A device is counted once however many claims share it; an allocation with adminAccess
    consumes nothing and is not counted; one whose pool no slice names any more is counted on
    the node the pool is named after (NVIDIA's DRA driver names each node's pool after it).
    """
    pool_node: dict[str, str] = {}
    published: dict[str, set[str]] = {}
    for found in slices:
        pool_node[found.pool] = found.node
        published.setdefault(found.node, set()).update(f"{found.pool}/{name}" for name in found.devices)
    allocated: dict[str, set[str]] = {}
    for device in allocations:
        if device.driver != GPU_DRIVER or device.admin_access:
            # Another driver's, or a monitoring view that consumes nothing.
            continue
        node = pool_node.get(device.pool, device.pool)
        allocated.setdefault(node, set()).add(f"{device.pool}/{device.device}")
    return {
        node: NodeDevices(len(published.get(node, ())), len(allocated.get(node, ())))
        for node in published.keys() | allocated.keys()
    }

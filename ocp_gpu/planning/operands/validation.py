"""What the node validator (`ocp-gpu validate`) decides: markers, workload verdicts, the GPU resource.

Per node, the GPU stack starts in order, and each step's validation leaves a marker
file in /run/nvidia/validations/ that the next operand's init container waits for
(DESIGN §4): `driver-ready`, `toolkit-ready`, `cuda-ready`, `plugin-ready`.

- `markers_to_clear`: a validation that starts or fails removes its own marker and
  every later one, so nothing downstream starts on a step that is not (or no longer) valid.
- `judge_cuda_pod` / `judge_plugin_pod`: from a workload pod's status, whether the
  validation is done, passed, and what to tell the admin (the failure names what
  failed and what to check).  The cuda workload must complete (vectorAdd ran on the
  GPU); the plugin workload must be scheduled and start (the device plugin
  advertised the resource and the kubelet allocated one).
- `select_gpu_resource`: which extended resource the plugin workload requests.

Pure: no I/O, no clock (callers pass what they observed).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, Final

from ocp_gpu.model import labels
from ocp_gpu.model.policy import resource_config


class Component(enum.StrEnum):
    """What `ocp-gpu validate` validates, in the order a node's GPU stack starts."""

    DRIVER = "driver"
    TOOLKIT = "toolkit"
    CUDA = "cuda"
    PLUGIN = "plugin"


# The marker file each validation writes, in stack order (NVIDIA's names).
MARKERS: Final = {
    Component.DRIVER: "driver-ready",
    Component.TOOLKIT: "toolkit-ready",
    Component.CUDA: "cuda-ready",
    Component.PLUGIN: "plugin-ready",
}
_GPU: Final = f"{resource_config.RESOURCE_PREFIX}/{resource_config.GPU}"
_MIG_PREFIX: Final = f"{resource_config.RESOURCE_PREFIX}/mig-"
# Waiting reasons that will not go away by themselves (the kubelet retries, but an admin must act).
_STUCK_REASONS: Final = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError", "CrashLoopBackOff"}
)


def markers_to_clear(component: Component) -> tuple[str, ...]:
    """The marker files a validation of `component` owns: its own and every later one."""
    order = list(MARKERS)
    return tuple(MARKERS[later] for later in order[order.index(component) :])


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Where a workload pod stands: done (passed or failed) or still going, and why."""

    done: bool
    passed: bool
    # What the pod is doing or why it failed, naming the pod and what to check.
    message: str


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _terminated_failure(pod: Mapping[str, Any]) -> str:
    """How the failed container ended: 'vectoradd exited 1 (Error): <its termination message>'."""
    for container in _containers(pod):
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated and terminated.get("exitCode", 0) != 0:
            code, reason = terminated.get("exitCode"), terminated.get("reason", "")
            detail = f"container {container.get('name')} exited {code} ({reason})"
            message = str(terminated.get("message") or "").strip()
            return f"{detail}: {message}" if message else detail
    status = pod.get("status") or {}
    return str(status.get("message") or status.get("reason") or "no container reported an exit code")


def _stuck(pod: Mapping[str, Any]) -> str | None:
    """A container waiting for a reason that needs an admin (bad image, crash loop), or None."""
    for container in _containers(pod):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _STUCK_REASONS:
            message = str(waiting.get("message") or "").strip()
            stuck = f"container {container.get('name')} is in {waiting['reason']}"
            return f"{stuck}: {message}" if message else stuck
    return None


def _unschedulable(pod: Mapping[str, Any]) -> str | None:
    """The scheduler's reason when it could not place the pod, or None."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "not scheduled")
    return None


def _name(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def judge_cuda_pod(pod: Mapping[str, Any]) -> Verdict:
    """The cuda workload (vectorAdd through the NVIDIA runtime): it must run to completion."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    what = f"CUDA workload pod {_name(pod)}"
    if phase == "Succeeded":
        # vectorAdd ran on the GPU and checked its result.
        return Verdict(True, True, f"{what} completed")
    if phase == "Failed":
        return Verdict(
            True,
            False,
            f"{what} failed: {_terminated_failure(pod)}; check its log, the driver and "
            "container-toolkit pods on this node, and the RuntimeClass it runs with",
        )
    stuck = _stuck(pod)
    if stuck is not None:
        # Still "going", but it will not complete by itself: say so while waiting.
        return Verdict(False, False, f"{what}: {stuck}; check the image and pull secrets")
    return Verdict(False, False, f"{what} is {phase}, waiting for it to complete")


def judge_plugin_pod(pod: Mapping[str, Any]) -> Verdict:
    """The device-plugin workload: scheduled onto this node with one GPU, and started."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    what = f"device plugin workload pod {_name(pod)}"
    containers = status.get("containerStatuses") or []
    # NB: a container is started once it runs (kwok, like older kubelets, may not report `started`).
    started = any(c.get("started") or (c.get("state") or {}).get("running") is not None for c in containers)
    if phase == "Succeeded" or (phase == "Running" and started):
        # The scheduler found the resource on the node and the kubelet allocated it.
        node = (pod.get("spec") or {}).get("nodeName", "")
        return Verdict(True, True, f"{what} was scheduled on {node} with a GPU and started")
    if phase == "Failed":
        return Verdict(
            True,
            False,
            f"{what} failed: {_terminated_failure(pod)}; check the device plugin pod's log on this node",
        )
    unschedulable = _unschedulable(pod)
    if unschedulable is not None:
        return Verdict(
            False,
            False,
            f"{what} cannot be scheduled: {unschedulable}; "
            "check that the device plugin runs on this node and that the node advertises the resource "
            "(kubectl describe node)",
        )
    stuck = _stuck(pod)
    if stuck is not None:
        return Verdict(False, False, f"{what}: {stuck}; check the image")
    return Verdict(False, False, f"{what} is {phase}, waiting for it to start")


def _quantity(value: object) -> int:
    """A whole-number quantity ("8", 8); anything else counts as none (GPUs are never fractional)."""
    text = str(value).strip()
    return int(text) if text.isdigit() else 0


def select_gpu_resource(allocatable: Mapping[str, object], wanted: str = "") -> str | None:
    """The GPU resource the plugin workload requests on a node, or None if the node has none.

    `wanted` (configured) must be allocatable; otherwise nvidia.com/gpu, else a MIG
    resource, else any other nvidia.com/ resource (a renamed or shared one), by name.
    """
    available = sorted(name for name, value in allocatable.items() if _quantity(value) >= 1)
    if wanted:
        return wanted if wanted in available else None
    ours = [name for name in available if name.startswith(f"{resource_config.RESOURCE_PREFIX}/")]
    if _GPU in ours:
        return _GPU
    mig = [name for name in ours if name.startswith(_MIG_PREFIX)]
    candidates = mig or ours
    return candidates[0] if candidates else None


def plugin_not_on_node(node_labels: Mapping[str, str]) -> str | None:
    """Why the plugin validation has nothing to check on a node (its marker is written at once),
    or None: the DRA driver owns the node's GPUs (`nvidia.com/gpu.deploy.dra-driver=true`), so
    no device plugin runs there and no `nvidia.com/gpu` is advertised to request."""
    if node_labels.get(labels.deploy_label("dra-driver")) == "true":
        return (
            "the DRA driver owns this node's GPUs (nvidia.com/gpu.deploy.dra-driver=true): "
            "no device plugin runs here"
        )
    return None

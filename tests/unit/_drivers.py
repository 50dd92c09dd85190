"""Builders for driver tests: fake GPU nodes, streams, settings, and "what the cluster holds after apply".

Fluent on purpose: `rhcos_node("n1", V417, running=V416)` reads as the situation it builds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ocp_gpu.model import images, labels
from ocp_gpu.model.driver_snapshot import (
    DriverDaemonSet,
    DriverSnapshot,
    DriverToolkitStream,
    GpuNode,
    ImageStreamTag,
    RhcosVersion,
    StreamState,
)
from ocp_gpu.planning.drivers import driver_plan
from ocp_gpu.planning.drivers.driver_strategy import Strategy

V416 = "416.94.202407030122-0"
V417 = "417.94.202410090854-0"
V419 = "9.6.20250909-0"
DTK_416 = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "4" * 64
DTK_417 = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "7" * 64
DTK_LATEST = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "f" * 64
KERNEL_416 = "5.14.0-427.22.1.el9_4.x86_64"
KERNEL_417 = "5.14.0-427.37.1.el9_4.x86_64"
DRIVER = images.ImageRef("nvcr.io/nvidia/driver:570.124.06")
PRECOMPILED_DRIVER = images.ImageRef("nvcr.io/nvidia/driver:570")
DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def rhcos_node(
    name: str,
    version: str = V416,
    *,
    running: str | None = None,
    openshift: str = "4.16",
    rhel: str = "9.4",
    kernel: str = KERNEL_416,
    nfd: bool = True,
    unschedulable: bool = False,
) -> GpuNode:
    """An RHCOS GPU node as NFD labels it; `running` is what the kubelet reports (default: `version`)."""
    node_labels = {labels.NFD_NVIDIA_PCI: "true"}
    if nfd:
        node_labels |= {
            labels.OSTREE_VERSION: version,
            labels.OS_ID: "rhcos",
            labels.OS_VERSION_ID: openshift,
            labels.OS_RHEL_VERSION: rhel,
            labels.OS_OPENSHIFT_VERSION: openshift,
            labels.KERNEL_VERSION_FULL: kernel,
        }
    return GpuNode.from_labels(
        name,
        node_labels,
        os_image=f"Red Hat Enterprise Linux CoreOS {running or version} (Plow)",
        unschedulable=unschedulable,
    )


def ubuntu_node(name: str, version: str = "22.04", kernel: str = "5.15.0-105-generic") -> GpuNode:
    return GpuNode.from_labels(
        name,
        {
            labels.OS_ID: "ubuntu",
            labels.OS_VERSION_ID: version,
            labels.KERNEL_VERSION_FULL: kernel,
        },
        os_image=f"Ubuntu {version}.4 LTS",
    )


def stream_with(*tags: tuple[str, str], state: StreamState = StreamState.PRESENT) -> DriverToolkitStream:
    return DriverToolkitStream(state, tuple(ImageStreamTag(RhcosVersion(n), i) for n, i in tags))


FULL_STREAM = stream_with((V416, DTK_416), (V417, DTK_417))


def driver_settings(strategy: Strategy, **overrides: Any) -> driver_plan.DriverSettings:
    image = PRECOMPILED_DRIVER if strategy is Strategy.PRECOMPILED else DRIVER
    values: dict[str, Any] = {"strategy": strategy, "driver_image": image, "dtk_available": True}
    return driver_plan.DriverSettings(**(values | overrides))


def existing(
    entry: driver_plan.DesiredDriverDaemonSet,
    *,
    name: str | None = None,
    scheduled: int | None = None,
    desired: int | None = None,
    misscheduled: int = 0,
    current_status: bool = True,
    annotations: dict[str, str] | None = None,
) -> DriverDaemonSet:
    """The DaemonSet the cluster would hold after applying `entry`, with controller counters."""
    wanted = len(entry.nodes) if desired is None else desired
    return DriverDaemonSet(
        name=name or entry.name,
        labels={labels.MANAGED_BY: labels.MANAGED_BY_VALUE, **entry.labels, **entry.selector},
        annotations=annotations or {},
        image=entry.driver_image,
        dtk_image=entry.dtk_image,
        generation=2,
        observed_generation=2 if current_status else 1,
        desired_number_scheduled=wanted,
        current_number_scheduled=wanted if scheduled is None else scheduled,
        number_misscheduled=misscheduled,
        number_ready=wanted,
        updated_number_scheduled=wanted,
    )


def plan(
    nodes: Iterable[GpuNode],
    strategy: Strategy = Strategy.DTK,
    *,
    daemonsets: Iterable[DriverDaemonSet] = (),
    stream: DriverToolkitStream = FULL_STREAM,
    **overrides: Any,
) -> driver_plan.DriverPlan:
    snapshot = DriverSnapshot(nodes=tuple(nodes), daemonsets=tuple(daemonsets), stream=stream)
    return driver_plan.plan_driver_daemonsets(snapshot, driver_settings(strategy, **overrides))


def applied(
    nodes: Iterable[GpuNode], strategy: Strategy, stream: DriverToolkitStream = FULL_STREAM, **kw: Any
) -> list[DriverDaemonSet]:
    """The DaemonSets after a plan was applied and the DaemonSet controller caught up."""
    return [existing(entry, **kw) for entry in plan(nodes, strategy, stream=stream).desired]


def by_key(result: driver_plan.DriverPlan) -> dict[str, driver_plan.DesiredDriverDaemonSet]:
    return {entry.key: entry for entry in result.desired}

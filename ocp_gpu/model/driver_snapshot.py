"""What the operator observed about drivers: GPU nodes, the driver-toolkit stream, driver DaemonSets.

The `kube/` layer fills these from the cluster once per pass; planning reads them and
never sees a client object.  Everything here is frozen and holds only what a driver
decision needs (memory stays flat on large clusters: no full Node objects).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NewType

from ocp_gpu.model import images, labels, nodes
from ocp_gpu.model.driver_install import DriverInstall
from ocp_gpu.model.nodes import NodeName

# An RHCOS build as NFD reports it (`416.94.202407030122-0`, or `9.6.20250909-0` on OCP >= 4.19).
RhcosVersion = NewType("RhcosVersion", str)
# What one driver DaemonSet serves: an RHCOS version, an OS (`ubuntu22.04`) or kernel + OS.
DriverKey = NewType("DriverKey", str)

# `Red Hat Enterprise Linux CoreOS 416.94.202407030122-0 (Plow)` -> `416.94.202407030122-0`.
_RHCOS_OS_IMAGE = re.compile(r"^Red Hat Enterprise Linux CoreOS (?P<version>\S+)")


def rhcos_version_from_os_image(os_image: str) -> RhcosVersion | None:
    """The RHCOS build named in a Node's `status.nodeInfo.osImage`, or None for other OSes."""
    match = _RHCOS_OS_IMAGE.match(os_image.strip())
    return RhcosVersion(match["version"]) if match else None


@dataclass(frozen=True)
class GpuNode:
    """A node with an NVIDIA GPU, reduced to what keys a driver DaemonSet."""

    name: NodeName
    # NFD's OSTREE_VERSION label; None when NFD has not labelled the node (yet).
    ostree_version: RhcosVersion | None = None
    # NFD's os_release ID (rhcos, rhel, ubuntu) and VERSION_ID (4.16, 9.6, 22.04).
    os_id: str | None = None
    os_version_id: str | None = None
    # NFD's os_release RHEL_VERSION (9.4); RHCOS < 4.19 only, where ID is rhcos.
    rhel_version: str | None = None
    # NFD's kernel-version.full, for precompiled images.
    kernel: str | None = None
    # NFD's os_release OPENSHIFT_VERSION (4.16); RHCOS nodes only.
    openshift_version: str | None = None
    # status.nodeInfo.osImage: what the kubelet says runs, to catch stale NFD labels.
    os_image: str = ""
    unschedulable: bool = False

    @classmethod
    def from_labels(
        cls,
        name: str,
        node_labels: Mapping[str, str],
        *,
        os_image: str = "",
        unschedulable: bool = False,
    ) -> GpuNode:
        """Keep only the labels a driver key needs; empty label values count as absent."""

        def get(key: str) -> str | None:
            return node_labels.get(key) or None

        ostree = get(labels.OSTREE_VERSION)
        return cls(
            name=NodeName(name),
            ostree_version=RhcosVersion(ostree) if ostree else None,
            os_id=get(labels.OS_ID),
            os_version_id=get(labels.OS_VERSION_ID),
            rhel_version=get(labels.OS_RHEL_VERSION),
            kernel=get(labels.KERNEL_VERSION_FULL),
            openshift_version=get(labels.OS_OPENSHIFT_VERSION),
            os_image=os_image,
            unschedulable=unschedulable,
        )

    @classmethod
    def from_facts(cls, facts: nodes.NodeFacts) -> GpuNode:
        """The driver view of the operator's NodeFacts record."""
        return cls.from_labels(
            facts.name, facts.labels, os_image=facts.os_image, unschedulable=facts.unschedulable
        )

    @property
    def os_key(self) -> str | None:
        """`<ID><VERSION_ID>` (ubuntu22.04, rhcos4.16, rhel9.6): the OS part of a driver key."""
        if self.os_id and self.os_version_id:
            return f"{self.os_id}{self.os_version_id}"
        return None

    @property
    def driver_os_tag(self) -> str | None:
        """The OS suffix of NVIDIA's driver image tags for this node (`images.nvidia_os_tag`):
        `rhcos4.16` before OpenShift 4.19, `rhel9` from 4.19 on (RHCOS reports ID=rhel,
        VERSION_ID=9.6), as NVIDIA v26.7.0 renders it."""
        if self.os_id and self.os_version_id:
            return images.nvidia_os_tag(self.os_id, self.os_version_id)
        return None

    @property
    def running_rhcos_version(self) -> RhcosVersion | None:
        """The RHCOS build the kubelet reports, independent of NFD."""
        return rhcos_version_from_os_image(self.os_image)


class StreamState(enum.StrEnum):
    """How the `openshift/driver-toolkit` ImageStream looked when we read it."""

    # Read and consistent: every tag has a name.
    PRESENT = "present"
    # Read, but some tag has an empty name (RHBZ#2015024): named tags still resolve.
    BROKEN = "broken"
    # The ImageStream does not exist: no RHCOS version has a DTK image.
    ABSENT = "absent"
    # The read failed: we know nothing, so nothing already deployed is changed.
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class ImageStreamTag:
    """One driver-toolkit tag: an RHCOS version and the DTK image built for it."""

    name: RhcosVersion
    image: str


@dataclass(frozen=True)
class DriverToolkitStream:
    """The driver-toolkit ImageStream, reduced to version -> image (see planning/imagestreams)."""

    state: StreamState
    tags: tuple[ImageStreamTag, ...] = ()
    # Why the stream is broken, absent or unreadable; empty when present.
    reason: str = ""
    # Tags that had a name but no image anywhere (neither spec nor status): treated as missing.
    unresolved: tuple[str, ...] = ()

    def image_for(self, version: RhcosVersion) -> str | None:
        """The DTK image for one RHCOS version, or None when its tag is missing."""
        for tag in self.tags:
            if tag.name == version:
                return tag.image
        return None

    @property
    def known(self) -> bool:
        """False when the read failed: missing tags then mean nothing."""
        return self.state is not StreamState.UNREADABLE


@dataclass(frozen=True)
class DriverDaemonSet:
    """A driver DaemonSet we manage (`app.kubernetes.io/managed-by=ocp-gpu`), as it exists now.

    Identified by its labels, never by its name: `key` and `strategy` are read from
    `ocp-gpu.io/driver-key` / `ocp-gpu.io/driver-strategy`, falling back to the
    `openshift.driver-toolkit*` labels (see planning/drivers.identify_daemonset).
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    # The driver container's image and the DTK sidecar's image (None without a sidecar).
    image: str = ""
    dtk_image: str | None = None
    # The pods' nodeSelector: the nodes the DaemonSet controller runs them on (the last read
    # before a delete asks the server for exactly these; empty when unknown).
    node_selector: Mapping[str, str] = field(default_factory=dict)
    generation: int = 1
    observed_generation: int = 0
    desired_number_scheduled: int = 0
    current_number_scheduled: int = 0
    number_misscheduled: int = 0
    number_ready: int = 0
    updated_number_scheduled: int = 0
    # What its pod template installs (planning/driver_currency); None when it has no driver container.
    install: DriverInstall | None = None

    @property
    def key(self) -> str | None:
        """The key label's value (`ocp-gpu.io/driver-key`, else `openshift.driver-toolkit.rhcos`)."""
        return self.labels.get(labels.DRIVER_KEY) or self.labels.get(labels.DTK_RHCOS) or None

    @property
    def status_is_current(self) -> bool:
        """The DaemonSet controller has seen the latest spec; its counters can be trusted."""
        return self.observed_generation >= self.generation

    @property
    def rolled_out(self) -> bool:
        """Every node it selects has a pod of its latest template (NVIDIA's
        isDaemonSetRollingUpdateComplete; readiness is the pods' own)."""
        return self.status_is_current and self.updated_number_scheduled >= self.desired_number_scheduled

    @property
    def fully_scheduled(self) -> bool:
        """Every node the DaemonSet selects has one of its pods (pending pods count)."""
        return self.status_is_current and self.desired_number_scheduled == self.current_number_scheduled


@dataclass(frozen=True)
class DriverSnapshot:
    """Everything the driver planner needs from one read of the cluster."""

    # Every GPU node (NFD `pci-10de.present=true` or `nvidia.com/gpu.present=true`).
    nodes: tuple[GpuNode, ...]
    # Every driver DaemonSet labelled managed-by=ocp-gpu and component=nvidia-driver.
    daemonsets: tuple[DriverDaemonSet, ...] = ()
    stream: DriverToolkitStream = DriverToolkitStream(StreamState.ABSENT, reason="not read")


@dataclass(frozen=True, slots=True)
class DriverPodPull:
    """A driver pod's image pull as its kubelet reports it (for the precompiled fallback)."""

    name: str
    # The pod's `ocp-gpu.io/driver-key` and `ocp-gpu.io/driver-strategy` labels.
    key: str | None
    strategy: str | None
    # The driver container's image.
    image: str
    # The driver container waits in ErrImagePull or ImagePullBackOff.
    pull_failing: bool

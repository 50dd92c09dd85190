"""What driver planning reports: one record per kind of finding, each naming what is at fault.

`reason` is the Event and condition reason; `message` the text status and Events show.
Plain data: deciding which findings hold is planning/drivers/driver_plan.py's job.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import DriverKey, RhcosVersion, StreamState
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.planning.drivers.driver_strategy import Strategy

# --- findings: each names what is at fault; `reason` is the event/condition reason.


@dataclass(frozen=True)
class MissingDriverToolkitTag:
    reason: ClassVar[str] = "DriverToolkitImageMissing"
    version: RhcosVersion
    nodes: tuple[NodeName, ...]

    @property
    def message(self) -> str:
        return (
            f"no driver-toolkit ImageStream tag for RHCOS {self.version} "
            f"(nodes: {', '.join(self.nodes)}); its driver DaemonSet waits for the tag"
        )


@dataclass(frozen=True)
class DriverToolkitStreamProblem:
    reason: ClassVar[str] = "DriverToolkitImageStreamProblem"
    state: StreamState
    detail: str

    @property
    def message(self) -> str:
        return f"driver-toolkit ImageStream is {self.state.value}: {self.detail}"


@dataclass(frozen=True)
class DeferredDaemonSet:
    reason: ClassVar[str] = "DriverDaemonSetDeferred"
    key: DriverKey
    nodes: tuple[NodeName, ...]
    detail: str

    @property
    def message(self) -> str:
        return f"driver DaemonSet for {self.key} (nodes: {', '.join(self.nodes)}) not created: {self.detail}"


@dataclass(frozen=True)
class StaleNfdLabel:
    reason: ClassVar[str] = "NodeFeatureLabelStale"
    node: NodeName
    nfd_version: RhcosVersion
    running_version: RhcosVersion

    @property
    def message(self) -> str:
        return (
            f"node {self.node}: NFD says RHCOS {self.nfd_version} but the kubelet reports "
            f"{self.running_version}; its driver would be built for the wrong kernel until NFD catches up"
        )


@dataclass(frozen=True)
class NodeMissingKeyLabels:
    reason: ClassVar[str] = "NodeFeatureLabelsMissing"
    node: NodeName
    strategy: Strategy
    missing: tuple[str, ...]

    @property
    def message(self) -> str:
        return (
            f"node {self.node} lacks {', '.join(self.missing)} needed for {self.strategy.value} drivers; "
            "no driver DaemonSet selects it (is NFD running?)"
        )


@dataclass(frozen=True)
class WaitingForHandover:
    reason: ClassVar[str] = "DriverDaemonSetHandover"
    daemonset: str
    nodes: tuple[NodeName, ...]

    @property
    def message(self) -> str:
        return (
            f"driver DaemonSet {self.daemonset} is kept until its replacement runs on {', '.join(self.nodes)}"
        )


@dataclass(frozen=True)
class UnidentifiedDaemonSet:
    reason: ClassVar[str] = "DriverDaemonSetUnidentified"
    daemonset: str

    @property
    def message(self) -> str:
        return (
            f"driver DaemonSet {self.daemonset} has no {labels.DRIVER_STRATEGY}/{labels.DRIVER_KEY} "
            "labels; left alone"
        )


@dataclass(frozen=True)
class DriverToolkitFallback:
    reason: ClassVar[str] = "PrecompiledDriverFallback"
    key: DriverKey
    failed_image: str
    nodes: tuple[NodeName, ...]
    # Why the fallback cannot happen; empty when it does.
    blocked: str = ""

    @property
    def message(self) -> str:
        if self.blocked:
            return (
                f"precompiled image {self.failed_image} cannot be pulled for {', '.join(self.nodes)} and "
                f"no Driver Toolkit build can replace it: {self.blocked}"
            )
        return (
            f"precompiled image {self.failed_image} cannot be pulled; "
            f"{', '.join(self.nodes)} build the driver with the Driver Toolkit instead"
        )


@dataclasses.dataclass(frozen=True)
class DriverNewerThanDefault:
    """A driver DaemonSet kept on its nodes' newer driver instead of the release default."""

    reason: ClassVar[str] = "DriverNewerThanDefault"
    daemonset: str
    # The nodes that run the kept (newest) version.
    nodes: tuple[NodeName, ...]
    running: str
    default: str

    @property
    def message(self) -> str:
        named = ", ".join(self.nodes[:NAMED_NEWER_NODES])
        more = (
            f" and {len(self.nodes) - NAMED_NEWER_NODES} more" if len(self.nodes) > NAMED_NEWER_NODES else ""
        )
        return (
            f"{self.daemonset}: {len(self.nodes)} node(s) ({named}{more}) run driver {self.running}, "
            f"newer than this release's default {self.default}; kept {self.running} instead of rolling "
            f"them back. Set driver.version to decide: {self.running} keeps it, {self.default} rolls back"
        )


# How many nodes a DriverNewerThanDefault message names before "and N more".
NAMED_NEWER_NODES = 5


Finding = (
    MissingDriverToolkitTag
    | DriverToolkitStreamProblem
    | DeferredDaemonSet
    | StaleNfdLabel
    | NodeMissingKeyLabels
    | WaitingForHandover
    | UnidentifiedDaemonSet
    | DriverToolkitFallback
    | DriverNewerThanDefault
)

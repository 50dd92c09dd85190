"""Which driver DaemonSets should exist, which are stale, and what is wrong with the nodes' keys.

One mechanism, three keying strategies (DESIGN §3): every GPU node gets a key —
its RHCOS build (Driver Toolkit), its OS (vanilla) or its kernel + OS (precompiled) —
and every key gets exactly one DaemonSet that selects the nodes carrying it.

Decides: the desired DaemonSets (name, key, selector, images), which existing ones
to delete, and findings for status, events and metrics (missing DTK tags, stale NFD
labels, nodes without key labels, a broken or absent ImageStream).  Also, in
`plan_precompiled_fallback`, which precompiled keys fall back to a DTK build.

Never does: read the cluster, the clock or the policy object (the caller passes a
snapshot, `now` and `DriverSettings`), render manifests, or delete anything itself.

The invariant behind every deletion: a GPU node is never left without a driver pod
because of something this module decided.  Existing DaemonSets are identified by
their labels, never by their names.
"""

from __future__ import annotations

import datetime
import enum
import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar, TypeVar

from ocp_gpu.model import images, labels
from ocp_gpu.model import policy as policy_model
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.problems import PolicyProblem
from ocp_gpu.model.snapshot import (
    DriverDaemonSet,
    DriverKey,
    DriverSnapshot,
    DriverToolkitStream,
    GpuNode,
    RhcosVersion,
    StreamState,
)
from ocp_gpu.planning import platform as platform_model


class Strategy(enum.StrEnum):
    """How a driver DaemonSet gets its kernel modules; the value is the `ocp-gpu.io/driver-strategy` label."""

    # Build on the node with the OpenShift Driver Toolkit sidecar; keyed by RHCOS build.
    DTK = "dtk"
    # Build in the driver container from the OS's packages; keyed by OS.
    VANILLA = "vanilla"
    # Load modules prebuilt into the image; keyed by kernel + OS.
    PRECOMPILED = "precompiled"


def select_strategy(*, openshift: bool, use_driver_toolkit: bool, use_precompiled: bool) -> Strategy:
    """The cluster-wide strategy, from the platform and the policy.

    `use_driver_toolkit` is `operator.use_ocp_driver_toolkit`, `use_precompiled` is `driver.usePrecompiled`.
    """
    # precompiled wins on every platform (DTK only as a per-key fallback)
    if use_precompiled:
        return Strategy.PRECOMPILED
    # OpenShift with image.openshift.io and DTK not switched off
    if openshift and use_driver_toolkit:
        return Strategy.DTK
    # vanilla Kubernetes, or OpenShift with `use_ocp_driver_toolkit: false`
    return Strategy.VANILLA


@dataclass(frozen=True)
class DriverSettings:
    """The policy and platform inputs of driver planning, already resolved by the caller."""

    strategy: Strategy
    # The driver image without its OS suffix (images.resolve_image for `driver`); each key adds
    # `-<os>` (or `-<kernel>-<os>` when precompiled) with images.driver_image_for.
    driver_image: images.ImageRef
    # Precompiled keys may fall back to DTK builds here: OpenShift with the Driver Toolkit and
    # `driver.precompiledFallback` enabled with a version.
    dtk_available: bool = False
    # Precompiled keys whose nodes are built with DTK instead, with the precompiled image that
    # failed (from `plan_precompiled_fallback(...).keys`).
    dtk_fallback: Mapping[DriverKey, str] = field(default_factory=dict)
    # NB: precompiled images are tagged by driver *branch* (570) while DTK builds need a full
    # version (570.124.06); the base image for fallback builds, `driver_image` when None.
    fallback_driver_image: images.ImageRef | None = None


def settings_for_policy(
    policy: policy_model.Policy,
    platform: platform_model.Platform,
    env: Mapping[str, str],
    *,
    dtk_fallback: Mapping[DriverKey, str] | None = None,
) -> DriverSettings | PolicyProblem:
    """DriverSettings from the ClusterPolicy, the platform and the operator's environment.

    A driver image that cannot be resolved is returned as the problem (for status), so no
    DaemonSet is ever rendered with a broken image.
    """
    driver = policy.driver
    base = images.resolve_image(driver.image, component="driver", env=env)
    # the image cannot be resolved: nothing to plan with, say which field is at fault
    if isinstance(base, PolicyProblem):
        return base
    fallback = driver.precompiled_fallback
    # NB: an enabled fallback without a version is a policy error (validate_policy); it
    # must not build `<branch>-<os>` images that do not exist.
    dtk_available = (
        platform.is_openshift
        and policy.operator.use_ocp_driver_toolkit is not False
        and fallback.enabled
        and bool(fallback.version)
    )
    fallback_image: images.ImageRef | None = None
    if driver.use_precompiled and dtk_available:
        # fallback builds need the full version: the driver image, retagged
        resolved = images.resolve_image(
            replace(driver.image, version=fallback.version), component="driver", env=env
        )
        if isinstance(resolved, PolicyProblem):
            return resolved
        fallback_image = resolved
    if driver.use_precompiled:
        # usePrecompiled, on any platform
        strategy = Strategy.PRECOMPILED
    elif platform_model.should_use_driver_toolkit(platform, policy):
        # OpenShift with the Driver Toolkit not switched off
        strategy = Strategy.DTK
    else:
        # vanilla Kubernetes, or OpenShift with use_ocp_driver_toolkit: false
        strategy = Strategy.VANILLA
    return DriverSettings(
        strategy=strategy,
        driver_image=base,
        dtk_available=dtk_available,
        dtk_fallback=dict(dtk_fallback or {}) if dtk_available else {},
        fallback_driver_image=fallback_image,
    )


def fallback_grace(policy: policy_model.Policy) -> datetime.timedelta:
    """How long a precompiled image may fail to pull before its key falls back to a DTK build."""
    return datetime.timedelta(seconds=policy.driver.precompiled_fallback.image_pull_timeout_seconds)


# --- names and label values ---------------------------------------------------

_NAME_PREFIX = labels.DRIVER_DAEMONSET_PREFIX
_MAX_NAME = 63
_HASH_LENGTH = 8
_MAX_LABEL_VALUE = 63
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_LENGTH]


def _dns_subdomain(text: str) -> str:
    """Lowercase, only [a-z0-9.-], every dot-separated part starting and ending alphanumeric."""
    text = re.sub(r"[^a-z0-9.-]", "-", text.lower())
    parts = (part.strip("-") for part in text.split("."))
    return ".".join(part for part in parts if part)


def daemonset_name(key: DriverKey) -> str:
    """`nvidia-driver-daemonset-<key>`, a valid DNS-1123 name of at most 63 characters.

    A pure function of the key, so names are stable across passes and input order.
    When the name would be too long, it is cut and the first 8 hex digits of the full
    key's sha256 are appended, so two long keys sharing a prefix still differ.
    """
    body = _dns_subdomain(key) or "unknown"
    if len(_NAME_PREFIX) + len(body) <= _MAX_NAME:
        # the common case: RHCOS builds, OS tags and most kernel + OS keys fit
        return _NAME_PREFIX + body
    # too long: cut at a clean boundary and add the hash of the full key
    return _hashed_name(key, key)


def _hashed_name(key: str, hashed: str) -> str:
    """The name for `key`, cut to leave room for `-<8 hex digits of sha256(hashed)>`."""
    room = _MAX_NAME - len(_NAME_PREFIX) - 1 - _HASH_LENGTH
    cut = _dns_subdomain(key)[:room].rstrip(".-")
    return f"{_NAME_PREFIX}{cut}-{_short_hash(hashed)}" if cut else f"{_NAME_PREFIX}{_short_hash(hashed)}"


def key_label_value(key: DriverKey) -> str:
    """The `ocp-gpu.io/driver-key` label value: the key itself when it is a valid label value.

    Keys come from NFD label values, so they almost always are; otherwise the value is
    sanitised, cut and suffixed with a hash of the full key (stable, distinct).
    """
    if len(key) <= _MAX_LABEL_VALUE and _LABEL_VALUE.match(key):
        return key
    room = _MAX_LABEL_VALUE - 1 - _HASH_LENGTH
    cut = re.sub(r"[^A-Za-z0-9_.-]", "-", key)[:room].strip("-_.")
    return f"{cut}-{_short_hash(key)}" if cut else _short_hash(key)


# --- keys -------------------------------------------------------------------

# The NFD labels each strategy needs on a node, as (label key, GpuNode attribute).
_REQUIRED: Mapping[Strategy, tuple[tuple[str, str], ...]] = {
    Strategy.DTK: (
        (labels.OSTREE_VERSION, "ostree_version"),
        (labels.OS_ID, "os_id"),
        (labels.OS_VERSION_ID, "os_version_id"),
    ),
    Strategy.VANILLA: ((labels.OS_ID, "os_id"), (labels.OS_VERSION_ID, "os_version_id")),
    Strategy.PRECOMPILED: (
        (labels.KERNEL_VERSION_FULL, "kernel"),
        (labels.OS_ID, "os_id"),
        (labels.OS_VERSION_ID, "os_version_id"),
    ),
}


def missing_key_labels(node: GpuNode, strategy: Strategy) -> tuple[str, ...]:
    """The NFD labels `strategy` needs that `node` lacks (empty when it can be keyed)."""
    return tuple(label for label, attribute in _REQUIRED[strategy] if not getattr(node, attribute))


def node_key(node: GpuNode, strategy: Strategy) -> DriverKey | None:
    """The node's key under `strategy`, or None when a needed NFD label is missing."""
    # NFD has not labelled the node (fully): it cannot be keyed
    if missing_key_labels(node, strategy):
        return None
    # Driver Toolkit: the RHCOS build, which names the ImageStream tag
    if strategy is Strategy.DTK:
        return DriverKey(str(node.ostree_version))
    # vanilla: the OS, which names the driver image's tag suffix
    if strategy is Strategy.VANILLA:
        return DriverKey(str(node.os_key))
    # precompiled: the modules fit one kernel of one OS
    return DriverKey(f"{node.kernel}-{node.os_key}")


def _node_selector(node: GpuNode, strategy: Strategy) -> dict[str, str]:
    """The NFD labels that select exactly the nodes sharing this node's key."""
    if strategy is Strategy.DTK:
        return {labels.OSTREE_VERSION: str(node.ostree_version)}
    selector = {labels.OS_ID: str(node.os_id), labels.OS_VERSION_ID: str(node.os_version_id)}
    if strategy is Strategy.PRECOMPILED:
        selector[labels.KERNEL_VERSION_FULL] = str(node.kernel)
    return selector


def identify_daemonset(daemonset: DriverDaemonSet) -> tuple[Strategy, str] | None:
    """(strategy, key label value) of an existing driver DaemonSet, from its labels only."""
    found = daemonset.labels
    strategy: Strategy | None
    try:
        strategy = Strategy(found.get(labels.DRIVER_STRATEGY, ""))
    except ValueError:
        # no (valid) strategy label: only the Driver Toolkit labels can still identify it
        strategy = Strategy.DTK if found.get(labels.DTK_DAEMONSET) == "true" else None
    # neither ours nor a Driver Toolkit DaemonSet: unidentified, never touched
    if strategy is None:
        return None
    key = found.get(labels.DRIVER_KEY) if strategy is not Strategy.DTK else daemonset.key
    # a strategy but no key label: unidentified as well
    return (strategy, key) if key else None


# --- the plan ---------------------------------------------------------------


@dataclass(frozen=True)
class DesiredDriverDaemonSet:
    """One driver DaemonSet that should exist, as the renderer needs it."""

    name: str
    key: DriverKey
    strategy: Strategy
    # The NFD labels that select this key's nodes (the renderer adds nvidia.com/gpu.deploy.driver).
    node_selector: Mapping[str, str]
    # Identifying labels for the DaemonSet and its pods (strategy, key, Driver Toolkit labels).
    labels: Mapping[str, str]
    # The pod selector: app=nvidia-driver-daemonset plus strategy and key, so selectors never overlap.
    selector: Mapping[str, str]
    driver_image: str
    # The DTK sidecar's image; None outside DTK or when the version's tag is missing.
    dtk_image: str | None
    image_missing: bool
    # `ID` + `VERSION_ID` (rhcos4.16, ubuntu22.04), `kernel` and the RHCOS build of the key's nodes.
    os_tag: str
    kernel: str | None
    rhcos_version: RhcosVersion | None
    # NFD's OPENSHIFT_VERSION of the key's nodes, when they carry it.
    openshift_version: str | None
    nodes: tuple[NodeName, ...]
    # An existing DaemonSet already carries this strategy and key (its name was kept).
    exists: bool = False
    # A DTK build standing in for this precompiled key, and the precompiled image that failed.
    fallback_for: DriverKey | None = None
    fallback_image: str | None = None


@dataclass(frozen=True)
class StaleDriverDaemonSet:
    """An existing driver DaemonSet to delete, and why."""

    name: str
    key: str
    strategy: Strategy
    reason: str
    # Deleted although nodes still carry its key: a DaemonSet of another mode replaced it there.
    superseded: bool = False


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
class StaleDaemonSetDraining:
    reason: ClassVar[str] = "DriverDaemonSetDraining"
    daemonset: str
    desired_number_scheduled: int
    number_misscheduled: int

    @property
    def message(self) -> str:
        return (
            f"driver DaemonSet {self.daemonset} serves no GPU node any more; deleted once its pods are gone "
            f"(desiredNumberScheduled={self.desired_number_scheduled}, "
            f"numberMisscheduled={self.number_misscheduled})"
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
class GarbageCollectionSuspended:
    reason: ClassVar[str] = "DriverGarbageCollectionSuspended"
    detail: str

    @property
    def message(self) -> str:
        return f"no driver DaemonSet is deleted this pass: {self.detail}"


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


Finding = (
    MissingDriverToolkitTag
    | DriverToolkitStreamProblem
    | DeferredDaemonSet
    | StaleNfdLabel
    | NodeMissingKeyLabels
    | WaitingForHandover
    | StaleDaemonSetDraining
    | UnidentifiedDaemonSet
    | GarbageCollectionSuspended
    | DriverToolkitFallback
)

_F = TypeVar("_F")


@dataclass(frozen=True)
class DriverPlan:
    """What the driver reconciler applies this pass."""

    # Sorted by name; exactly one per (strategy, key).
    desired: tuple[DesiredDriverDaemonSet, ...]
    # Sorted by name; never empty-handed: each one's nodes already run a replacement or none is left.
    stale: tuple[StaleDriverDaemonSet, ...]
    findings: tuple[Finding, ...]

    def findings_of(self, kind: type[_F]) -> tuple[_F, ...]:
        """The findings of one kind, in plan order."""
        return tuple(finding for finding in self.findings if isinstance(finding, kind))


def plan_driver_daemonsets(snapshot: DriverSnapshot, settings: DriverSettings) -> DriverPlan:
    """The desired and stale driver DaemonSets for one snapshot; pure and deterministic."""
    findings: list[Finding] = []
    findings.extend(_stale_nfd_labels(snapshot.nodes))

    # 1. every node's wanted (strategy, key), grouped
    groups: dict[tuple[Strategy, DriverKey], list[GpuNode]] = defaultdict(list)
    fallback_nodes: dict[DriverKey, list[GpuNode]] = defaultdict(list)
    blocked_fallback: dict[DriverKey, list[GpuNode]] = defaultdict(list)
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        strategy = settings.strategy
        key = node_key(node, strategy)
        if key is None:
            # the node cannot be keyed: no DaemonSet selects it, say which labels are missing
            findings.append(NodeMissingKeyLabels(node.name, strategy, missing_key_labels(node, strategy)))
            continue
        if strategy is Strategy.PRECOMPILED and key in settings.dtk_fallback:
            dtk_key = node_key(node, Strategy.DTK)
            if settings.dtk_available and dtk_key is not None:
                # the precompiled image failed for this key: build with the Driver Toolkit instead
                fallback_nodes[key].append(node)
                groups[(Strategy.DTK, dtk_key)].append(node)
                continue
            # no Driver Toolkit here or no RHCOS build label: stay on the failing precompiled image
            blocked_fallback[key].append(node)
        groups[(strategy, key)].append(node)

    for key, nodes in sorted(fallback_nodes.items()):
        findings.append(DriverToolkitFallback(key, settings.dtk_fallback[key], _names(nodes)))
    for key, nodes in sorted(blocked_fallback.items()):
        why = "no OSTREE_VERSION label" if settings.dtk_available else "no Driver Toolkit on this cluster"
        findings.append(DriverToolkitFallback(key, settings.dtk_fallback[key], _names(nodes), blocked=why))

    # 2. the stream matters only when some key builds with the Driver Toolkit
    uses_dtk = any(strategy is Strategy.DTK for strategy, _ in groups)
    # some key builds with the Driver Toolkit and the stream is broken, absent or unreadable
    if uses_dtk and snapshot.stream.state is not StreamState.PRESENT:
        findings.append(DriverToolkitStreamProblem(snapshot.stream.state, snapshot.stream.reason))

    # 3. existing DaemonSets by identity (labels only)
    existing: dict[tuple[Strategy, str], list[DriverDaemonSet]] = defaultdict(list)
    for daemonset in sorted(snapshot.daemonsets, key=lambda d: d.name):
        identity = identify_daemonset(daemonset)
        if identity is None:
            # not ours to judge: never deleted, reported
            findings.append(UnidentifiedDaemonSet(daemonset.name))
            continue
        existing[identity].append(daemonset)

    # 4. one desired DaemonSet per (strategy, key)
    desired: list[DesiredDriverDaemonSet] = []
    fallback_of = {node.name: key for key, nodes in fallback_nodes.items() for node in nodes}
    for (strategy, key), nodes in sorted(groups.items()):
        present = existing.get((strategy, key_label_value(key)), [])
        outcome = _desired(strategy, key, nodes, present, snapshot.stream, settings, fallback_of)
        if isinstance(outcome, DesiredDriverDaemonSet):
            desired.append(outcome)
            # the stream was read and has no tag for this RHCOS build: say which, and where
            if outcome.image_missing and snapshot.stream.known:
                findings.append(MissingDriverToolkitTag(RhcosVersion(key), outcome.nodes))
        else:
            # the key's DaemonSet cannot be rendered correctly this pass
            findings.append(outcome)

    desired = _unique_names(desired, existing)

    # 5. which existing DaemonSets may go
    stale, gc_findings = _garbage(snapshot, existing, desired)
    findings.extend(gc_findings)

    return DriverPlan(
        desired=tuple(sorted(desired, key=lambda d: d.name)),
        stale=tuple(sorted(stale, key=lambda s: s.name)),
        findings=tuple(findings),
    )


def _desired(
    strategy: Strategy,
    key: DriverKey,
    nodes: list[GpuNode],
    present: list[DriverDaemonSet],
    stream: DriverToolkitStream,
    settings: DriverSettings,
    fallback_of: Mapping[NodeName, DriverKey],
) -> DesiredDriverDaemonSet | DeferredDaemonSet:
    first = nodes[0]
    # NB: nodes sharing a key share these labels by construction (the key or its RHCOS build
    # fixes them); min() only makes the choice independent of input order.
    os_tag = min(str(node.driver_os_tag) for node in nodes)
    openshift_versions = sorted({node.openshift_version for node in nodes if node.openshift_version})
    keep = _kept(present, key)

    dtk_image: str | None = None
    image_missing = False
    rhcos_version: RhcosVersion | None = None
    if strategy is Strategy.DTK:
        rhcos_version = RhcosVersion(key)
        if stream.known:
            # the stream was read: the tag decides (absent stream: every tag is missing)
            dtk_image = stream.image_for(rhcos_version)
            if dtk_image is None and keep is not None and _runs_dtk_image(keep):
                # the tag or the whole stream vanished under a working DaemonSet: keep its image;
                # NB: rewriting it would mark every node's driver outdated and restart them broken
                dtk_image = keep.dtk_image
            image_missing = dtk_image is None
        elif keep is not None:
            # the read failed: keep what the existing DaemonSet runs, change nothing
            dtk_image = keep.dtk_image
            image_missing = keep.labels.get(labels.DTK_IMAGE_MISSING) == "true" or dtk_image is None
        else:
            # the read failed and nothing runs yet: creating it now could build against nothing
            return DeferredDaemonSet(key, _names(nodes), "driver-toolkit ImageStream could not be read")

    fallback_for = _single({fallback_of[node.name] for node in nodes if node.name in fallback_of})
    try:
        if strategy is Strategy.PRECOMPILED:
            # <branch>-<kernel>-<os>
            image = images.driver_image_for(
                settings.driver_image, images.precompiled_os_tag(str(first.kernel), os_tag)
            )
        elif fallback_for is not None and settings.fallback_driver_image is not None:
            # a DTK build standing in for a precompiled key: the full version's <version>-<os>
            image = images.driver_image_for(settings.fallback_driver_image, os_tag)
        else:
            # <version>-<os>
            image = images.driver_image_for(settings.driver_image, os_tag)
    except ValueError as error:
        # the key cannot make a valid image tag (a kernel with `+`, say): nothing sensible to run
        return DeferredDaemonSet(key, _names(nodes), str(error))

    identity_labels = {
        labels.DRIVER_STRATEGY: strategy.value,
        labels.DRIVER_KEY: key_label_value(key),
        labels.PRECOMPILED: "true" if strategy is Strategy.PRECOMPILED else "false",
    }
    if strategy is Strategy.DTK:
        identity_labels[labels.DTK_DAEMONSET] = "true"
        identity_labels[labels.DTK_RHCOS] = key_label_value(key)
        if image_missing:
            identity_labels[labels.DTK_IMAGE_MISSING] = "true"
    selector = {
        labels.APP: labels.DRIVER_APP,
        labels.DRIVER_STRATEGY: strategy.value,
        labels.DRIVER_KEY: key_label_value(key),
    }
    return DesiredDriverDaemonSet(
        name=keep.name if keep is not None else daemonset_name(key),
        key=key,
        strategy=strategy,
        node_selector=_node_selector(first, strategy),
        labels=identity_labels,
        selector=selector,
        driver_image=image,
        dtk_image=dtk_image,
        image_missing=image_missing,
        os_tag=os_tag,
        kernel=first.kernel if strategy is Strategy.PRECOMPILED else None,
        rhcos_version=rhcos_version,
        openshift_version=openshift_versions[0] if openshift_versions else None,
        nodes=_names(nodes),
        exists=keep is not None,
        fallback_for=fallback_for,
        fallback_image=settings.dtk_fallback.get(fallback_for) if fallback_for is not None else None,
    )


def _unique_names(
    desired: list[DesiredDriverDaemonSet],
    existing: Mapping[tuple[Strategy, str], list[DriverDaemonSet]],
) -> list[DesiredDriverDaemonSet]:
    """Rename new DaemonSets whose name is taken by another key's DaemonSet (existing or desired).

    NB: sanitising keys into names can make two keys meet (`x86_64` and `x86-64`); a name
    already in use belongs to whoever has it, and the newcomer gets the hash of its
    strategy and key.  Existing DaemonSets keep their names, so this stays stable.
    """
    owner = {d.name: identity for identity, daemonsets in existing.items() for d in daemonsets}
    for entry in desired:
        if entry.exists:
            owner[entry.name] = (entry.strategy, key_label_value(entry.key))
    result: list[DesiredDriverDaemonSet] = []
    for entry in desired:
        identity = (entry.strategy, key_label_value(entry.key))
        if not entry.exists and owner.setdefault(entry.name, identity) != identity:
            # the name belongs to another key: take the key's own hashed name
            name = _hashed_name(entry.key, f"{entry.strategy.value}:{entry.key}")
            owner[name] = identity
            entry = replace(entry, name=name)
        result.append(entry)
    return result


def _runs_dtk_image(daemonset: DriverDaemonSet) -> bool:
    """The DaemonSet runs a real Driver Toolkit image (not the image-missing stand-in)."""
    return bool(daemonset.dtk_image) and daemonset.labels.get(labels.DTK_IMAGE_MISSING) != "true"


def _kept(present: list[DriverDaemonSet], key: DriverKey) -> DriverDaemonSet | None:
    """Of the existing DaemonSets with this identity, the one we keep updating (others are duplicates)."""
    if not present:
        return None
    preferred = daemonset_name(key)
    # NB: prefer the canonical name, then the smallest, so the choice never depends on list order.
    return min(present, key=lambda d: (d.name != preferred, d.name))


def _garbage(
    snapshot: DriverSnapshot,
    existing: Mapping[tuple[Strategy, str], list[DriverDaemonSet]],
    desired: list[DesiredDriverDaemonSet],
) -> tuple[list[StaleDriverDaemonSet], list[Finding]]:
    """Existing DaemonSets no desired entry keeps, and whether each may be deleted now."""
    kept_names = {d.name for d in desired}
    candidates = [
        (identity, daemonset)
        for identity, daemonsets in sorted(existing.items())
        for daemonset in daemonsets
        if daemonset.name not in kept_names
    ]
    # a partial or failed node read: a missing node would look like a key nobody uses
    if not snapshot.nodes_complete:
        if candidates:
            return [], [GarbageCollectionSuspended("the node list was incomplete")]
        return [], []

    by_name = {d.name: d for daemonsets in existing.values() for d in daemonsets}
    # For every node: the existing DaemonSet that is meant to run its driver, if it is ready to.
    ready_for: dict[NodeName, bool] = {}
    for entry in desired:
        live = by_name.get(entry.name)
        ready = live is not None and live.fully_scheduled and not entry.image_missing
        for node in entry.nodes:
            ready_for[node] = ready

    stale: list[StaleDriverDaemonSet] = []
    findings: list[Finding] = []
    for (strategy, key_value), daemonset in candidates:
        served = [n.name for n in snapshot.nodes if _carries(n, strategy, key_value)]
        if not served:
            if daemonset.desired_number_scheduled == 0 and daemonset.number_misscheduled == 0:
                # no GPU node carries its key and no pod is left: the DaemonSet is stale
                stale.append(
                    StaleDriverDaemonSet(daemonset.name, key_value, strategy, "no GPU node has this key")
                )
            else:
                # no GPU node carries its key but the DaemonSet controller still counts pods: wait
                findings.append(
                    StaleDaemonSetDraining(
                        daemonset.name, daemonset.desired_number_scheduled, daemonset.number_misscheduled
                    )
                )
            continue
        waiting = tuple(sorted(node for node in served if not ready_for.get(node, False)))
        if waiting:
            # its nodes now want another DaemonSet (mode switch, fallback, duplicate) that does not run yet
            findings.append(WaitingForHandover(daemonset.name, waiting))
            continue
        # every node it serves has a scheduled pod of its replacement: the DaemonSet is superseded
        stale.append(
            StaleDriverDaemonSet(
                daemonset.name,
                key_value,
                strategy,
                "superseded: every node it served has its replacement",
                superseded=True,
            )
        )
    return stale, findings


def _carries(node: GpuNode, strategy: Strategy, key_value: str) -> bool:
    key = node_key(node, strategy)
    return key is not None and key_label_value(key) == key_value


def _stale_nfd_labels(nodes: Iterable[GpuNode]) -> list[Finding]:
    findings: list[Finding] = []
    for node in sorted(nodes, key=lambda n: n.name):
        running = node.running_rhcos_version
        # NFD lags the node's real RHCOS build (or the other way round): report, never guess
        if node.ostree_version and running and running != node.ostree_version:
            findings.append(StaleNfdLabel(node.name, node.ostree_version, running))
    return findings


def _names(nodes: Iterable[GpuNode]) -> tuple[NodeName, ...]:
    return tuple(sorted(node.name for node in nodes))


def _single(keys: set[DriverKey]) -> DriverKey | None:
    return min(keys) if keys else None


# --- precompiled images with a Driver Toolkit fallback --------------------------


@dataclass(frozen=True)
class PullFailure:
    """The driver pods of a precompiled key cannot pull `image`, observed since `since`."""

    key: DriverKey
    image: str
    since: datetime.datetime


@dataclass(frozen=True)
class FallbackPlan:
    """Which precompiled keys build with the Driver Toolkit, and which may soon."""

    # key -> the precompiled image that failed (feed to DriverSettings.dtk_fallback).
    keys: Mapping[DriverKey, str]
    # key -> when it falls back unless the pull starts working (requeue then).
    pending: Mapping[DriverKey, datetime.datetime]


def plan_precompiled_fallback(
    *,
    wanted: Mapping[DriverKey, str],
    failures: Iterable[PullFailure],
    current: Mapping[DriverKey, str],
    now: datetime.datetime,
    grace: datetime.timedelta,
) -> FallbackPlan:
    """Decide the per-key fallback from precompiled images to Driver Toolkit builds.

    `wanted`: the precompiled image each key with nodes would use now.
    `current`: keys already on fallback, with the image that failed (read back from the
    fallback DaemonSets' annotations, so the decision survives restarts and does not
    flap once the failing pods are gone).
    """
    keys: dict[DriverKey, str] = {}
    pending: dict[DriverKey, datetime.datetime] = {}
    for key, failed_image in current.items():
        # already on fallback and the precompiled image is still the one that failed: stay
        if wanted.get(key) == failed_image:
            keys[key] = failed_image
        # otherwise: a new driver version (retry precompiled) or no node left: drop the fallback
    for failure in failures:
        # the observation is about an image we no longer want (old version): ignore it
        if wanted.get(failure.key) != failure.image or failure.key in keys:
            continue
        deadline = failure.since + grace
        if now >= deadline:
            # failing for longer than the grace period: fall back
            keys[failure.key] = failure.image
            pending.pop(failure.key, None)
        else:
            # failing, but give the registry until the deadline (keep the earliest observation)
            pending[failure.key] = min(deadline, pending.get(failure.key, deadline))
    return FallbackPlan(keys=dict(sorted(keys.items())), pending=dict(sorted(pending.items())))


def fallbacks_in_effect(daemonsets: Iterable[DriverDaemonSet]) -> dict[DriverKey, str]:
    """The `current` input of plan_precompiled_fallback, read back from DTK fallback DaemonSets."""
    found: dict[DriverKey, str] = {}
    for daemonset in daemonsets:
        key = daemonset.annotations.get(labels.PRECOMPILED_FALLBACK_KEY)
        image = daemonset.annotations.get(labels.PRECOMPILED_FALLBACK_IMAGE)
        if key and image:
            found[DriverKey(key)] = image
    return found

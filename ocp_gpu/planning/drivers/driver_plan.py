"""Which driver DaemonSets should exist, which are stale, and what is wrong with the nodes' keys.

One mechanism, three keying strategies (DESIGN §3): every GPU node gets a key —
its RHCOS build (Driver Toolkit), its OS (vanilla) or its kernel + OS (precompiled) —
and every key gets exactly one DaemonSet that selects the nodes carrying it.

Decides: the desired DaemonSets (name, key, selector, images), which existing ones
to delete, and findings for status, events and metrics (missing DTK tags, stale NFD
labels, nodes without key labels, a broken or absent ImageStream).  Also the settings it
runs with (`settings_for_policy`: the driver image `driver.version` tags, resolved here).  The
strategy (driver_strategy.py), keys (driver_keys.py), names (driver_names.py), the
finding records (driver_findings.py) and the precompiled fallback (driver_fallback.py)
each have their own module.  Also decides (the last section) which nodes keep a driver newer
than the release default while `driver.version` is unset, and what their DaemonSets run then.

Never does: read the cluster or the clock (the caller passes a snapshot, `now` and
`DriverSettings`; only `is_version_pinned` looks at the policy), render manifests, or delete
anything itself.

The invariant behind every deletion: a GPU node is never left without a driver pod
because of something this module decided.  Existing DaemonSets are identified by
their labels, never by their names.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from packaging.version import InvalidVersion, Version

from ocp_gpu.model import images, labels, releases
from ocp_gpu.model.driver_snapshot import (
    DriverDaemonSet,
    DriverKey,
    DriverSnapshot,
    DriverToolkitStream,
    GpuNode,
    RhcosVersion,
    StreamState,
)
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.planning import platforms
from ocp_gpu.planning.drivers import driver_downgrades, driver_strategy
from ocp_gpu.planning.drivers.driver_findings import (
    DeferredDaemonSet,
    DriverNewerThanDefault,
    DriverToolkitFallback,
    DriverToolkitStreamProblem,
    Finding,
    MissingDriverToolkitTag,
    NodeMissingKeyLabels,
    StaleNfdLabel,
    UnidentifiedDaemonSet,
    WaitingForHandover,
)
from ocp_gpu.planning.drivers.driver_keys import (
    identify_daemonset,
    missing_key_labels,
    node_key,
    node_selector,
)
from ocp_gpu.planning.drivers.driver_names import daemonset_name, hashed_name, key_label_value
from ocp_gpu.planning.drivers.driver_strategy import Strategy

# --- the settings a plan runs with -------------------------------------------


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
    dtk_fallback: Mapping[DriverKey, str] = dataclasses.field(default_factory=dict)
    # NB: precompiled images are tagged by driver *branch* (570) while DTK builds need a full
    # version (570.124.06); the base image for fallback builds, `driver_image` when None.
    fallback_driver_image: images.ImageRef | None = None


def settings_for_policy(
    policy: policy_spec.Policy,
    platform: platforms.Platform,
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
        driver_strategy.driver_toolkit_allowed(platform, policy)
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
    return DriverSettings(
        strategy=driver_strategy.select_strategy(platform, policy),
        driver_image=base,
        dtk_available=dtk_available,
        dtk_fallback=dict(dtk_fallback or {}) if dtk_available else {},
        fallback_driver_image=fallback_image,
    )


def fallback_grace(policy: policy_spec.Policy) -> datetime.timedelta:
    """How long a precompiled image may fail to pull before its key falls back to a DTK build."""
    return datetime.timedelta(seconds=policy.driver.precompiled_fallback.image_pull_timeout_seconds)


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
    # The pod selector (`pod_selector`): NVIDIA's for DTK, else app=nvidia-driver-daemonset plus
    # strategy and key; selectors never overlap.
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


def plan_driver_daemonsets(
    snapshot: DriverSnapshot, settings: DriverSettings, ahead: Sequence[GpuNode] = ()
) -> DriverPlan:
    """The desired and stale driver DaemonSets for one snapshot; pure and deterministic.

    `ahead`: stand-ins for the nodes of RHCOS builds an OpenShift upgrade brings and no node runs
    yet (planning/upgrades/upgrade_preflight.ahead_nodes): in DTK mode each such build whose DTK
    tag is there (precompiled: whose kernel is known) gets its DaemonSet now, with no nodes, so
    the first node that reboots into it gets its driver pod at once; once no upgrade names it,
    no node and no stand-in keeps it and it is collected like any DaemonSet without nodes.
    """
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

    # 4b. the upgrade's target builds, ahead of their nodes (only what nodes already want otherwise)
    strategy = settings.strategy
    for stand_in in ahead if strategy is not Strategy.VANILLA else ():
        key = node_key(stand_in, strategy)
        if key is None or (strategy, key) in groups or key in settings.dtk_fallback:
            continue
        present = existing.get((strategy, key_label_value(key)), [])
        outcome = _desired(strategy, key, [stand_in], present, snapshot.stream, settings, {})
        if isinstance(outcome, DesiredDriverDaemonSet) and not outcome.image_missing:
            # NB: no tag, no DaemonSet ahead: it would only stand there without a Driver Toolkit
            desired.append(replace(outcome, nodes=()))

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
    name = keep.name if keep is not None else daemonset_name(key)
    return DesiredDriverDaemonSet(
        name=name,
        key=key,
        strategy=strategy,
        node_selector=node_selector(first, strategy),
        labels=identity_labels,
        selector=pod_selector(strategy, key, name),
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


def pod_selector(strategy: Strategy, key: DriverKey, name: str) -> dict[str, str]:
    """The pod selector of the driver DaemonSet `name` (its pods carry these labels).

    DTK: NVIDIA's, app=<the DaemonSet's name> (its transformOpenShiftDriverToolkitContainer at
    the release we pin), so NVIDIA's DaemonSet of the same RHCOS version is updated in place and
    handed back the same way.  Vanilla and precompiled: app=nvidia-driver-daemonset plus the
    strategy and key, so selectors never overlap (NVIDIA's do not differ per key: those are
    replaced, kube/adopting.py).
    """
    if strategy is Strategy.DTK:
        return {labels.APP: name}
    return {
        labels.APP: labels.DRIVER_APP,
        labels.DRIVER_STRATEGY: strategy.value,
        labels.DRIVER_KEY: key_label_value(key),
    }


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
            name = hashed_name(entry.key, f"{entry.strategy.value}:{entry.key}")
            owner[name] = identity
            entry = replace(entry, name=name, selector=pod_selector(entry.strategy, entry.key, name))
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
            # no GPU node carries its key: the DaemonSet is stale.
            # NB: decided from the node view, not the DaemonSet controller's counters: any pod it
            # still has runs on a node that left its key, is misscheduled and would be deleted by
            # the controller anyway, so waiting for desiredNumberScheduled == 0 and
            # numberMisscheduled == 0 (a status that lags by a watch round trip) adds no safety.
            # A node that gains the key again makes it desired again in the next pass.
            stale.append(
                StaleDriverDaemonSet(daemonset.name, key_value, strategy, "no GPU node has this key")
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


# --- Whether GPU nodes run a driver newer than the release's default, and what to keep then.
#
# Decides, for each driver DaemonSet the plan wants, whether its nodes already run a driver
# newer than the one the policy would roll them to by default (`driver.version` unset, so the
# version is the release's, DRIVER_IMAGE): a cluster taken over from NVIDIA's operator, or
# nodes an admin moved on by hand.  Such a DaemonSet keeps the newest running version (the
# same image name with that version's tag) instead of rolling its nodes back, and the finding
# `DriverNewerThanDefault` names the nodes, both versions and the fix (set `driver.version`).
# An explicit `driver.version` is never second-guessed here: it rolls as asked
# (driver_downgrades.py warns when that is a downgrade).  Precompiled keys (tagged by driver
# branch) are left alone.  Pure: no I/O, no clock.


def running_version(node_labels: Mapping[str, str]) -> str | None:
    """The driver version a node runs, as GPU feature discovery labels it; None when unknown.

    `nvidia.com/cuda.driver-version.full` (GFD v0.15+), else the older
    `nvidia.com/cuda.driver.major/minor/rev` triple.  NB: GFD reads it from the loaded kernel
    module, so it is what runs, whoever installed it (NVIDIA's operator, ours, the host).
    """
    full = node_labels.get(labels.CUDA_DRIVER_VERSION_FULL, "").strip()
    if not full:
        parts = [node_labels.get(key, "").strip() for key in labels.CUDA_DRIVER_VERSION_PARTS]
        full = ".".join(parts) if all(parts) else ""
    return full if full and _comparable(full) is not None else None


def default_version(base_image: str) -> str | None:
    """The driver version of the default image: its tag, or the release table's for its digest."""
    tagged = driver_downgrades.driver_version(base_image)
    if tagged is not None:
        return tagged[0]
    return releases.driver_version_of(base_image)


def is_version_pinned(policy: policy_spec.Policy) -> bool:
    """The admin chose the driver's version: `driver.version`, or a full reference in `driver.image`."""
    image = policy.driver.image
    name = image.name.strip()
    return bool(image.version.strip()) or "@" in name or ":" in name.rpartition("/")[2]


def plan_keep_newer(
    plan: DriverPlan,
    running: Mapping[NodeName, str],
    existing_images: Mapping[str, str],
    default: str | None,
) -> tuple[DriverPlan, tuple[DriverNewerThanDefault, ...]]:
    """`plan` with each DaemonSet whose nodes run a newer driver than `default` kept on it.

    `running`: each GPU node's running version (`running_version`); `existing_images`: the
    driver image of each DaemonSet that exists now, by name (it keeps a version this rule
    chose after its nodes' labels go, e.g. GFD disabled).  The caller applies this only when
    the policy does not pin a version (`is_version_pinned`).
    """
    default_key = _comparable(default or "")
    if default is None or default_key is None:
        # the default's version is unknown (a mirror's digest): nothing to compare with
        return plan, ()
    desired: list[DesiredDriverDaemonSet] = []
    found: list[DriverNewerThanDefault] = []
    for entry in plan.desired:
        kept = _kept_newer(entry, running, existing_images.get(entry.name), default, default_key)
        if kept is None:
            desired.append(entry)
            continue
        replaced, finding = kept
        desired.append(replaced)
        found.append(finding)
    findings = (*plan.findings, *found)
    return dataclasses.replace(plan, desired=tuple(desired), findings=findings), tuple(found)


def _kept_newer(
    entry: DesiredDriverDaemonSet,
    running: Mapping[NodeName, str],
    existing_image: str | None,
    default: str,
    default_key: Version,
) -> tuple[DesiredDriverDaemonSet, DriverNewerThanDefault] | None:
    if entry.strategy is Strategy.PRECOMPILED or entry.fallback_for is not None:
        # precompiled images are tagged by branch: a version cannot be kept by tag
        return None
    candidates: dict[str, list[NodeName]] = {}
    for node in entry.nodes:
        found = running.get(node)
        if found is not None:
            candidates.setdefault(found, []).append(node)
    existing = driver_downgrades.driver_version(existing_image) if existing_image else None
    if existing is not None:
        # the version this rule kept before: sticky, even when no node label says so any more
        candidates.setdefault(existing[0], [])
    newer = [text for text in candidates if (_comparable(text) or default_key) > default_key]
    if not newer:
        # no node runs anything newer than the default: it rolls as planned
        return None
    newest = max(newer, key=lambda text: _comparable(text) or default_key)
    reference = images.parse_reference(entry.driver_image)
    if reference is None:
        return None
    prefix = f"{reference.repository}/" if reference.repository else ""
    try:
        image = images.driver_image_for(images.ImageRef(f"{prefix}{reference.name}:{newest}"), entry.os_tag)
    except ValueError:
        # the version cannot make a valid tag with this OS: leave the plan as it is
        return None
    nodes = tuple(sorted(candidates[newest])) or entry.nodes
    return (
        dataclasses.replace(entry, driver_image=image),
        DriverNewerThanDefault(entry.name, nodes, newest, default),
    )


def _comparable(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def newer_than_default_nodes(
    node_labels: Mapping[NodeName, Mapping[str, str]], default: str | None
) -> tuple[NodeName, ...]:
    """The nodes whose running driver is newer than `default` (for `ocp-gpu status`'s count)."""
    default_key = _comparable(default or "")
    if default_key is None:
        return ()
    return tuple(
        sorted(
            name
            for name, found in node_labels.items()
            if (text := running_version(found)) is not None
            and (_comparable(text) or default_key) > default_key
        )
    )


def versions_of(nodes: Sequence[tuple[NodeName, Mapping[str, str]]]) -> dict[NodeName, str]:
    """Each node's running driver version, for the nodes GFD labelled."""
    return {name: found for name, node_labels in nodes if (found := running_version(node_labels)) is not None}

"""Which NVIDIADriver owns each GPU node, and what its driver DaemonSets are called and select.

With `driver.useNvidiaDriverCRD`, every NVIDIADriver selects a pool of GPU nodes.  A node
gets exactly one owner, recorded in its label `nvidia.com/gpu-operator.driver.owner` (NVIDIA's
name); a pool's driver DaemonSets select on that label, so two pools never run driver
DaemonSets on one node, whatever their selectors say.

Decides:
- the owner of every GPU node (`plan_pool_owners`), by these rules, in order:
  1. a node owned by an NVIDIADriver whose spec is invalid stays with it (nothing running is
     deleted because of bad input);
  2. a node already owned by a pool that still selects it stays with it (a conflict never
     moves a running driver);
  3. otherwise the oldest selecting pool takes it (creationTimestamp, then name);
  4. a node no pool selects goes to the default NVIDIADriver (`spec.default: true`), if any;
  and the conflicts: nodes two or more pools select, naming both and the nodes;
- the DaemonSets of one pool (`for_pool`): the driver planner's per-key plan for the pool's
  nodes, renamed `nvidia-<driverType>-driver-<pool>-<key>` and selecting on the owner label;
- which of the ClusterPolicy's own driver DaemonSets the pools have replaced
  (`plan_policy_handover`).

Never does: read or write anything, or look at the clock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from ocp_gpu.model import labels
from ocp_gpu.model.driver_snapshot import DriverDaemonSet, GpuNode
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.planning.drivers import driver_findings, driver_keys, driver_names, driver_plan
from ocp_gpu.planning.operands import node_labels

# How many node names a conflict message quotes before "+N more".
NODES_QUOTED = 10
_MAX_NAME = 63
_HASH_LENGTH = 8


@dataclasses.dataclass(frozen=True)
class Pool:
    """One NVIDIADriver as pool selection needs it."""

    name: str
    # RFC 3339 creationTimestamp: sorts chronologically.
    created: str
    selector: Mapping[str, str]
    default: bool = False
    # Its spec is valid: it may take nodes (an invalid one only keeps those it has).
    valid: bool = True

    @property
    def age_key(self) -> tuple[str, str]:
        return (self.created, self.name)


@dataclasses.dataclass(frozen=True)
class SelectorConflict:
    """Nodes that `loser`'s selector takes too, but that stay with `owner`."""

    reason: ClassVar[str] = "ConflictingNodeSelector"
    owner: str
    loser: str
    nodes: tuple[NodeName, ...]

    def message_for(self, pool: str) -> str:
        quoted = ", ".join(self.nodes[:NODES_QUOTED])
        more = f" (+{len(self.nodes) - NODES_QUOTED} more)" if len(self.nodes) > NODES_QUOTED else ""
        both = f"NVIDIADrivers {self.owner} and {self.loser} both select {quoted}{more}"
        if pool == self.owner:
            return f"{both}; they stay with {self.owner} (the older or already running pool)"
        return (
            f"{both}; {self.owner} keeps them (the older or already running pool), so {self.loser} "
            "runs no driver there: make the nodeSelectors disjoint"
        )


@dataclasses.dataclass(frozen=True)
class OwnerPlan:
    # GPU node -> the NVIDIADriver that owns it (nodes no pool selects are left out).
    owners: Mapping[NodeName, str]
    # Owner labels to write: node -> pool name, or None to remove the label.
    label_changes: Mapping[NodeName, str | None]
    conflicts: tuple[SelectorConflict, ...]
    # GPU nodes that want a driver and that no NVIDIADriver selects, sorted.
    unowned: tuple[NodeName, ...]
    # Default NVIDIADrivers beyond the oldest one: they take no node.
    extra_defaults: tuple[str, ...] = ()

    def nodes_of(self, pool: str) -> tuple[NodeName, ...]:
        return tuple(sorted(node for node, owner in self.owners.items() if owner == pool))

    def conflicts_of(self, pool: str) -> tuple[SelectorConflict, ...]:
        return tuple(c for c in self.conflicts if pool in (c.owner, c.loser))


def selects(selector: Mapping[str, str], node: Mapping[str, str]) -> bool:
    """The node carries every label of the selector (a Kubernetes equality selector)."""
    return all(node.get(key) == value for key, value in selector.items())


def plan_pool_owners(nodes: Mapping[NodeName, Mapping[str, str]], pools: Sequence[Pool]) -> OwnerPlan:
    """The owner of every GPU node, the label writes that record it, and the conflicts."""
    by_name = {pool.name: pool for pool in pools}
    ordered = sorted((pool for pool in pools if pool.valid and not pool.default), key=lambda p: p.age_key)
    defaults = sorted((pool for pool in pools if pool.valid and pool.default), key=lambda p: p.age_key)
    default = defaults[0] if defaults else None
    owners: dict[NodeName, str] = {}
    changes: dict[NodeName, str | None] = {}
    contested: dict[tuple[str, str], list[NodeName]] = defaultdict(list)
    unowned: list[NodeName] = []
    for name in sorted(nodes):
        node = nodes[name]
        current = node.get(labels.NVIDIA_DRIVER_OWNER)
        if not node_labels.is_gpu_node(node):
            # not a GPU node (any more): no owner
            if current is not None:
                changes[name] = None
            continue
        matching = [pool for pool in ordered if selects(pool.selector, node)]
        owner: str | None
        if current in by_name and not by_name[current].valid:
            # its NVIDIADriver's spec is invalid: the node keeps what runs there
            owner = current
        elif current is not None and any(pool.name == current for pool in matching):
            # already owned by a pool that still selects it: a running driver never moves
            owner = current
        elif matching:
            # the oldest selecting pool takes it
            owner = matching[0].name
        elif default is not None:
            # no pool selects it: the default NVIDIADriver's
            owner = default.name
        else:
            # no pool at all for this node
            owner = None
        for pool in matching:
            if owner is not None and pool.name != owner:
                # another pool selects it too: a conflict, reported on both
                contested[(owner, pool.name)].append(name)
        if owner is None:
            if driver_wanted(node):
                unowned.append(name)
        else:
            owners[name] = owner
        if owner != current:
            changes[name] = owner
    conflicts = tuple(
        SelectorConflict(owner, loser, tuple(found)) for (owner, loser), found in sorted(contested.items())
    )
    return OwnerPlan(
        owners=owners,
        label_changes=changes,
        conflicts=conflicts,
        unowned=tuple(unowned),
        extra_defaults=tuple(pool.name for pool in defaults[1:]),
    )


def driver_wanted(node: Mapping[str, str]) -> bool:
    """A GPU node that has not been opted out of the driver."""
    return (
        node.get(labels.deploy_label("driver")) != node_labels.FALSE
        and node.get(labels.GPU_DEPLOY_OPERANDS) != node_labels.FALSE
    )


# --- names and labels of a pool's DaemonSets ------------------------------------


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_LENGTH]


def owner_label_value(pool: str) -> str:
    """The owner label's value for a pool: its name when that is a valid label value.

    NB: NVIDIADriver names are DNS subdomains of up to 253 characters, label values at most
    63: a longer name is cut and suffixed with a hash of the whole name (stable, distinct).
    """
    if len(pool) <= _MAX_NAME:
        return pool
    return f"{pool[: _MAX_NAME - 1 - _HASH_LENGTH].rstrip('.-')}-{_short_hash(pool)}"


def daemonset_name(pool: str, key: str, driver_type: str = "gpu") -> str:
    """`nvidia-<driverType>-driver-<pool>-<key>` (NVIDIA's pattern), at most 63 characters.

    A pure function of its inputs, so names are stable; too long, it is cut and suffixed with
    a hash of (pool, key), so two pools or keys sharing a prefix still differ.
    """
    prefix = f"nvidia-{driver_type}-driver-"
    body = re.sub(r"[^a-z0-9.-]", "-", f"{pool}-{key}".lower()).strip(".-")
    if len(prefix) + len(body) <= _MAX_NAME:
        return prefix + body
    room = _MAX_NAME - len(prefix) - 1 - _HASH_LENGTH
    return f"{prefix}{body[:room].rstrip('.-')}-{_short_hash(pool + '/' + key)}"


def pool_of(daemonset: DriverDaemonSet) -> str | None:
    """The owner-label value of the NVIDIADriver a driver DaemonSet belongs to; None: the ClusterPolicy's."""
    return daemonset.labels.get(labels.NVIDIA_DRIVER)


def for_pool(plan: driver_plan.DriverPlan, pool: str, driver_type: str = "gpu") -> driver_plan.DriverPlan:
    """The driver planner's plan for a pool's nodes, as that pool's DaemonSets.

    New DaemonSets get the pool's names (existing ones keep theirs); every one selects
    nodes by the owner label besides its key labels, and carries the pool's label on
    itself, its selector and its pods, so two pools' selectors never overlap.
    """
    value = owner_label_value(pool)
    desired: list[driver_plan.DesiredDriverDaemonSet] = []
    taken: set[str] = set()
    for entry in plan.desired:
        name = entry.name if entry.exists else daemonset_name(pool, entry.key, driver_type)
        if name in taken:
            # two keys sanitised to one name: the second takes its hashed name
            name = daemonset_name(pool, f"{entry.key}-{_short_hash(entry.key)}", driver_type)
        taken.add(name)
        desired.append(
            dataclasses.replace(
                entry,
                name=name,
                labels={**entry.labels, labels.NVIDIA_DRIVER: value},
                # NB: a pool keeps app=nvidia-driver-daemonset, strategy and key for every strategy
                # (NVIDIADriver pools are not taken over from NVIDIA's operator).
                selector={
                    labels.APP: labels.DRIVER_APP,
                    labels.DRIVER_STRATEGY: entry.strategy.value,
                    labels.DRIVER_KEY: driver_names.key_label_value(entry.key),
                    labels.NVIDIA_DRIVER: value,
                },
                node_selector={**entry.node_selector, labels.NVIDIA_DRIVER_OWNER: value},
            )
        )
    return dataclasses.replace(plan, desired=tuple(sorted(desired, key=lambda d: d.name)))


# --- handing the ClusterPolicy's drivers over to the pools ------------------------


@dataclasses.dataclass(frozen=True)
class Handover:
    # ClusterPolicy driver DaemonSets every node of which a pool owns now: delete them.
    delete: tuple[str, ...]
    kept: tuple[driver_findings.WaitingForHandover, ...]


def plan_policy_handover(
    daemonsets: Iterable[DriverDaemonSet],
    nodes: Iterable[GpuNode],
    owners: Mapping[NodeName, str],
    planned_pools: Iterable[str],
    complete: bool = True,
) -> Handover:
    """Which of the ClusterPolicy's own driver DaemonSets the NVIDIADrivers have replaced.

    One is deleted once every GPU node carrying its key is owned by a pool whose DaemonSets
    were planned this pass (their pods wait for the old pod to go: driver pods repel each
    other), and kept, named in a finding, while any of its nodes has no pool.
    NB: never on an incomplete node list, where a missing node would look owned.
    """
    if not complete:
        return Handover((), ())
    planned = set(planned_pools)
    node_list = list(nodes)
    delete: list[str] = []
    kept: list[driver_findings.WaitingForHandover] = []
    for daemonset in sorted(daemonsets, key=lambda d: d.name):
        if pool_of(daemonset) is not None:
            # a pool's own DaemonSet: not the ClusterPolicy's
            continue
        identity = driver_keys.identify_daemonset(daemonset)
        if identity is None:
            # not ours to judge (the driver planner reports it)
            continue
        strategy, key_value = identity
        served = [
            node.name
            for node in node_list
            if (key := driver_keys.node_key(node, strategy)) is not None
            and driver_names.key_label_value(key) == key_value
        ]
        waiting = tuple(sorted(name for name in served if owners.get(name) not in planned))
        if waiting:
            # some of its nodes have no pool (yet): they keep this driver
            kept.append(driver_findings.WaitingForHandover(daemonset.name, waiting))
        else:
            # every node it served belongs to a pool now (or none is left)
            delete.append(daemonset.name)
    return Handover(tuple(delete), tuple(kept))

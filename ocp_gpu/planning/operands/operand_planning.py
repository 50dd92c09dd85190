"""Decisions shared by every operand DaemonSet except the driver's: where each belongs and
whether it is ready.

Operand readiness (`unready_nodes`) is decided per node, from the operand pods the watch
saw, never from a DaemonSet's counters alone; while a DaemonSet rolls out a new template, only
its pods of that template count (`rolling_generations`, as NVIDIA's isDaemonSetReady).  (How
their DaemonSets update is rendering's: rendering/operands/operand_rendering.update_strategy.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ocp_gpu.model import driver_snapshot, labels, operand_types


def should_run(operand: operand_types.Operand, node_labels: Mapping[str, str]) -> bool:
    """The operand belongs on this node: a GPU node labelled nvidia.com/gpu.deploy.<name>=true
    (and with whatever else its DaemonSet selects on, e.g. nvidia.com/mps.capable=true)."""
    return node_labels.get(labels.NFD_NVIDIA_PCI) == "true" and all(
        node_labels.get(key) == value for key, value in operand.node_selector.items()
    )


def unready_nodes(
    operand: operand_types.Operand,
    node_labels: Mapping[str, Mapping[str, str]],
    pods: Iterable[operand_types.OperandPod],
) -> list[str]:
    """The nodes that should run `operand` but have no Ready pod of it, sorted.

    `node_labels` maps every node name to its labels.  NB: a GPU node that no
    DaemonSet selects (a taint not tolerated, a missing driver key) has no pod at
    all and so is never ready: "ready" is judged per node, not from the DaemonSet's counts.
    """
    ready = {pod.node for pod in pods if pod.app == operand.app and pod.ready}
    return sorted(
        name for name, node in node_labels.items() if should_run(operand, node) and name not in ready
    )


def rolling_generations(
    enabled: Iterable[operand_types.Operand],
    daemonsets: Mapping[str, driver_snapshot.DriverDaemonSet],
    written_hashes: Mapping[str, str],
) -> dict[str, int]:
    """Operand app -> the oldest template generation of its pods that counts, for every enabled
    operand whose DaemonSet is rolling out a template (absent: every Ready pod counts).

    `daemonsets`: the operands' DaemonSets as the watch shows them, by name; `written_hashes`: by
    name, the applied hash this process last wrote or saw of each.  NB: a spec change is "ready"
    only once it runs: right after an apply the old pods are still Ready, and a test (or an admin's
    `oc wait`) reading that "ready" saw the device plugin roll and its GPUs go after it (issue 30).
    The driver's DaemonSets are left out: the upgrade controller rolls them (OnDelete).
    """
    oldest: dict[str, int] = {}
    for operand in enabled:
        daemonset = daemonsets.get(operand.daemonset) if operand.generic else None
        if daemonset is None:
            continue
        written = written_hashes.get(operand.daemonset)
        if written and daemonset.annotations.get(labels.APPLIED_HASH) != written:
            # Written, not yet seen back through the watch: its new generation is newer than any seen.
            oldest[operand.app] = daemonset.generation + 1
        elif not daemonset.rolled_out:
            oldest[operand.app] = daemonset.generation
    return oldest


def unready_by_operand(
    enabled: Sequence[operand_types.Operand],
    node_labels: Iterable[tuple[str, Mapping[str, str]]],
    pods: Iterable[operand_types.OperandPod],
    rolling: Mapping[str, int] | None = None,
) -> dict[str, list[str]]:
    """`unready_nodes` of every operand in `enabled` at once: operand name -> its unready nodes,
    sorted; operands Ready everywhere left out; in the order of `enabled`.

    `rolling` (`rolling_generations`): an operand rolling out counts only its pods of the new
    template; a node with a Ready pod of an older one is unready.

    NB: one walk over the nodes and one over the pods for every operand, not one of each per
    operand: the status judges this on every pass while thousands of pods come up (issue 13).
    """
    oldest_counted = rolling or {}
    ready: dict[str, set[str]] = {}
    for pod in pods:
        if pod.ready and pod.template_generation >= oldest_counted.get(pod.app, 0):
            ready.setdefault(pod.app, set()).add(pod.node)
    checks = [
        (operand.name, tuple(operand.node_selector.items()), ready.get(operand.app, set()))
        for operand in enabled
    ]
    found: dict[str, list[str]] = {operand.name: [] for operand in enabled}
    for name, node in node_labels:
        if node.get(labels.NFD_NVIDIA_PCI) != "true":
            # Not a GPU node: no operand belongs on it (should_run).
            continue
        for operand_name, selector, ready_on in checks:
            if name not in ready_on and all(node.get(key) == value for key, value in selector):
                found[operand_name].append(name)
    return {operand_name: sorted(unready) for operand_name, unready in found.items() if unready}


# (kind, namespace or "", name) of one object, as kube/owning names it.
ObjectIdent = tuple[str, str, str]


def has_objects(owned: Iterable[str], component: str) -> bool:
    """Whether any object the watch shows as ours (`owned`: their app.kubernetes.io/component
    labels) belongs to the operand of `component`.

    NB: every object an operand renders carries its component label
    (rendering.operands.operand_rendering.component),
    so a disabled operand with none has nothing to delete: it need not even be rendered.
    """
    return component in set(owned)


def unrendered_owned(
    owned: Iterable[tuple[ObjectIdent, str, str]],
    component: str,
    owner_uid: str,
    rendered: Iterable[ObjectIdent],
) -> list[ObjectIdent]:
    """The objects of an enabled operand to delete: ours, of its component, no longer rendered.

    `owned` is (ident, app.kubernetes.io/component, controller owner uid) of every object the
    watch saw with `app.kubernetes.io/managed-by=ocp-gpu`.  Only objects owned by the active
    policy (`owner_uid`) and labelled with this operand's component count: what an admin
    made, or another operand's object, is never deleted.  E.g. migManager.config.name set
    to the admin's ConfigMap leaves our default-mig-parted-config unrendered: it goes.
    """
    if not component or not owner_uid:
        return []
    keep = set(rendered)
    return sorted(
        ident
        for ident, owned_component, owned_by in owned
        if owned_component == component and owned_by == owner_uid and ident not in keep
    )

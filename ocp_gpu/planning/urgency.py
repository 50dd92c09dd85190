"""Which watched changes skip the coalescing window: a GPU node changing driver key.

A pass runs at once after a quiet spell, and events within the window after a pass wait
for the rest of it, so that a burst costs one pass (reconcilers/scheduling.Coalescer).  A
known GPU node's driver key changing (its RHCOS build, OS or kernel) is rare (a node
reboots into a new RHCOS build) and is exactly what an admin or a waiting MCO drain
watches for, so it runs the next pass at once: its new key may have no DaemonSet yet, and
the old one may just have lost its last node (garbage collection decides from the nodes,
planning/drivers._garbage, so this node event is the last thing the delete waits for).

The upgrade loop (reconcilers/upgrade_reconciler.py) has its own window, and two urgent changes: a
pod turning Ready that a node in flight waits for, which is the pods' readiness, the part
of an upgrade the operator cannot shorten, so the pass that moves the node on should not
wait behind it:

- a driver pod turns Ready on a node in `pod-restart-required` (its restarted driver);
- a validator pod turns Ready on a node in `validation-required`.

Urgency only decides *when* the next pass runs; what it does is planned from the whole
view as always.  A node that joins or leaves is not urgent: a scale-up of many nodes is
the burst the window exists for.

The opposite case (`is_progress`): a change that only counts pods coming up (a DaemonSet's
ready, current or updated counts) can change nothing but the status's rollout progress, which
is written at most every few seconds anyway (planning/status_writes); such changes may wait
longer than the window (reconcilers/scheduling.PROGRESS_WINDOW_S), so that a rollout of hundreds
of pods costs a pass a second, not one per pod (issue 13, start-up CPU).

The other way round (`is_upgrade_only`): a node whose only change is the upgrade controller's
own marks (its state label, its annotations but `upgrade-enabled`) wakes the upgrade loop
only: the main pass reads neither (but for an opted-out node's state: planning/node_labels),
so the `upgrade-done` label of every node at start-up, each seen on its own as its driver pod
turns Ready, no longer runs a main pass each (issue 13, start-up CPU).

And a node event that is our own label patch coming back (`is_own_echo`) is rollout
progress for the main pass: at start-up every GPU node's deploy labels come back one by one
while the pass that wrote them is still writing, and each ran a main pass of its own.

Never does: read the cluster or the clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ocp_gpu.model import labels, nodes
from ocp_gpu.model.driver_snapshot import DriverDaemonSet, DriverKey, GpuNode
from ocp_gpu.model.upgrade_observations import DriverPod, UpgradeState, ValidatorPod
from ocp_gpu.planning.drivers.driver_keys import node_key
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from ocp_gpu.planning.operands.node_labels import reads_upgrade_state


def _driver_keys(facts: nodes.NodeFacts) -> tuple[DriverKey | None, ...] | None:
    """The node's key under every strategy (the policy picks one); None for a non-GPU node."""
    if not facts.is_gpu_node:
        return None
    node = GpuNode.from_facts(facts)
    return tuple(node_key(node, strategy) for strategy in Strategy)


def moves_driver_key(before: nodes.NodeFacts | None, after: nodes.NodeFacts | None) -> bool:
    """A known node now has another driver key, or became or stopped being a GPU node."""
    if before is None or after is None:
        # Joined or left: coalesced like any other burst.
        return False
    return _driver_keys(before) != _driver_keys(after)


def _without_upgrade_marks(facts: nodes.NodeFacts) -> nodes.NodeFacts:
    """The node's facts as the main pass reads them (the upgrade controller's marks left out)."""
    kept = {key: value for key, value in facts.labels.items() if key != labels.UPGRADE_STATE}
    enabled = facts.annotations.get(labels.UPGRADE_ENABLED_ANNOTATION)
    annotations = {} if enabled is None else {labels.UPGRADE_ENABLED_ANNOTATION: enabled}
    return dataclasses.replace(facts, labels=kept, annotations=annotations)


def is_upgrade_only(before: nodes.NodeFacts | None, after: nodes.NodeFacts) -> bool:
    """Only the upgrade controller's own marks on a known node changed: only its loop cares."""
    if before is None or before == after:
        # A node joining (the main pass labels it), or nothing changed at all.
        return False
    if reads_upgrade_state(before.labels) or reads_upgrade_state(after.labels):
        # Opted out of the driver: the main pass takes an idle upgrade state label off.
        return False
    return _without_upgrade_marks(before) == _without_upgrade_marks(after)


def _patched(kept: Mapping[str, str], patch: Mapping[str, str | None]) -> dict[str, str]:
    """`kept` with a JSON merge patch of flat keys applied (None removes the key)."""
    merged = dict(kept)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def is_own_echo(
    before: nodes.NodeFacts | None,
    after: nodes.NodeFacts,
    label_patch: Mapping[str, str | None],
    annotation_patch: Mapping[str, str | None],
) -> bool:
    """The node event shows exactly our own label and annotation patch applied, nothing else.

    NB: then the next pass plans nothing new for this node (its labels are what the pass
    wanted), and what the patch changes for everything else is rollout progress: which nodes
    are labelled for each operand (a missing deploy label already meant "deploy": the
    drivers are planned alike, planning/driver_coverage.wants_driver).
    """
    if before is None:
        return False
    expected = dataclasses.replace(
        before,
        labels=_patched(before.labels, label_patch),
        annotations=_patched(before.annotations, annotation_patch),
    )
    return after == expected


def _turned_ready(was_ready: bool | None, is_ready: bool) -> bool:
    return is_ready and not was_ready


def readies_driver(before: DriverPod | None, after: DriverPod, node_state: str | None) -> bool:
    """A driver pod just turned Ready on a node waiting in pod-restart-required for exactly that."""
    return (
        node_state == UpgradeState.POD_RESTART_REQUIRED.value
        and not after.terminating
        and _turned_ready(before.ready if before is not None else None, after.ready)
    )


def readies_validator(before: ValidatorPod | None, after: ValidatorPod, node_state: str | None) -> bool:
    """A validator pod just turned Ready on a node waiting in validation-required for exactly that."""
    return node_state == UpgradeState.VALIDATION_REQUIRED.value and _turned_ready(
        before.ready if before is not None else None, after.ready
    )


def is_progress(before: DriverDaemonSet | None, after: DriverDaemonSet) -> bool:
    """Only the DaemonSet's pod counts moved (ready, current, updated): rollout progress.

    NB: a changed desired or misscheduled count is not progress: which nodes the DaemonSet
    covers changed, and the status says so at once. Nor is the current count reaching the
    desired one (or leaving it): the driver plan hands a node over to a replacement DaemonSet
    (precompiled -> Driver Toolkit fallback, a mode switch) once that is fully scheduled
    (planning/drivers._garbage). A loaded DaemonSet controller writes the desired count and the
    current one in separate status updates; taken for progress, the second left the superseded
    DaemonSet in place until an unrelated change (issue 30: the fallback e2e test, under load).
    """
    if before is None:
        # A DaemonSet seen for the first time: the pass must know it exists.
        return False
    if before.fully_scheduled != after.fully_scheduled:
        # every selected node has its pod now (or no longer): an input of the handover
        return False
    counted = dataclasses.replace(
        after,
        number_ready=before.number_ready,
        current_number_scheduled=before.current_number_scheduled,
        updated_number_scheduled=before.updated_number_scheduled,
    )
    return counted == before and after != before

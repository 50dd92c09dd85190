"""Handing a node's GPUs from the device plugin to the DRA driver and back, around the pods using them.

Decides, for one node whose owner changes (planning/operands/node_labels.py: the DRA driver's
`nvidia.com/gpu.deploy.dra-driver` against the device plugin's), whether the new owner's label
may be written now or must wait for the pods that hold the node's GPUs through the old owner:

- **device plugin -> DRA**: the device plugin's label goes at once (no new `nvidia.com/gpu` pod
  is scheduled there: a kubelet whose plugin went advertises none), but the DRA label waits until
  no pod on the node holds an `nvidia.com/gpu*` / `nvidia.com/mig-*` resource any more.  NB: why
  wait: NVIDIA's DRA kubelet plugin publishes every GPU of the node and knows nothing of what the
  device plugin handed out, so a claim could be given a GPU a running pod already uses.  The
  running pods are never evicted or restarted: they finish, then DRA takes the node.
- **DRA -> device plugin**: the DRA label (its kubelet plugin) stays until no pod on the node
  holds an allocated ResourceClaim with a `gpu.nvidia.com` device (adminAccess ones too, and
  terminating pods whatever their phase, as NVIDIA's node labelling controller decides at
  v26.7.0, `nodeHasDRAClaimPods`): the kubelet calls the plugin to unprepare a claim's devices
  when its pod ends, and the device plugin would advertise GPUs those claims still hold.  NB:
  while it waits its slices stay published, so new claims can still be allocated on the node;
  the handover ends when the last claim-holding pod has ended.

What is not held: an admin's own "false" on either label (the admin's decision, applied at once),
an opted-out node (`nvidia.com/gpu.deploy.operands=false`) and a node that is no longer a GPU
node (planning/operands/node_labels.py removes ours at once).  A node whose pods could not be read
(`GpuPods` None) waits: starting the new owner over a GPU in use is not recoverable, a late
handover is.  Pure: never lists pods; the reconciler (reconcilers/cluster.py) lists the pods of
the nodes `handovers` names.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Iterable, Mapping

from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.model.upgrade_observations import WorkloadPod
from ocp_gpu.planning.upgrades import pod_selection

# A label patch: key -> new value, or None to remove the label (JSON merge patch).
LabelPatch = dict[str, str | None]

_TRUE = "true"


class Direction(enum.Enum):
    """Which way a node's GPUs move."""

    # The owner's label ("true") is being added: from the yielding plugin to the owner.
    TO_OWNER = "to-owner"
    # The owner's "true" is being removed: back to the yielding plugin.
    FROM_OWNER = "from-owner"


@dataclasses.dataclass(frozen=True)
class Handover:
    """One owner change planned on a node: the owner's label (the DRA driver's), the yielding
    plugin's (the device plugin's), and which way."""

    owner: str
    yielding: str
    direction: Direction


@dataclasses.dataclass(frozen=True)
class GpuPods:
    """The pods bound to one node that hold (or will hold) its GPUs, by how they got them."""

    # Pending or Running, requesting nvidia.com/gpu* or nvidia.com/mig-* (the device plugin's).
    device_plugin: int = 0
    # Pending, Running or terminating, holding an allocated ResourceClaim with a gpu.nvidia.com
    # device (adminAccess too).
    claims: int = 0


# No pod holds a GPU of the node.
IDLE = GpuPods()


class GpuOwner(enum.Enum):
    """Which plugin owns a node's GPUs, by its deploy labels (`ocp-gpu status`)."""

    DRA = "dra"
    DEVICE_PLUGIN = "plugin"
    # Neither (a handover waiting for device-plugin pods, an opted-out node, the admin's "false").
    NONE = "-"


def gpu_owner(node_labels: Mapping[str, str], exclusive: Iterable[tuple[str, str]]) -> GpuOwner:
    """The owner of a node's GPUs: the plugin whose deploy label is "true" (the DRA driver's first:
    planning/operands/node_labels.py never leaves both)."""
    for owner, yielding in exclusive:
        if node_labels.get(owner) == _TRUE:
            return GpuOwner.DRA
        if node_labels.get(yielding) == _TRUE:
            return GpuOwner.DEVICE_PLUGIN
    return GpuOwner.NONE


def gpu_pods(pods: Iterable[WorkloadPod], claims: Mapping[str, ClaimHold] | None) -> GpuPods:
    """Count a node's GPU pods, as the driver upgrade tells them (planning/upgrades/pod_selection).

    `claims`: what each ResourceClaim holds (resource_claims.claim_key); None when unknown, and
    then every claim counts as a GPU.
    """
    pods = tuple(pods)
    return GpuPods(
        device_plugin=sum(1 for pod in pods if pod.active and pod.requests_gpu),
        # As NVIDIA's nodeHasDRAClaimPods: a terminating pod counts whatever its phase (unpreparing
        # its claims is what still needs the kubelet plugin), and so do adminAccess claims.
        claims=sum(
            1
            for pod in pods
            if (pod.active or pod.terminating)
            and pod_selection.holds_gpu_claim(pod, claims, admin_access=True)
        ),
    )


def handovers(
    node_labels: Mapping[str, str], patch: Mapping[str, str | None], exclusive: Iterable[tuple[str, str]]
) -> tuple[Handover, ...]:
    """The owner changes a node's planned label patch makes (`exclusive`: (owner, yielding) pairs).

    NB: only the changes between "true" and absent are handovers: an admin's "false" is neither
    written nor removed by the operator.
    """
    found: list[Handover] = []
    for owner, yielding in exclusive:
        now, planned = node_labels.get(owner), patch.get(owner, node_labels.get(owner))
        if planned == _TRUE and now != _TRUE:
            # The owner is coming: its label added.
            found.append(Handover(owner, yielding, Direction.TO_OWNER))
        elif now == _TRUE and owner in patch and planned is None:
            # The owner is going: its label removed.
            found.append(Handover(owner, yielding, Direction.FROM_OWNER))
    return tuple(found)


def is_held(handover: Handover, pods: GpuPods | None) -> bool:
    """Whether the handover must wait for the node's GPU pods (`pods` None: not read, so it waits)."""
    if pods is None:
        # Unknown: wait (module docstring).
        return True
    if handover.direction is Direction.TO_OWNER:
        # Device-plugin pods still hold GPUs the DRA driver would publish.
        return pods.device_plugin > 0
    # Claim-holding pods still need the DRA kubelet plugin to unprepare their devices.
    return pods.claims > 0


def hold_handovers(
    patch: Mapping[str, str | None], held: Iterable[Handover], node_labels: Mapping[str, str]
) -> LabelPatch:
    """The patch with the held handovers taken back: the owner's label as it is, and the yielding
    plugin's "true" not added (nor kept) while the owner's is still there or still to come."""
    kept = dict(patch)
    for handover in held:
        kept.pop(handover.owner, None)
        if kept.get(handover.yielding) == _TRUE:
            # Coming back (DRA -> device plugin): not before the claims are done.
            del kept[handover.yielding]
        elif node_labels.get(handover.yielding) == _TRUE:
            # Going (device plugin -> DRA): at once, whatever the owner waits for; and never
            # "true" beside the owner's (an admin's hand could have set both).
            kept[handover.yielding] = None
    return kept


def owners_still_holding(
    exclusive: Iterable[tuple[str, str]],
    enabled: Collection[str] | None,
    every_node_labels: Iterable[Mapping[str, str]],
) -> frozenset[str]:
    """The owners' labels (the DRA driver's) whose operand is switched off but still "true" on a
    node waiting for its claims (`hold_handovers`): that operand's objects stay deployed until the
    last such label is gone, or the kubelet plugin would leave before the claims it prepared.

    `enabled`: the owners' labels whose operand is enabled; None (no valid policy): nothing is
    applied or deleted anyway, so none.
    """
    if enabled is None:
        return frozenset()
    switched_off = {owner for owner, _ in exclusive if owner not in enabled}
    holding: set[str] = set()
    for node_labels in every_node_labels:
        holding.update(owner for owner in switched_off if node_labels.get(owner) == _TRUE)
        if holding == switched_off:
            break
    return frozenset(holding)

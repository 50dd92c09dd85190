"""The labels the operator keeps on each node: `nvidia.com/gpu.present` and the deploy labels.

Decides, from one node's current labels, the label patch to make, or None when
nothing changes (so steady state costs no write).  The rules (DESIGN §2):

- A node is a GPU node when NFD's `feature.node.kubernetes.io/pci-10de.present`
  is "true".  It gets `nvidia.com/gpu.present=true` and, for every operand, a
  `nvidia.com/gpu.deploy.<operand>=true` unless the label is already there
  (an admin's "false" is kept: it is how an admin keeps one operand off a node).
- `nvidia.com/gpu.deploy.operands=false` opts the node out of every operand: no
  deploy label is added, and the ones we set ("true") are removed so the
  operand pods leave.
- A node that is no longer a GPU node loses `gpu.present` and the deploy labels
  we set; an admin's "false" stays.
- A CPU node (no NFD GPU label, none of our labels) is never touched.
- MIG (as NVIDIA's node labelling): a MIG-capable GPU node (planning/mig.is_mig_capable)
  also gets `nvidia.com/gpu.deploy.mig-manager=true`, and, with the MIG manager enabled,
  `nvidia.com/mig.config=<migManager.config.default>` when it has no config label.
- DRA (Dynamic Resource Allocation): while the DRA driver is enabled, every GPU node gets
  `nvidia.com/gpu.deploy.dra-driver=true` (an admin's "false" is kept: that node keeps the
  device plugin); once it is disabled, the "true" ones are removed.  On a node where it is
  "true" the DRA driver owns the GPUs: the device plugin's "true" is removed and not added
  again (an admin's "false" stays), so never both plugins on one node.  The switch waits for
  the pods using the node's GPUs (planning/operands/gpu_handover.py): the DRA label is added
  once no device-plugin GPU pod runs there, and removed once no pod holds a GPU claim there;
  those pods are never evicted or restarted for it.
- NB: a deploy label that is neither "true" nor "false" is left as it is: the MIG
  manager sets `paused-for-mig-change` while it repartitions a node and restores it.
- Workloads (planning/operands/workloads.py, NVIDIA's gpuStateLabels): a node gets the deploy
  labels of its workload's stack only.  Container: the labels above.  A VM workload: its
  stack's labels (`DeployLabels.vm`), and every label of the container stack and of the other
  VM stack that is not an admin's "false" is removed (NVIDIA removes those too), so a node
  never carries two stacks.  No workload (a bad workload label): the deploy labels stay as
  they are, nothing running there is taken away.

It never reads or writes a Node.  NB: the caller must not plan from a partial
or failed read: a node whose labels are missing would lose its deploy labels,
and its operand pods with them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Final

from ocp_gpu.model import labels
from ocp_gpu.planning.operands import gpu_handover, mig_planning
from ocp_gpu.planning.operands.workloads import Workload

# The value the operator writes; only labels with this value are ours to remove.
TRUE: Final = "true"
FALSE: Final = "false"

# Upgrade states with no upgrade under way (planning/upgrade.IDLE; "" is unknown).
# NB: a node opted out mid-upgrade keeps its label until the upgrade lifts its cordon.
_IDLE_STATES: Final = frozenset({"upgrade-done", "upgrade-required"})

# A label patch: key -> new value, or None to remove the label (JSON merge patch).
LabelPatch = dict[str, str | None]


@dataclasses.dataclass(frozen=True)
class DeployLabels:
    """The operands' deploy labels (nvidia.com/gpu.deploy.<name>) the operator sets, by which GPU
    nodes get them: rendering/operands/operand_catalog.DEPLOY_LABELS, from each operand's `deploy_on`."""

    every_gpu_node: tuple[str, ...]
    # The MIG manager's.
    mig_capable: tuple[str, ...] = ()
    # The DRA driver's: on every GPU node while its operand is enabled.
    while_enabled: tuple[str, ...] = ()
    # (owner, yielding): on a node where the owner's label is "true" the yielding one is not
    # set (the DRA driver's and the device plugin's).
    exclusive: tuple[tuple[str, str], ...] = ()
    # The deploy labels of each VM workload's stack (NVIDIA's gpuStateLabels for vm-passthrough
    # and vm-vgpu, of the operands ocp-gpu deploys); the other labels above are the container's.
    vm: Mapping[Workload, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def container_stack(self) -> tuple[str, ...]:
        """Every deploy label of the container stack."""
        return (*self.every_gpu_node, *self.mig_capable, *self.while_enabled)

    @property
    def vm_stacks(self) -> tuple[str, ...]:
        """Every deploy label of either VM stack, once each."""
        return tuple(dict.fromkeys(key for keys in self.vm.values() for key in keys))

    def stack(self, workload: Workload) -> tuple[str, ...]:
        """The deploy labels of `workload`'s stack."""
        return self.container_stack if workload is Workload.CONTAINER else self.vm.get(workload, ())


def is_gpu_node(node_labels: Mapping[str, str]) -> bool:
    """NFD found an NVIDIA PCI device on the node."""
    return node_labels.get(labels.NFD_NVIDIA_PCI) == TRUE


def plan_node_labels(
    node_labels: Mapping[str, str],
    deploy: DeployLabels,
    mig_config_default: str | None = None,
    enabled: Collection[str] | None = None,
    workload: Workload | None = Workload.CONTAINER,
    gpu_pods: gpu_handover.GpuPods | None = None,
) -> LabelPatch | None:
    """The label patch for one node, or None when its labels are already right.

    `deploy`: the operands' deploy labels (rendering/operands/operand_catalog.DEPLOY_LABELS).

    `mig_config_default`: migManager.config.default when the MIG manager is enabled
    (and the policy valid), else None.

    `enabled`: which of `deploy.while_enabled` belong to an enabled operand; None (no valid
    policy): those labels are left as they are.

    `workload`: the node's (workloads.select_workload); None: its deploy labels stay as they are.

    `gpu_pods`: the node's GPU pods, read for a node `handovers` names; None (not read): a
    handover there waits (gpu_handover.is_held).
    """
    patch: LabelPatch = {}
    ours = [
        key
        for key in (*deploy.every_gpu_node, *deploy.while_enabled, *deploy.vm_stacks)
        if node_labels.get(key) == TRUE
    ]
    for key in deploy.mig_capable:
        if node_labels.get(key) == TRUE and (labels.GPU_PRESENT in node_labels or is_gpu_node(node_labels)):
            # NB: ours only on a node we labelled (gpu.present): a CPU node is never touched.
            ours.append(key)
    if not is_gpu_node(node_labels):
        # Not (or no longer) a GPU node: take back what we set, nothing else.
        if labels.GPU_PRESENT in node_labels:
            patch[labels.GPU_PRESENT] = None
        patch.update(dict.fromkeys(ours))
        return patch or None
    if node_labels.get(labels.GPU_PRESENT) != TRUE:
        # A GPU node without (or with a wrong) gpu.present.
        patch[labels.GPU_PRESENT] = TRUE
    if node_labels.get(labels.GPU_DEPLOY_OPERANDS) == FALSE:
        # The admin opted the node out of every operand: remove the deploy labels we set.
        patch.update(dict.fromkeys(ours))
    elif workload is None:
        # A workload label we cannot follow: what runs there stays (workloads.select_workload).
        pass
    elif workload is not Workload.CONTAINER:
        patch.update(_vm_stack(node_labels, deploy, workload))
    else:
        patch.update(_take_back(node_labels, deploy.vm_stacks))
        # Add the missing deploy labels; keep whatever value an admin chose.
        patch.update({key: TRUE for key in deploy.every_gpu_node if key not in node_labels})
        if mig_planning.is_mig_capable(node_labels):
            # NB: never removed when the GPU stops looking MIG-capable (GFD's labels come and
            # go with its pod), as NVIDIA's: the MIG manager must not vanish mid-change.
            patch.update({key: TRUE for key in deploy.mig_capable if key not in node_labels})
        patch.update(mig_planning.plan_mig_config_label(node_labels, mig_config_default))
        patch.update(_while_enabled(node_labels, deploy, enabled))
        for owner, yielding in deploy.exclusive:
            if patch.get(owner, node_labels.get(owner)) == TRUE:
                # The owner (the DRA driver) has the node's GPUs: the other plugin goes, or never comes.
                if node_labels.get(yielding) == TRUE:
                    patch[yielding] = None
                elif patch.get(yielding) == TRUE:
                    del patch[yielding]
        held = [
            move for move in _handovers(node_labels, patch, deploy) if gpu_handover.is_held(move, gpu_pods)
        ]
        if held:
            # The pods using the node's GPUs through the old owner are not done: the new one waits.
            patch = gpu_handover.hold_handovers(patch, held, node_labels)
    # NB: the only rule that reads the upgrade state (reads_upgrade_state; planning/urgency).
    if reads_upgrade_state(node_labels) and node_labels.get(labels.UPGRADE_STATE) in _IDLE_STATES:
        # No driver here: an upgrade-done (or -required) label would lie; the upgrade
        # controller leaves such nodes alone (planning/upgrade.is_unmanaged).
        patch[labels.UPGRADE_STATE] = None
    return patch or None


def _take_back(node_labels: Mapping[str, str], keys: Collection[str]) -> LabelPatch:
    """Remove the labels of a stack the node no longer runs; an admin's "false" stays."""
    return {key: None for key in keys if key in node_labels and node_labels[key] != FALSE}


def _vm_stack(node_labels: Mapping[str, str], deploy: DeployLabels, workload: Workload) -> LabelPatch:
    """A VM workload's labels: its stack's added, every other stack's taken back."""
    wanted = deploy.stack(workload)
    others = [key for key in (*deploy.container_stack, *deploy.vm_stacks) if key not in wanted]
    patch = _take_back(node_labels, others)
    # Add the missing ones; keep whatever value an admin chose.
    patch.update({key: TRUE for key in wanted if key not in node_labels})
    return patch


def handovers(
    node_labels: Mapping[str, str],
    deploy: DeployLabels,
    enabled: Collection[str] | None,
    workload: Workload | None = Workload.CONTAINER,
) -> tuple[gpu_handover.Handover, ...]:
    """The owner changes (device plugin <-> DRA) `plan_node_labels` would make on this node if no
    pod held its GPUs: the nodes whose pods the caller must read first."""
    if not is_gpu_node(node_labels) or node_labels.get(labels.GPU_DEPLOY_OPERANDS) == FALSE:
        # Ours go at once there: nothing waits.
        return ()
    if workload is not Workload.CONTAINER:
        # A VM stack (or a workload we cannot follow): no device plugin, no DRA driver to hand over.
        return ()
    patch = plan_node_labels(node_labels, deploy, None, enabled, workload, gpu_pods=gpu_handover.IDLE) or {}
    return _handovers(node_labels, patch, deploy)


def _handovers(
    node_labels: Mapping[str, str], patch: Mapping[str, str | None], deploy: DeployLabels
) -> tuple[gpu_handover.Handover, ...]:
    return gpu_handover.handovers(node_labels, patch, deploy.exclusive)


def _while_enabled(
    node_labels: Mapping[str, str], deploy: DeployLabels, enabled: Collection[str] | None
) -> LabelPatch:
    """The labels of operands that take every GPU node while enabled (the DRA driver's)."""
    if enabled is None:
        # No valid policy: nothing is known of the switch; leave them.
        return {}
    patch: LabelPatch = {}
    for key in deploy.while_enabled:
        if key in enabled and key not in node_labels:
            # Enabled: the node gets it (an admin's "false" keeps the node out).
            patch[key] = TRUE
        elif key not in enabled and node_labels.get(key) == TRUE:
            # Switched off: the node goes back to the others.
            patch[key] = None
    return patch


def reads_upgrade_state(node_labels: Mapping[str, str]) -> bool:
    """Whether `plan_node_labels` reads this node's upgrade state label (an opted-out node's)."""
    return FALSE in (
        node_labels.get(labels.deploy_label("driver")),
        node_labels.get(labels.GPU_DEPLOY_OPERANDS),
    ) or labels.runs_vm_stack(node_labels)


def plan_upgrade_annotation(
    node_labels: Mapping[str, str], node_annotations: Mapping[str, str], auto_upgrade: bool | None
) -> LabelPatch | None:
    """The `nvidia.com/gpu-driver-upgrade-enabled` change for one node, or None.

    As NVIDIA's ClusterPolicy controller: set on every GPU node while
    `driver.upgradePolicy.autoUpgrade` is on (k8s-driver-manager then leaves eviction
    to the upgrade controller), removed when it is off.  `auto_upgrade` None: no valid
    policy with drivers enabled, so nothing changes.  Written in the same merge patch
    as the deploy labels: one write per node at start-up, not two.
    """
    if auto_upgrade is None or not is_gpu_node(node_labels):
        return None
    present = node_annotations.get(labels.UPGRADE_ENABLED_ANNOTATION) == TRUE
    if auto_upgrade and not present:
        return {labels.UPGRADE_ENABLED_ANNOTATION: TRUE}
    if not auto_upgrade and labels.UPGRADE_ENABLED_ANNOTATION in node_annotations:
        return {labels.UPGRADE_ENABLED_ANNOTATION: None}
    return None

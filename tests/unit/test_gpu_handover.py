"""We test these aspects of a node's GPUs changing hands between the device plugin and the DRA
driver (planning/operands/gpu_handover.py, through planning/operands/node_labels.py), no API:

- device plugin -> DRA: the device plugin's label goes at once; the DRA label waits while a
  Pending or Running pod on the node requests `nvidia.com/gpu*` / `nvidia.com/mig-*`, and comes
  once none does (finished pods do not count); claim-holding pods do not hold this way;
- DRA -> device plugin: the DRA label stays, and the device plugin's is not added, while a pod
  holds an allocated claim with a gpu.nvidia.com device (an unreadable claim, an adminAccess
  one, a terminating pod whatever its phase count, as NVIDIA's nodeHasDRAClaimPods); an
  unallocated or non-GPU claim does not hold; then both move in one patch;
- pods not read (None) hold either way; an admin's "false" on the DRA label, an opted-out node
  and a node no longer a GPU node are not held (ours go at once);
- `handovers` names exactly the nodes whose pods must be read: none in steady state;
- property: whatever the pods, never both plugins' labels "true", and a held node's plan is
  stable (planning it again with the same pods writes nothing);
- the DRA operand switched off stays deployed while a node still carries its "true" label.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.model import labels
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.model.upgrade_observations import PodRef, WorkloadPod
from ocp_gpu.planning.operands import gpu_handover, node_labels
from ocp_gpu.planning.operands.gpu_handover import Direction, GpuPods
from ocp_gpu.rendering.operands import operand_catalog

DEPLOY = operand_catalog.DEPLOY_LABELS
DRA = operand_catalog.DRA_DRIVER.deploy_label
PLUGIN = operand_catalog.DEVICE_PLUGIN.deploy_label
GPU = {labels.NFD_NVIDIA_PCI: "true", labels.GPU_PRESENT: "true"}
EVERY = {operand.deploy_label: "true" for operand in operand_catalog.EVERY_GPU_NODE}
ON = frozenset({DRA})
OFF: frozenset[str] = frozenset()
BUSY_PLUGIN = GpuPods(device_plugin=1)
BUSY_CLAIMS = GpuPods(claims=2)


def after(node: Mapping[str, str], enabled: frozenset[str] | None, pods: GpuPods | None) -> dict[str, str]:
    patch = node_labels.plan_node_labels(node, DEPLOY, None, enabled, gpu_pods=pods) or {}
    result = dict(node)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def owners(node: Mapping[str, str]) -> tuple[str | None, str | None]:
    return node.get(DRA), node.get(PLUGIN)


def test_to_dra_waits_for_the_device_plugin_pods() -> None:
    node = {**GPU, **EVERY}
    assert node_labels.handovers(node, DEPLOY, ON) == (
        gpu_handover.Handover(DRA, PLUGIN, Direction.TO_OWNER),
    )
    # Busy: the device plugin goes (no new nvidia.com/gpu pods), DRA does not come yet.
    held = after(node, ON, BUSY_PLUGIN)
    assert owners(held) == (None, None)
    # Planned again while still busy: nothing to write, still a handover to read pods for.
    assert node_labels.plan_node_labels(held, DEPLOY, None, ON, gpu_pods=BUSY_PLUGIN) is None
    assert node_labels.handovers(held, DEPLOY, ON)
    # Claim pods do not hold the way in.
    assert owners(after(node, ON, BUSY_CLAIMS)) == ("true", None)
    # Done: DRA takes the node; then steady, no pods to read.
    done = after(held, ON, gpu_handover.IDLE)
    assert owners(done) == ("true", None)
    assert node_labels.handovers(done, DEPLOY, ON) == ()


def test_back_to_the_device_plugin_waits_for_the_claims() -> None:
    node = {**GPU, **{k: v for k, v in EVERY.items() if k != PLUGIN}, DRA: "true"}
    assert node_labels.handovers(node, DEPLOY, OFF) == (
        gpu_handover.Handover(DRA, PLUGIN, Direction.FROM_OWNER),
    )
    # Busy: the kubelet plugin stays, the device plugin waits.
    assert node_labels.plan_node_labels(node, DEPLOY, None, OFF, gpu_pods=BUSY_CLAIMS) is None
    # Device-plugin pods (there from before the switch) do not hold the way back.
    assert owners(after(node, OFF, BUSY_PLUGIN)) == (None, "true")
    # Done: both move in one patch.
    assert node_labels.plan_node_labels(node, DEPLOY, None, OFF, gpu_pods=gpu_handover.IDLE) == {
        DRA: None,
        PLUGIN: "true",
    }


@pytest.mark.parametrize("enabled", [ON, OFF])
def test_unread_pods_hold_either_way(enabled: frozenset[str]) -> None:
    dra_node = {**GPU, **{k: v for k, v in EVERY.items() if k != PLUGIN}, DRA: "true"}
    node = {**GPU, **EVERY} if enabled else dra_node
    # The device plugin's label may go (the way in); the DRA label neither comes nor goes.
    assert node_labels.plan_node_labels(node, DEPLOY, None, enabled, gpu_pods=None) in (None, {PLUGIN: None})


@pytest.mark.parametrize(
    ("node", "enabled", "expected"),
    [
        # the admin turns DRA off on this node: at once
        ({**GPU, DRA: "false"}, ON, ("false", "true")),
        # an opted-out node loses ours at once
        ({**GPU, DRA: "true", labels.GPU_DEPLOY_OPERANDS: "false"}, OFF, (None, None)),
        # no longer a GPU node
        ({labels.GPU_PRESENT: "true", DRA: "true"}, OFF, (None, None)),
        # no valid policy: nothing moves, nothing to read
        ({**GPU, **EVERY}, None, (None, "true")),
    ],
)
def test_what_is_not_held(
    node: dict[str, str], enabled: frozenset[str] | None, expected: tuple[str | None, str | None]
) -> None:
    assert node_labels.handovers(node, DEPLOY, enabled) == ()
    assert owners(after(node, enabled, BUSY_CLAIMS if DRA in node else BUSY_PLUGIN)) == expected


def pod(
    phase: str = "Running", *, requests_gpu: bool = False, claims: tuple[str, ...] = (), name: str = "p"
) -> WorkloadPod:
    return WorkloadPod(
        ref=PodRef(namespace="work", name=name),
        node=NodeName("n1"),
        phase=phase,
        requests_gpu=requests_gpu,
        claims=claims,
    )


def test_counting_a_nodes_gpu_pods() -> None:
    held = {
        "work/gpu": ClaimHold.GPU,
        "work/nic": ClaimHold.OTHER,
        "work/later": ClaimHold.UNALLOCATED,
        "work/view": ClaimHold.GPU_ADMIN_ACCESS,
    }
    pods = [
        # a monitoring pod with an adminAccess view: the kubelet plugin still unprepares it
        pod(claims=("view",), name="monitor"),
        # terminating after it finished: its claims are not unprepared yet
        dataclasses.replace(pod("Succeeded", claims=("gpu",), name="leaving"), terminating=True),
        pod(requests_gpu=True, name="a"),
        pod("Pending", requests_gpu=True, name="b"),
        pod("Succeeded", requests_gpu=True, name="done"),
        pod(claims=("gpu",), name="c"),
        pod("Failed", claims=("gpu",), name="failed"),
        pod(claims=("nic", "later"), name="d"),
        pod(claims=("unknown",), name="e"),
        pod(name="cpu"),
    ]
    # An unreadable claim ("unknown") counts as a GPU, as for the driver upgrade.
    assert gpu_handover.gpu_pods(pods, held) == GpuPods(device_plugin=2, claims=4)
    # Claims not watched (resource.k8s.io not served): every claim counts.
    assert gpu_handover.gpu_pods(pods, None) == GpuPods(device_plugin=2, claims=5)
    assert gpu_handover.gpu_pods([], held) == gpu_handover.IDLE


_VALUES = st.sampled_from([None, "true", "false"])
_PODS = st.one_of(st.none(), st.builds(GpuPods, st.integers(0, 2), st.integers(0, 2)))


@given(dra=_VALUES, plugin=_VALUES, enabled=st.sampled_from([ON, OFF]), pods=_PODS)
def test_never_both_and_stable_while_held(
    dra: str | None, plugin: str | None, enabled: frozenset[str], pods: GpuPods | None
) -> None:
    node = {**GPU, **({DRA: dra} if dra else {}), **({PLUGIN: plugin} if plugin else {})}
    labelled = after(node, enabled, pods)
    assert not (labelled.get(DRA) == "true" and labelled.get(PLUGIN) == "true")
    assert node_labels.plan_node_labels(labelled, DEPLOY, None, enabled, gpu_pods=pods) is None


def test_a_switched_off_dra_driver_stays_while_a_node_holds_its_label() -> None:
    exclusive = DEPLOY.exclusive
    waiting = {**GPU, DRA: "true"}
    moved = {**GPU, PLUGIN: "true"}
    assert gpu_handover.owners_still_holding(exclusive, OFF, [moved, waiting]) == {DRA}
    # The last one moved: the operand goes.
    assert gpu_handover.owners_still_holding(exclusive, OFF, [moved, {**GPU, DRA: "false"}]) == set()
    # Enabled, or no valid policy: nothing to keep.
    assert gpu_handover.owners_still_holding(exclusive, ON, [waiting]) == set()
    assert gpu_handover.owners_still_holding(exclusive, None, [waiting]) == set()

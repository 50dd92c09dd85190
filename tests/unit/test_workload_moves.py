"""We test these aspects of a node's move between stacks (planning/operands/workload_moves.py):

- no GPU pod on a container node labelled vm-passthrough: it moves at once;
- a running GPU pod there and no drain: it holds (its deploy labels stay), naming the pod and the
  fix; pods that use no GPU never hold a move;
- with drain.enable: the node is cordoned (recorded as ours) and the drainable GPU pods evicted;
  a pod the drain may not evict (no controller without drain.force) is named with the fix;
  evicted pods still terminating hold the move; once none is left the node moves and our cordon
  is lifted; an admin's cordon is never taken as ours;
- no move (or back to containers, or a bad label): never held, a cordon of ours lifted;
- hypothesis: a held node's workload is None, and a node never gets a VM stack while a GPU pod
  runs there.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import Drain, GpuWorkload, UpgradePolicy
from ocp_gpu.model.upgrade_observations import PodRef, WorkloadPod
from ocp_gpu.planning.operands import workload_moves

C, P = GpuWorkload.CONTAINER, GpuWorkload.VM_PASSTHROUGH
NO_DRAIN = UpgradePolicy()
DRAIN = UpgradePolicy(drain=Drain(enable=True))


def pod(name: str, gpu: bool = True, **kwargs: object) -> WorkloadPod:
    defaults: dict[str, object] = {"controller_kind": "ReplicaSet"}
    return WorkloadPod(
        ref=PodRef(namespace="team", name=name),
        node=NodeName("n1"),
        requests_gpu=gpu,
        **{**defaults, **kwargs},
    )  # type: ignore[arg-type]


def plan(
    chosen: GpuWorkload | None,
    current: GpuWorkload,
    pods: list[WorkloadPod],
    policy: UpgradePolicy,
    unschedulable: bool = False,
    ours: bool = False,
) -> workload_moves.MoveStep:
    return workload_moves.plan_move(
        "n1", chosen, current, pods, policy, unschedulable=unschedulable, cordoned_for_move=ours
    )


def test_no_gpu_pod_moves_at_once() -> None:
    assert plan(P, C, [pod("web", gpu=False)], NO_DRAIN) == workload_moves.MoveStep(P)


def test_a_running_gpu_pod_holds_the_move_without_drain() -> None:
    step = plan(P, C, [pod("train"), pod("web", gpu=False)], NO_DRAIN)
    assert step.workload is None and not step.cordon and not step.evict
    assert step.waiting is not None and "team/train" in step.waiting and "web" not in step.waiting
    assert "drain.enable=true" in step.fix


def test_drain_cordons_and_evicts_then_moves_and_uncordons() -> None:
    step = plan(P, C, [pod("train")], DRAIN)
    assert (step.workload, step.cordon, [p.ref.name for p in step.evict]) == (None, True, ["train"])
    assert step.waiting is None
    # Cordoned by us, the pod terminating: hold, nothing more to do.
    assert plan(P, C, [pod("train", terminating=True)], DRAIN, unschedulable=True, ours=True) == (
        workload_moves.MoveStep(None)
    )
    # Gone: move and lift our cordon.
    assert plan(P, C, [], DRAIN, unschedulable=True, ours=True) == workload_moves.MoveStep(P, uncordon=True)


def test_an_admins_cordon_is_not_taken_as_ours() -> None:
    step = plan(P, C, [pod("train")], DRAIN, unschedulable=True)
    assert not step.cordon and step.evict
    assert plan(P, C, [], DRAIN, unschedulable=True) == workload_moves.MoveStep(P)


def test_a_pod_the_drain_may_not_evict_is_named() -> None:
    step = plan(P, C, [pod("bare", controller_kind=None), pod("train")], DRAIN)
    assert [p.ref.name for p in step.evict] == ["train"]
    assert step.waiting is not None and "team/bare has no controller" in step.waiting
    assert "drain.force" in step.fix


def test_no_move_is_never_held() -> None:
    assert plan(C, C, [pod("train")], NO_DRAIN) == workload_moves.MoveStep(C)
    assert plan(C, P, [pod("vm")], NO_DRAIN) == workload_moves.MoveStep(C)
    assert plan(None, C, [pod("train")], NO_DRAIN, ours=True) == workload_moves.MoveStep(None, uncordon=True)


@given(
    st.sampled_from([C, P, GpuWorkload.VM_VGPU, None]),
    st.sampled_from([C, P]),
    st.lists(st.tuples(st.booleans(), st.booleans(), st.sampled_from(["Running", "Pending", "Succeeded"]))),
    st.booleans(),
)
def test_never_a_vm_stack_under_a_running_gpu_pod(
    chosen: GpuWorkload | None, current: GpuWorkload, found: list[tuple[bool, bool, str]], drain: bool
) -> None:
    pods = [
        pod(f"p{i}", gpu=gpu, terminating=gone, phase=phase) for i, (gpu, gone, phase) in enumerate(found)
    ]
    step = plan(chosen, current, pods, DRAIN if drain else NO_DRAIN)
    busy = any(p.requests_gpu and p.active for p in pods)
    if current is C and step.workload not in (None, C):
        assert not busy
    if not drain:
        assert not step.cordon and not step.evict

"""We test these aspects of a node's move between stacks (planning/operands/workload_moves.py):

- no GPU pod on a container node labelled vm-passthrough: it moves at once;
- a running GPU pod there and no drain: it holds (its deploy labels stay), naming the pod and the
  fix; pods that use no GPU never hold a move;
- with drain.enable: the node is cordoned (recorded as ours), the drain timer started, and the
  drainable GPU pods evicted; a pod the drain may not evict (no controller without drain.force) is
  named with the fix; evicted pods still terminating hold the move; once none is left the node
  moves, our cordon is lifted and the timer cleared; an admin's cordon is never taken as ours;
- drain.podSelector: only the holding pods it selects are evicted; one it leaves out (or labelled
  drain.skip) is waited for, named with the fix, and runs no timer;
- drain.timeoutSeconds: a drain that outlasts it fails as the upgrade's drain (no more evictions,
  the cordon stays, an error naming the pods and the ways out); 0 never times out; once the pods
  are gone the failed move completes and the cordon is lifted;
- back from a VM stack (to container, or to the other VM stack): a virt-launcher holding a VM
  resource holds it exactly as a GPU pod holds a move off the container stack (wait, or drain with
  Events-worthy steps); container GPU pods never hold it, VM pods never hold a move off containers;
- no move (or a bad label): never held, a cordon of ours lifted, a timer of ours cleared;
- hypothesis: a held node's workload is None; a node never leaves a stack while a pod holding its
  GPUs runs there; nothing is evicted without drain.enable, nor a pod the selector leaves out, nor
  after the timeout.
"""

from __future__ import annotations

import datetime

from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import Drain, GpuWorkload, PodSelector, UpgradePolicy
from ocp_gpu.model.upgrade_observations import PodRef, WorkloadPod
from ocp_gpu.planning.operands import workload_moves

C, P, V = GpuWorkload.CONTAINER, GpuWorkload.VM_PASSTHROUGH, GpuWorkload.VM_VGPU
NO_DRAIN = UpgradePolicy()
DRAIN = UpgradePolicy(drain=Drain(enable=True))
NOW = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)


def vm_pod(name: str, **kwargs: object) -> WorkloadPod:
    """KubeVirt's virt-launcher of a VM with a passed-through GPU (nvidia.com/GA102GL_A10)."""
    return pod(name, gpu=False, requests_vm_gpu=True, **kwargs)


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
    started: datetime.datetime | None = None,
) -> workload_moves.MoveStep:
    return workload_moves.plan_move(
        "n1",
        chosen,
        current,
        pods,
        policy,
        unschedulable=unschedulable,
        cordoned_for_move=ours,
        drain_started=started,
        now=NOW,
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
    assert step.start_drain_timer and step.waiting is None
    # Cordoned by us, the pod terminating: hold, nothing more to do.
    started = NOW - datetime.timedelta(seconds=10)
    assert plan(
        P, C, [pod("train", terminating=True)], DRAIN, unschedulable=True, ours=True, started=started
    ) == (workload_moves.MoveStep(None))
    # Gone: move, lift our cordon and clear the timer.
    assert plan(P, C, [], DRAIN, unschedulable=True, ours=True, started=started) == workload_moves.MoveStep(
        P, uncordon=True, clear_drain_timer=True
    )


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
    # Called off (labelled back) after a drain started: our cordon lifted, the timer cleared.
    assert plan(C, C, [pod("train")], DRAIN, unschedulable=True, ours=True, started=NOW) == (
        workload_moves.MoveStep(C, uncordon=True, clear_drain_timer=True)
    )


def test_a_move_back_waits_for_the_vms() -> None:
    launcher = vm_pod("virt-launcher-vm1")
    for target in (C, V):
        step = plan(target, P, [launcher, pod("stray-container-pod")], NO_DRAIN)
        assert step.workload is None and not step.evict and not step.cordon
        assert step.waiting is not None and "team/virt-launcher-vm1" in step.waiting, step.waiting
        assert "stray" not in step.waiting and "VMs" in step.waiting
    # Container GPU pods never hold a move back; VM pods never hold a move off containers.
    assert plan(C, P, [pod("train")], NO_DRAIN) == workload_moves.MoveStep(C)
    assert plan(P, C, [vm_pod("odd")], NO_DRAIN) == workload_moves.MoveStep(P)
    # Drained: cordon, evict the launcher, then back to containers once it is gone.
    step = plan(C, P, [launcher], DRAIN)
    assert step.cordon and step.evict == (launcher,) and step.start_drain_timer
    assert plan(C, P, [], DRAIN, unschedulable=True, ours=True, started=NOW) == workload_moves.MoveStep(
        C, uncordon=True, clear_drain_timer=True
    )


def test_the_drain_selector_limits_what_is_evicted() -> None:
    policy = UpgradePolicy(drain=Drain(enable=True, pod_selector=PodSelector("app=train")))
    train, web = pod("train", labels={"app": "train"}), pod("serve", labels={"app": "serve"})
    step = plan(P, C, [train, web], policy)
    assert step.evict == (train,) and step.cordon
    assert step.waiting is not None and "team/serve" in step.waiting and "podSelector" in step.waiting
    assert "widen" in step.fix
    # Only left-out pods: waited for, nothing evicted, no timer (nothing for the drain to do).
    step = plan(P, C, [web], policy, unschedulable=True, ours=True, started=NOW)
    assert (step.workload, step.evict, step.start_drain_timer, step.clear_drain_timer) == (
        None,
        (),
        False,
        True,
    )
    assert step.waiting is not None and "team/serve" in step.waiting and not step.failed
    # NVIDIA's opt-out label is honoured as in the upgrade's drain.
    skipped = pod("keep", labels={"nvidia.com/gpu-driver-upgrade-drain.skip": "true"})
    assert plan(P, C, [skipped], DRAIN).evict == ()


def test_a_drain_that_outlasts_its_timeout_fails_as_the_upgrades() -> None:
    policy = UpgradePolicy(drain=Drain(enable=True, timeout_seconds=60))
    before = NOW - datetime.timedelta(seconds=30)
    step = plan(P, C, [pod("train")], policy, unschedulable=True, ours=True, started=before)
    assert step.evict and not step.failed and not step.start_drain_timer
    assert step.waiting is None
    late = NOW - datetime.timedelta(seconds=61)
    step = plan(P, C, [pod("train")], policy, unschedulable=True, ours=True, started=late)
    # No more evictions, the cordon stays (no uncordon), the timer stays, an error with the ways out.
    assert (step.workload, step.evict, step.uncordon, step.clear_drain_timer) == (None, (), False, False)
    assert step.failed and step.waiting is not None and "team/train" in step.waiting
    assert "drain.timeoutSeconds (60s)" in step.waiting
    assert workload_moves.MOVE_DRAIN_START in step.fix and "container" in step.fix
    # Still failed while the pod terminates; done once it is gone.
    assert plan(P, C, [pod("train", terminating=True)], policy, True, True, late).failed
    assert plan(P, C, [], policy, True, True, late) == workload_moves.MoveStep(
        P, uncordon=True, clear_drain_timer=True
    )
    # 0: no timeout.
    forever = UpgradePolicy(drain=Drain(enable=True, timeout_seconds=0))
    long_ago = NOW - datetime.timedelta(days=3)
    assert not plan(P, C, [pod("train")], forever, True, True, long_ago).failed


@given(
    st.sampled_from([C, P, V, None]),
    st.sampled_from([C, P]),
    st.lists(
        st.tuples(
            st.sampled_from(["gpu", "vm", "none"]),
            st.booleans(),
            st.sampled_from(["Running", "Pending", "Succeeded"]),
            st.booleans(),
        )
    ),
    st.booleans(),
    st.sampled_from(["", "app=train"]),
    st.sampled_from([None, 10, 1000]),
)
def test_never_leaves_a_stack_under_a_pod_holding_its_gpus(
    chosen: GpuWorkload | None,
    current: GpuWorkload,
    found: list[tuple[str, bool, str, bool]],
    drain: bool,
    selector: str,
    started_ago: int | None,
) -> None:
    pods = [
        pod(
            f"p{i}",
            gpu=kind == "gpu",
            requests_vm_gpu=kind == "vm",
            terminating=gone,
            phase=phase,
            labels={"app": "train" if train else "serve"},
        )
        for i, (kind, gone, phase, train) in enumerate(found)
    ]
    policy = UpgradePolicy(drain=Drain(enable=drain, pod_selector=PodSelector(selector), timeout_seconds=300))
    started = None if started_ago is None else NOW - datetime.timedelta(seconds=started_ago)
    step = plan(chosen, current, pods, policy, started=started)
    holding = workload_moves.holding_pods(pods, current)
    if step.workload is not None and step.workload is not current:
        assert not holding
    if chosen is None or chosen is current:
        assert step.workload is chosen and not step.evict and step.waiting is None
    if not drain:
        assert not step.cordon and not step.evict
    if selector:
        assert all(p.labels["app"] == "train" for p in step.evict)
    assert all(p in holding and not p.terminating for p in step.evict)
    if started_ago == 1000:
        # Past drain.timeoutSeconds: nothing more is evicted.
        assert not step.evict
    assert not (step.start_drain_timer and step.clear_drain_timer)

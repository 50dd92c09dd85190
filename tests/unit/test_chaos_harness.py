"""We test these aspects of the chaos harness without a server: the fault plan is
reproducible, complete and inside its window; the invariant monitor flags each broken
invariant from the watch events it is fed (so a chaos test that passes could have failed).
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import ApiClient

from ocp_gpu.model import labels
from ocp_gpu_harness import chaos


def test_fault_plan_is_reproducible_complete_and_in_its_window() -> None:
    config = chaos.ChaosConfig(
        operator_kills=50, apiserver_restarts=5, compactions=2, fault_window_s=300, seed=7
    )
    plan = chaos.plan_faults(config)
    assert plan == chaos.plan_faults(config)
    assert plan != chaos.plan_faults(chaos.ChaosConfig(operator_kills=50, fault_window_s=300, seed=8))
    assert [at for at, _ in plan] == sorted(at for at, _ in plan)
    assert all(3.0 <= at <= 300 for at, _ in plan)
    kinds = [kind for _, kind in plan]
    assert kinds.count(chaos.KILL_OPERATOR) == 50
    assert kinds.count(chaos.RESTART_APISERVER) == 5
    assert kinds.count(chaos.COMPACT_ETCD) == 2
    leader = chaos.plan_faults(chaos.ChaosConfig(operator_kills=3, kill_leader=True))
    assert [kind for _, kind in leader] == [chaos.KILL_LEADER] * 3


def node(name: str, state: str, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {labels.UPGRADE_STATE: state}},
        "spec": {"unschedulable": unschedulable},
    }


def pod(uid: str, node_name: str) -> dict[str, Any]:
    return {"metadata": {"name": f"driver-{uid}", "uid": uid}, "spec": {"nodeName": node_name}}


def daemonset(name: str, rhcos: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"nodeSelector": {labels.OSTREE_VERSION: rhcos}}}},
    }


def monitor(budget: int = 2, admin: tuple[str, ...] = ("n0",)) -> chaos.InvariantMonitor:
    # Never started: events are fed by hand.
    return chaos.InvariantMonitor(ApiClient(), budget, admin, t0=0.0)


def test_monitor_flags_two_driver_pods_on_a_node_until_one_is_deleted() -> None:
    m = monitor()
    m._record("pods", "ADDED", pod("a", "n1"))
    m._record("pods", "ADDED", pod("b", "n2"))
    assert m.violation_counts[chaos.TWO_DRIVER_PODS] == 0
    m._record("pods", "ADDED", pod("c", "n1"))
    assert m.violation_counts[chaos.TWO_DRIVER_PODS] == 1
    assert m.max_driver_pods_on_a_node == 2
    m._record("pods", "DELETED", pod("a", "n1"))
    m._record("pods", "MODIFIED", pod("c", "n1"))
    assert m.violation_counts[chaos.TWO_DRIVER_PODS] == 1


def test_monitor_flags_in_flight_above_the_budget() -> None:
    m = monitor(budget=2)
    for name in ("n1", "n2"):
        m._record("nodes", "MODIFIED", node(name, "cordon-required"))
    m._record("nodes", "MODIFIED", node("n3", "upgrade-required"))
    assert m.violation_counts[chaos.OVER_BUDGET] == 0
    m._record("nodes", "MODIFIED", node("n3", "pod-restart-required"))
    assert m.violation_counts[chaos.OVER_BUDGET] == 1
    assert m.max_in_flight == 3


def test_monitor_flags_an_admin_cordon_lifted_and_nothing_else() -> None:
    m = monitor(admin=("n0",))
    m._record("nodes", "MODIFIED", node("n0", "upgrade-done", unschedulable=True))
    m._record("nodes", "MODIFIED", node("n1", "upgrade-done", unschedulable=False))
    assert m.violation_counts[chaos.ADMIN_CORDON_LIFTED] == 0
    m._record("nodes", "MODIFIED", node("n0", "upgrade-done", unschedulable=False))
    assert m.violation_counts[chaos.ADMIN_CORDON_LIFTED] == 1


def test_monitor_flags_two_daemonsets_for_the_same_nodes() -> None:
    m = monitor()
    m._record("daemonsets", "ADDED", daemonset("ds-old", "416"))
    m._record("daemonsets", "ADDED", daemonset("ds-new", "417"))
    assert m.violation_counts[chaos.DUPLICATE_DAEMONSET] == 0
    m._record("daemonsets", "ADDED", daemonset("ds-copy", "416"))
    assert m.violation_counts[chaos.DUPLICATE_DAEMONSET] == 1
    report = m.report()
    assert report["violations"][chaos.DUPLICATE_DAEMONSET] == 1
    assert "ds-copy" in report["examples"][chaos.DUPLICATE_DAEMONSET][0]["detail"]

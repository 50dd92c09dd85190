"""We test these aspects of OLM's Upgradeable as the operator decides it (planning/upgrade_gate):

- True when every GPU node is upgrade-done (or not yet labelled) and no driver pod is outdated;
- False, DriverUpgradeInProgress, while a node is between upgrade-required and uncordon-required
  or a driver DaemonSet has outdated pods, naming them;
- False, DriverUpgradeFailed, while a node is upgrade-failed (before any in-flight reason);
- CPU nodes and nodes opted out of the driver never count;
- the conditions list keeps others' conditions and the transition time while the status holds.
"""

from __future__ import annotations

import pytest

from ocp_gpu.kube import upgrade_gating
from ocp_gpu.model import labels
from ocp_gpu.model.upgrade_observations import UpgradeState
from ocp_gpu.planning.upgrades import upgrade_gate
from ocp_gpu.planning.upgrades.upgrade_table import IN_PROGRESS

GPU = {labels.NFD_NVIDIA_PCI: "true"}


def gpu(state: str | None = None, **extra: str) -> dict[str, str]:
    node = dict(GPU, **extra)
    if state is not None:
        node[labels.UPGRADE_STATE] = state
    return node


def test_settled_drivers_let_openshift_upgrade() -> None:
    gate = upgrade_gate.plan_upgradeable(
        {"a": gpu(UpgradeState.UPGRADE_DONE), "b": gpu()},
        [upgrade_gate.OutdatedDaemonSet("nvidia-driver-daemonset-9.6.20250909-0", 2, 2)],
    )
    assert gate.status == "True"
    assert gate.reason is upgrade_gate.GateReason.DRIVERS_SETTLED


@pytest.mark.parametrize("state", sorted([*IN_PROGRESS, UpgradeState.UPGRADE_REQUIRED]))
def test_a_node_mid_upgrade_blocks_openshift_upgrades(state: str) -> None:
    gate = upgrade_gate.plan_upgradeable({"a": gpu(UpgradeState.UPGRADE_DONE), "b": gpu(state)}, [])
    assert gate.status == "False"
    assert gate.reason is upgrade_gate.GateReason.DRIVER_UPGRADE_IN_PROGRESS
    assert "1 node(s) (b)" in gate.message


def test_outdated_driver_pods_block_before_any_node_is_labelled() -> None:
    gate = upgrade_gate.plan_upgradeable(
        {"a": gpu(UpgradeState.UPGRADE_DONE)},
        [upgrade_gate.OutdatedDaemonSet("nvidia-driver-daemonset-9.6.20250909-0", 3, 1)],
    )
    assert gate.status == "False"
    assert gate.reason is upgrade_gate.GateReason.DRIVER_UPGRADE_IN_PROGRESS
    assert "nvidia-driver-daemonset-9.6.20250909-0 (2 of 3 pods outdated)" in gate.message


def test_a_failed_node_blocks_and_says_how_to_retry() -> None:
    gate = upgrade_gate.plan_upgradeable(
        {"a": gpu(UpgradeState.UPGRADE_FAILED), "b": gpu(UpgradeState.POD_RESTART_REQUIRED)}, []
    )
    assert gate.status == "False"
    assert gate.reason is upgrade_gate.GateReason.DRIVER_UPGRADE_FAILED
    assert "(a)" in gate.message and f"{labels.UPGRADE_STATE}=upgrade-required" in gate.message


def test_cpu_nodes_and_opted_out_nodes_never_count() -> None:
    gate = upgrade_gate.plan_upgradeable(
        {
            "cpu": {labels.UPGRADE_STATE: UpgradeState.UPGRADE_FAILED},
            "out": gpu(UpgradeState.UPGRADE_FAILED, **{labels.deploy_label("driver"): "false"}),
        },
        [],
    )
    assert gate.status == "True"


def test_many_nodes_are_counted_not_all_named() -> None:
    nodes = {f"n{i:02}": gpu(UpgradeState.CORDON_REQUIRED) for i in range(12)}
    gate = upgrade_gate.plan_upgradeable(nodes, [])
    assert "12 node(s) (n00, n01, n02, n03, n04 and 7 more)" in gate.message


def test_the_nodes_are_named_in_order_whatever_order_the_view_has() -> None:
    nodes = {f"n{i:02}": gpu(UpgradeState.CORDON_REQUIRED) for i in reversed(range(12))}
    nodes |= {"z-failed": gpu(UpgradeState.UPGRADE_FAILED), "a-failed": gpu(UpgradeState.UPGRADE_FAILED)}
    assert "(a-failed, z-failed)" in upgrade_gate.plan_upgradeable(nodes, []).message
    del nodes["a-failed"], nodes["z-failed"]
    assert (
        "12 node(s) (n00, n01, n02, n03, n04 and 7 more)" in upgrade_gate.plan_upgradeable(nodes, []).message
    )


def test_the_conditions_keep_others_and_the_transition_time_while_the_status_holds() -> None:
    settled = upgrade_gate.plan_upgradeable({}, [])
    busy = upgrade_gate.plan_upgradeable({"a": gpu(UpgradeState.CORDON_REQUIRED)}, [])
    other = {
        "type": "SomethingElse",
        "status": "True",
        "reason": "X",
        "message": "m",
        "lastTransitionTime": "t0",
    }
    first = upgrade_gate.with_condition([other], busy, "t1")
    assert first[0] == other and first[1]["status"] == "False" and first[1]["lastTransitionTime"] == "t1"
    assert upgrade_gate.is_written(first, busy) and not upgrade_gate.is_written(first, settled)
    # the same status with another message: written again, the transition time kept
    busier = upgrade_gate.plan_upgradeable(
        {"a": gpu(UpgradeState.CORDON_REQUIRED), "b": gpu("upgrade-required")}, []
    )
    second = upgrade_gate.with_condition(first, busier, "t2")
    assert second[1]["lastTransitionTime"] == "t1" and second[1]["message"] == busier.message
    third = upgrade_gate.with_condition(second, settled, "t3")
    assert third[1] == settled.as_condition("t3")
    assert not upgrade_gate.is_written([], settled)


def test_a_gate_olm_never_named_goes_idle_once_the_log_said_why() -> None:
    settled = upgrade_gate.plan_upgradeable({}, [])
    off = upgrade_gating.UpgradeGate(None, "ns", {})  # type: ignore[arg-type]
    assert not off.enabled and not off.idle  # the first wake-up still plans, and the log says why
    off.update(settled)
    assert off.idle
    named = upgrade_gating.UpgradeGate(None, "ns", {upgrade_gating.CONDITION_NAME_ENV: "ocp-gpu.v1"})  # type: ignore[arg-type]
    assert named.enabled and not named.idle

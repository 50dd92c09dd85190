"""We test these aspects of the operator under faults, on a control plane of its own per test
(the faults would disturb the shared one), with the scenario of `ocp_gpu_harness.chaos`
(the short version of bench/chaos_upgrade.py and bench/chaos_apiserver.py): a driver
upgrade (maxParallelUpgrades 10) of 20 GPU nodes while the MCO simulation moves the same
pool to a new RHCOS, two nodes cordoned by an admin beforehand, and

- the operator SIGKILLed 5 times at random moments (and restarted, as a kubelet would);
- kube-apiserver SIGKILLed and restarted once, and etcd compacted (with an apiserver
  restart, so that every watch resuming from before gets 410 Gone) once;
- two replicas, the leader SIGKILLed 3 times (a standby takes over through the Lease);
- upgrade day in short (bench/upgrade_day.py): 12 nodes in three MachineConfigPools rolled side by
  side (maxUnavailable 1, 2, 3) during an OpenShift upgrade (ClusterVersion applying a new release,
  its DTK tag appearing), 3 operator SIGKILLs (restarted in the same pod) and an apiserver restart;
  at the end the rest of the stack is rolled out and Ready too and the ClusterPolicy `ready` without
  UpgradePreflight.

In each, the invariants hold at every watch event (never two driver pods on a node, in
flight never above the budget, no admin cordon lifted, no duplicate DaemonSet), every second (no
node in one upgrade state longer than its timeout) and at the
end (every node upgrade-done on a current Ready driver pod, no node left cordoned but the
admin's, one DaemonSet per RHCOS owned by the policy, no operand object missing), and the
operator never exits on its own but for a Lease it could not renew (apiserver down, or
the machine too busy), which it does on purpose.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest

from ocp_gpu_harness import binaries, chaos
from ocp_gpu_harness.cluster import LocalControlPlane

# NB: above pytest's 300 s default: each test starts a control plane of its own (at most
# cluster.START_TIMEOUT_S, 600 s), sets up 20 nodes (bounded at 660 s by the harness), runs the
# scenario (SHORT.timeout_s) and lets it settle (at most 132 s); each phase has its own bound,
# this is the last resort.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1920)]

SHORT = chaos.ChaosConfig(nodes=20, max_parallel=10, admin_cordoned=2, timeout_s=300)


@pytest.fixture
def own_control_plane(control_plane: LocalControlPlane) -> Iterator[LocalControlPlane]:
    """A control plane for this test alone (``control_plane`` is requested only so the
    session's skip and build logic applies)."""
    with LocalControlPlane(
        binaries=binaries.ensure_binaries(), node_lease_seconds=chaos.NODE_LEASE_SECONDS
    ) as plane:
        yield plane


def check(result: chaos.ChaosResult) -> None:
    report = json.dumps(dataclasses.asdict(result), indent=1, default=str)
    print(report)  # shown when the test fails
    assert len(result.faults_fired) == result.faults_planned, result.notes
    assert result.monitor["violations"] == dict.fromkeys(chaos.CONTINUOUS, 0), result.monitor["examples"]
    assert result.final_problems == []
    assert result.completed
    assert result.operator_crashes == []
    assert result.monitor["max_in_flight"] <= SHORT.max_parallel
    assert result.monitor["max_driver_pods_on_a_node"] == 1


def test_operator_killed_during_upgrade_and_rhcos_migration(own_control_plane: LocalControlPlane) -> None:
    config = dataclasses.replace(SHORT, operator_kills=5, fault_window_s=30)
    result = chaos.run_chaos(own_control_plane, config)
    check(result)
    # Every kill found the (restarted) operator leading: kills wait for it (harness/chaos.py).
    assert result.kills_on_leader == config.operator_kills, result.faults_fired
    # Every exit but our kills is a Lease not renewed in time (a loaded machine), never a crash.
    assert len(result.operator_exits_not_ours) == result.operator_lease_losses
    assert result.operator_starts == 1 + 5 + result.operator_lease_losses


def test_apiserver_restart_and_watch_expiry(own_control_plane: LocalControlPlane) -> None:
    config = dataclasses.replace(SHORT, apiserver_restarts=1, compactions=1, fault_window_s=20)
    result = chaos.run_chaos(own_control_plane, config)
    check(result)
    # The compaction really expired watches: a watch from before it got 410 Gone.
    assert result.compaction_410 == [True]


def test_leader_killed_with_two_replicas(own_control_plane: LocalControlPlane) -> None:
    config = dataclasses.replace(SHORT, replicas=2, kill_leader=True, operator_kills=3, fault_window_s=30)
    result = chaos.run_chaos(own_control_plane, config)
    check(result)
    assert all(f["detail"].startswith("leader replica") for f in result.faults_fired), result.faults_fired


def test_upgrade_day_three_pools_and_an_openshift_upgrade(own_control_plane: LocalControlPlane) -> None:
    # bench/upgrade_day.py in short: ClusterVersion applies a new release (its DTK tag appears),
    # three MachineConfigPools roll side by side, the driver changes, the operator is killed (its
    # container restarted in the same pod) and the apiserver restarted once; the rest of the stack
    # must be Ready at the end too.
    config = dataclasses.replace(
        SHORT,
        nodes=12,
        admin_cordoned=1,
        pool_max_unavailable=(1, 2, 3),
        openshift_upgrade=True,
        stack_ready=True,
        operator_kills=3,
        apiserver_restarts=1,
        fault_window_s=20,
        same_pod_restarts=True,
        lease_s=(15.0, 10.0, 2.0),
    )
    result = chaos.run_chaos(own_control_plane, config)
    check(result)
    assert [(p["pool"], p["nodes"]) for p in result.pools] == [("gpu-1", 3), ("gpu-2", 4), ("gpu-3", 4)]
    assert all(p["s"] is not None for p in result.pools), result.pools
    assert result.openshift_completed_s is not None
    waits = result.monitor["waits"]
    assert waits["in_flight_node_s"] > 0 and 0 < waits["operator_share"] < 1, waits

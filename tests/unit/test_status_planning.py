"""We test these aspects of the ClusterPolicy status as a pure function (planning/status/policy_status.py):

- the first situation that holds decides Ready and Error: invalid spec, failed writes,
  uncovered GPU nodes, operands not ready (naming at most three nodes each), ready;
- warnings, driver findings (one condition per reason), monitoring and unsupported
  settings each add their condition after Ready and Error;
- the health gauge's value follows the state;
- the driver summary's `complete` decides "pods not ready" and is never written;
- an Event for each evented condition only when its message is new.
"""

from __future__ import annotations

import pytest

from ocp_gpu.model.driver_snapshot import DriverDaemonSet
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity
from ocp_gpu.planning.drivers import driver_coverage
from ocp_gpu.planning.drivers.driver_findings import NodeMissingKeyLabels
from ocp_gpu.planning.drivers.driver_plan import DriverPlan
from ocp_gpu.planning.drivers.driver_strategy import Strategy
from ocp_gpu.planning.operands import mig_planning
from ocp_gpu.planning.status import operator_health, policy_status

ERROR = PolicyProblem(field="spec.driver.version", message="'x' is not a version", fix="use 550.54.15")
WARNING = PolicyProblem(field="spec.gfd.env", message="FOO twice", fix="drop one", severity=Severity.WARNING)
READY_DS = DriverDaemonSet(
    name="nvidia-driver-daemonset-a",
    labels={"ocp-gpu.io/driver-key": "a"},
    image="driver:1",
    generation=2,
    observed_generation=2,
    desired_number_scheduled=2,
    number_ready=2,
)
UNREADY_DS = DriverDaemonSet(
    name="nvidia-driver-daemonset-b", image="driver:1", desired_number_scheduled=2, number_ready=1
)


def active(**overrides: object) -> policy_status.PolicyStatus:
    arguments: dict[str, object] = {
        "namespace": "ocp-gpu",
        "platform": "openshift",
        "problems": (),
        "apply_errors": {},
        "plan": None,
        "coverage": None,
        "summary": policy_status.observed_driver_summary([READY_DS]),
        "unready_nodes": {},
        "gpu_nodes": 2,
    }
    arguments.update(overrides)
    return policy_status.plan_active_status(policy_status.PassOutcome(**arguments))  # type: ignore[arg-type]


def kinds(decided: policy_status.PolicyStatus) -> list[tuple[str, bool, str]]:
    return [(c.type, c.status, c.reason) for c in decided.conditions]


def test_ready() -> None:
    decided = active()
    assert decided.state == policy_status.STATE_READY
    assert kinds(decided) == [("Ready", True, "Reconciled"), ("Error", False, "Reconciled")]
    assert decided.conditions[0].message == "2 GPU node(s), 1 driver DaemonSet(s) on openshift"
    assert decided.health is operator_health.ReconciliationStatus.SUCCESS


def test_an_invalid_spec_wins_over_everything_else() -> None:
    decided = active(problems=(ERROR, WARNING), apply_errors={"DaemonSet x": "forbidden"})
    assert decided.state == policy_status.STATE_NOT_READY
    assert kinds(decided) == [
        ("Ready", False, "InvalidSpec"),
        ("Error", True, "InvalidSpec"),
        ("Warning", True, "SpecWarning"),
    ]
    assert decided.conditions[1].message == "spec.driver.version: 'x' is not a version (fix: use 550.54.15)"
    assert decided.health is operator_health.ReconciliationStatus.POLICY_UNAVAILABLE


def test_failed_writes() -> None:
    decided = active(apply_errors={"node b": "gone", "DaemonSet a": "forbidden"})
    assert kinds(decided)[:2] == [("Ready", False, "ApplyFailed"), ("Error", True, "ApplyFailed")]
    assert decided.conditions[0].message == "DaemonSet a: forbidden; node b: gone"
    assert decided.health is operator_health.ReconciliationStatus.OPERATOR_ERROR


def test_uncovered_gpu_nodes_and_one_condition_per_finding_reason() -> None:
    finding = NodeMissingKeyLabels(NodeName("n2"), Strategy.DTK, ("feature.node.kubernetes.io/x",))
    plan = DriverPlan(desired=(), stale=(), findings=(finding, finding))
    coverage = driver_coverage.DriverCoverage(selected={}, uncovered=(NodeName("n2"),))
    decided = active(plan=plan, coverage=coverage, summary=())
    assert kinds(decided) == [
        ("Ready", False, "GPUNodesWithoutDriver"),
        ("Error", False, "Reconciled"),
        (finding.reason, True, finding.reason),
    ]
    assert decided.conditions[2].message == f"{finding.message}; {finding.message}"
    assert decided.health is operator_health.ReconciliationStatus.NOT_READY


def test_operands_not_ready_name_three_nodes_each() -> None:
    summary = policy_status.observed_driver_summary([UNREADY_DS, READY_DS])
    decided = active(summary=summary, unready_nodes={"gpu-feature-discovery": ["n1", "n2", "n3", "n4", "n5"]})
    assert kinds(decided)[0] == ("Ready", False, "OperandNotReady")
    assert decided.conditions[0].message == (
        "pods not ready in nvidia-driver-daemonset-b; gpu-feature-discovery not ready on n1, n2, n3 (+2 more)"
    )


@pytest.mark.parametrize(
    ("on_delete", "why"),
    [
        (False, " (rolling out a new template)"),
        (
            True,
            " (a new template: spec.daemonsets.updateStrategy is OnDelete, delete the pods of the previous"
            " one to roll them)",
        ),
    ],
)
def test_an_operand_rolling_out_says_so_and_with_on_delete_what_rolls_it(on_delete: bool, why: str) -> None:
    decided = active(
        unready_nodes={"gpu-feature-discovery": ["n1"], "nvidia-dcgm": ["n2"]},
        rolling_out=frozenset({"gpu-feature-discovery"}),
        update_on_delete=on_delete,
    )
    assert decided.state == policy_status.STATE_NOT_READY
    assert (
        decided.conditions[0].message
        == f"gpu-feature-discovery not ready on n1{why}; nvidia-dcgm not ready on n2"
    )


def test_monitoring_and_unsupported_come_last_and_do_not_change_the_state() -> None:
    decided = active(monitoring_problems=["a", "b"], unsupported="spec.x is not acted on")
    assert decided.state == policy_status.STATE_READY
    assert kinds(decided)[2:] == [
        ("ServiceMonitorUnavailable", True, "ServiceMonitorUnavailable"),
        (policy_status.UNSUPPORTED, True, policy_status.UNSUPPORTED),
    ]
    assert decided.conditions[2].message == "a b"


def test_the_summary_is_written_without_its_completeness() -> None:
    planned = driver_coverage.DriverCoverage(selected={READY_DS.name: (NodeName("n1"),)}, uncovered=())
    assert policy_status.plan_driver_summary(None, planned, {READY_DS.name: READY_DS})[0].complete
    wire = active().wire()
    assert wire == {
        "state": "ready",
        "namespace": "ocp-gpu",
        "platform": "openshift",
        "driverDaemonSets": [
            {"name": READY_DS.name, "key": "a", "image": "driver:1", "dtkImage": "", "nodes": 2, "ready": 2}
        ],
    }
    assert policy_status.ignored_status("older one wins").wire() == {"state": policy_status.STATE_IGNORED}


def test_events_only_for_new_messages() -> None:
    decided = active(problems=(ERROR,), unsupported="spec.x is not acted on")
    events = policy_status.plan_status_events(decided, previous_messages=())
    assert [(e.reason, e.type) for e in events] == [
        ("InvalidClusterPolicy", "Warning"),
        (policy_status.UNSUPPORTED, "Warning"),
    ]
    stored = {
        "conditions": [{"type": c.type, "status": "True", "message": c.message} for c in decided.conditions]
    }
    assert policy_status.plan_status_events(decided, policy_status.true_condition_messages(stored)) == []
    assert policy_status.ready_message(stored) == decided.conditions[0].message


def test_a_failed_mig_reconfiguration_is_a_condition_and_an_event_not_a_state() -> None:
    failed = [mig_planning.MigNodeState("gpu-1", "all-1g.10gb", "failed")]
    decided = active(mig_failed=failed)
    assert decided.state == policy_status.STATE_READY
    assert kinds(decided)[-1] == (policy_status.MIG_CONFIG_FAILED, True, policy_status.MIG_CONFIG_FAILED)
    assert "gpu-1 (nvidia.com/mig.config=all-1g.10gb)" in decided.conditions[-1].message
    events = policy_status.plan_status_events(decided, previous_messages=())
    assert [(e.reason, e.type) for e in events] == [(policy_status.MIG_CONFIG_FAILED, "Warning")]
    assert policy_status.MIG_CONFIG_FAILED not in [c.type for c in active().conditions]

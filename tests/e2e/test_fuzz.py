"""We test these aspects of the operator against adversarial input, on the local control
plane with the operator running (the short version of bench/fuzz_policies.py):

- hypothesis generates mutations of a running ClusterPolicy from the CRD's own schema
  (hostile strings in every string field, boundary numbers, empty and huge lists and
  maps; one section or the whole spec), each applied to the real apiserver;
- for every case: the operator stays up and reports on the new generation; input it calls
  invalid deletes and rewrites no running DaemonSet (driver, toolkit); accepted input keeps each
  DaemonSet's structure (selector, containers, owner); input it accepts, the apiserver accepts
  when it is applied (no ApplyFailed with HTTP 400/422: a value the apiserver refuses must be
  InvalidSpec naming the field, bug C); no case costs more than a bounded number of writes
  (audit log);
- afterwards, back on the base spec, the operator is quiet (no hot loop left behind).
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from kubernetes import client

from ocp_gpu_harness import fuzzing
from ocp_gpu_harness.chaos import AuditWindow
from ocp_gpu_harness.cluster import LocalControlPlane

from .conftest import OPERATOR_USER, Operated, gpu_nodes_fixture, settle_writes

pytestmark = pytest.mark.e2e

BASE_SPEC = {"driver": {"version": "550.90.07"}}
CASES = 25


gpu_nodes = gpu_nodes_fixture(3, prefix="fuzz-gpu")


@pytest.mark.usefixtures("gpu_nodes")  # nodes to deploy on, never named
@pytest.mark.timeout(600)
def test_fuzzed_policies_never_crash_hot_loop_or_break_running_daemonsets(
    kube: client.ApiClient,
    control_plane: LocalControlPlane,
    namespace: str,
    operated: Operated,
) -> None:
    operator = operated.run(BASE_SPEC)
    fuzzer = fuzzing.PolicyFuzzer(
        kube, operator, namespace, BASE_SPEC, control_plane.audit_log, OPERATOR_USER
    )
    fuzzer.restore_base()

    @settings(
        max_examples=CASES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        # NB: shrinking re-applies cases to a live cluster; the first failure says enough.
        phases=[p for p in settings.default.phases if p.name != "shrink"],
    )
    @given(fuzzing.mutation_strategy())
    def case(mutation: fuzzing.Mutation) -> None:
        failures = fuzzer.run_case(mutation)
        assert not failures, failures

    case()
    stats = fuzzer.stats.as_dict()
    print(stats)
    assert fuzzer.stats.cases >= CASES
    assert operator.running()

    # Back on the base spec: once the operator has settled, it writes nothing.
    fuzzer.restore_base()
    # Settled first (a fixed 5 s let a pass still applying the base spec on a loaded machine
    # into the window); a hot loop never settles and fails here with its writes.
    settle_writes(control_plane)
    quiet = AuditWindow(control_plane.audit_log).start()
    time.sleep(15)  # the window: what the operator writes in it is the result
    writes = quiet.writes(OPERATOR_USER)
    assert sum(writes.values()) == 0, writes
    assert operator.running(), "the operator exited"

"""We test these aspects of input limits and messages on the local control plane:

- the API server refuses a 10 KB `driver.version` (the CRD's maxLength), naming the field;
- a second ClusterPolicy gets a `ClusterPolicyIgnored` Warning Event naming the active one,
  and the operator logs which policy is active;
- an invalid spec is logged once, with the field;
- a driver downgrade (510.85.02 below a running 550.90.07) is logged and gets a
  `DriverDowngrade` Warning Event, and still rolls as the admin asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness.cluster import unique_name

from .conftest import (
    REACT_S,
    READY_S,
    Operated,
    after_its_second,
    holds_for,
    patch_policy,
    policy_state,
    ready_for_the_spec,
    wait_for,
    wait_for_event,
)

pytestmark = pytest.mark.e2e


def test_a_10kb_version_is_refused_by_the_api_server(
    kube: client.ApiClient, clusterpolicy_crd: None, apply_policy: Callable[..., dict[str, Any]]
) -> None:
    with pytest.raises(client.exceptions.ApiException) as refused:
        apply_policy(spec={"driver": {"version": "5" * 10_000}})
    assert refused.value.status == 422
    assert "spec.driver.version" in str(refused.value.body) and "Too long" in str(refused.value.body)


def test_second_policy_event_and_active_policy_logged(
    kube: client.ApiClient,
    gpu_node: str,
    operated: Operated,
) -> None:
    first = operated.apply("cluster-policy")
    operator = operated.start()
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="ready")
    after_its_second(first)  # creationTimestamp has second resolution
    second = unique_name("second")
    operated.apply(second)
    event = wait_for_event(kube, "ClusterPolicyIgnored", second, timeout=REACT_S)
    assert event.type == "Warning" and event.involved_object.name == second
    assert "cluster-policy" in event.message
    assert "active ClusterPolicy: cluster-policy" in operator.log()
    assert f"ClusterPolicy {second} ignored" in operator.log()

    # An invalid spec is logged (once) with the field at fault.
    patch_policy(kube, {"driver": {"upgradePolicy": {"drain": {"podSelector": "app in (a"}}}})
    wait_for(lambda: policy_state(kube) == "notReady", REACT_S, what="notReady")
    wait_for(lambda: "has an invalid spec" in operator.log(), REACT_S, what="invalid spec logged")
    # A window: the passes that follow (each within 0.2 s of a change) must not log it again.
    holds_for(
        lambda: operator.log().count("has an invalid spec") == 1, 2, what="the invalid spec logged once"
    )
    log = operator.log()
    assert "spec.driver.upgradePolicy.drain.podSelector" in log


def test_driver_downgrade_is_logged_and_evented_and_still_rolls(
    kube: client.ApiClient,
    namespace: str,
    gpu_node: str,
    operated: Operated,
) -> None:
    operator = operated.run({"driver": {"version": "550.90.07"}})
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="ready")
    patch_policy(kube, {"driver": {"version": "510.85.02"}})
    event = wait_for_event(kube, "DriverDowngrade", "510.85.02", timeout=REACT_S)
    assert event.type == "Warning" and "550.90.07" in event.message and "downgrade" in event.message
    assert "driver downgrade" in operator.log()

    def rolled() -> bool:
        pods = client.CoreV1Api(kube).list_namespaced_pod(
            namespace, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
        )
        return any(
            p.spec.node_name == gpu_node and ":510.85.02-" in p.spec.containers[0].image for p in pods.items
        )

    wait_for(rolled, READY_S, what="the downgrade rolls")

"""We test these aspects of the operator's owned objects on the local control plane:

- an owned object deleted by hand (ServiceAccount, ClusterRole, RoleBinding) is re-applied
  within seconds, because every owned kind is watched (kube/owning.OWNED_KINDS);
- after the ClusterPolicy is deleted (the garbage collector removes every owned object) and
  re-created, all of them come back, owned by the new policy, and driver pods run again;
- a restarted operator re-applies nothing that is unchanged (counted in the audit log).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import driver_rendering, toolkit
from ocp_gpu_harness.cluster import LocalControlPlane

from .conftest import (
    OPERATOR_USER,
    REACT_S,
    READY_S,
    STEP_S,
    Operated,
    gpu_nodes_fixture,
    ready_for_the_spec,
    settle_writes,
    wait_for,
)

pytestmark = pytest.mark.e2e

OWNED = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"


gpu_nodes = gpu_nodes_fixture(2)


def owned_objects(kube: client.ApiClient, namespace: str) -> dict[str, str]:
    """'Kind name' -> owner uid of every owned object the operator applies (DaemonSets aside)."""
    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    found: dict[str, str] = {}
    listed: list[tuple[str, Any]] = [
        ("ServiceAccount", core.list_namespaced_service_account(namespace, label_selector=OWNED)),
        ("Role", rbac.list_namespaced_role(namespace, label_selector=OWNED)),
        ("RoleBinding", rbac.list_namespaced_role_binding(namespace, label_selector=OWNED)),
        ("ClusterRole", rbac.list_cluster_role(label_selector=OWNED)),
        ("ClusterRoleBinding", rbac.list_cluster_role_binding(label_selector=OWNED)),
    ]
    for kind, items in listed:
        for item in items.items:
            if item.metadata.deletion_timestamp:
                continue
            owners = item.metadata.owner_references or []
            found[f"{kind} {item.metadata.name}"] = owners[0].uid if owners else ""
    return found


def driver_pods_running(kube: client.ApiClient, namespace: str, count: int) -> bool:
    pods = client.CoreV1Api(kube).list_namespaced_pod(
        namespace, label_selector=f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
    )
    return (
        sum(1 for p in pods.items if p.status.phase == "Running" and not p.metadata.deletion_timestamp)
        == count
    )


@pytest.mark.usefixtures("gpu_nodes")  # nodes to deploy on, never named
def test_owned_objects_deleted_by_hand_come_back_within_seconds(
    kube: client.ApiClient,
    namespace: str,
    operated: Operated,
) -> None:
    operated.ready()
    before = owned_objects(kube, namespace)
    expected = {
        f"ServiceAccount {driver_rendering.SERVICE_ACCOUNT}",
        f"ServiceAccount {toolkit.IDENTITY.service_account}",
        f"ClusterRole {driver_rendering.CLUSTER_ROLE}",
    }
    assert expected <= before.keys(), before

    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    core.delete_namespaced_service_account(driver_rendering.SERVICE_ACCOUNT, namespace)
    rbac.delete_cluster_role(driver_rendering.CLUSTER_ROLE)
    role_bindings = [k.split(" ", 1)[1] for k in before if k.startswith("RoleBinding ")]
    for name in role_bindings:
        rbac.delete_namespaced_role_binding(name, namespace)
    deleted_at = time.monotonic()
    # "Re-applied within seconds" (docs/architecture.md); REACT_S: a watch event -> a pass -> the writes.
    wait_for(
        lambda: owned_objects(kube, namespace).keys() == before.keys(), REACT_S, what="owned objects back"
    )
    assert time.monotonic() - deleted_at < REACT_S


def test_policy_recreated_brings_back_every_owned_object(
    kube: client.ApiClient,
    namespace: str,
    gpu_nodes: list[str],
    operated: Operated,
) -> None:
    first = operated.apply()
    operated.start()
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready")
    before = owned_objects(kube, namespace)
    assert set(before.values()) == {first["metadata"]["uid"]}

    api = client.CustomObjectsApi(kube)
    api.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
    wait_for(
        lambda: not owned_objects(kube, namespace), REACT_S, what="garbage collector removes owned objects"
    )
    second = api.create_cluster_custom_object(
        "nvidia.com",
        "v1",
        "clusterpolicies",
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}},
    )
    after = wait_for(
        lambda: (found := owned_objects(kube, namespace)).keys() == before.keys() and found,
        REACT_S,
        what="owned objects re-created",
    )
    assert set(after.values()) == {second["metadata"]["uid"]}, "owned by the new policy"
    wait_for(lambda: driver_pods_running(kube, namespace, len(gpu_nodes)), STEP_S, what="driver pods running")
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="new policy ready")


@pytest.mark.usefixtures("gpu_nodes")  # nodes to deploy on, never named
def test_restart_reapplies_nothing_unchanged(
    kube: client.ApiClient,
    control_plane: LocalControlPlane,
    namespace: str,
    operated: Operated,
) -> None:
    first = operated.ready()
    settle_writes(control_plane)  # the first operator's last writes are not the second's
    first.stop()
    mark = control_plane.audit_line_count()
    second = operated.start()  # waits until it leads
    # Its first pass has run (a fixed 8 s could end before it on a loaded machine, and then
    # proved nothing). Budget 60 s: the pass after the start-up barrier takes a second here.
    wait_for(lambda: (second.metric("gpu_operator_reconciliation_total") or 0) >= 1, 60, what="a first pass")
    # The window: 2 s after that pass, in which what it wrote reaches the audit log (logged after
    # the response) and whatever it set off would be written; none of it may be there.
    time.sleep(2)
    writes = [
        f"{e['verb']} {e.get('objectRef', {}).get('resource')}/{e.get('objectRef', {}).get('name')}"
        for e in control_plane.read_audit_events(since_line=mark)
        if e.get("user", {}).get("username") == OPERATOR_USER
        and e.get("stage") == "ResponseComplete"
        and e.get("verb") in ("create", "update", "patch", "delete")
        and e.get("objectRef", {}).get("resource") not in ("leases", "events")
    ]
    assert writes == []
    assert ready_for_the_spec(kube)

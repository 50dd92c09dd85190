"""We test these aspects of the OLM upgrade gate on the local control plane, with OLM's
OperatorCondition CRD (tests/e2e/data/, from operator-framework/api v0.45.0) and no OLM:

- named by $OPERATOR_CONDITION_NAME, the operator writes `Upgradeable=True` to its
  OperatorCondition's spec.conditions while the drivers are settled;
- a driver version change turns it `False` (DriverUpgradeInProgress), a node whose new driver
  pod cannot start turns it `False` (DriverUpgradeFailed), and the admin's fix and relabelling
  turn it `True` again;
- without the env var, or with no such OperatorCondition, the operator writes nothing to
  operatorconditions and says why once in its log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import crds, stages
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

from .conftest import (
    OPERATOR_USER,
    REACT_S,
    READY_S,
    STEP_S,
    UPGRADE_S,
    driver_pods_ready,
    gpu_nodes_fixture,
    kubectl,
    wait_for,
)

pytestmark = pytest.mark.e2e

CRD_PATH = Path(__file__).resolve().parent / "data" / "operators.coreos.com_operatorconditions.yaml"
GROUP, VERSION, PLURAL = "operators.coreos.com", "v2", "operatorconditions"
# OLM names it after the CSV.
CONDITION_NAME = "ocp-gpu.v0.1.0"


@pytest.fixture(scope="module")
def operatorcondition_crd(control_plane: LocalControlPlane) -> None:
    kubectl(control_plane, "apply", "--server-side", "-f", str(CRD_PATH))
    with control_plane.api_client() as api:
        crds.wait_until_served(api, [f"{PLURAL}.{GROUP}"])


@pytest.fixture
def operator_condition(
    kube: client.ApiClient, namespace: str, operatorcondition_crd: None
) -> Iterator[Callable[[], dict[str, Any]]]:
    """The OperatorCondition OLM would create for the CSV (empty spec); a reader of its Upgradeable."""
    api = client.CustomObjectsApi(kube)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "OperatorCondition",
        "metadata": {"name": CONDITION_NAME},
    }
    api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def upgradeable() -> dict[str, Any]:
        found = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, CONDITION_NAME)
        return next(
            (c for c in (found.get("spec") or {}).get("conditions") or () if c.get("type") == "Upgradeable"),
            {},
        )

    yield upgradeable
    api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, CONDITION_NAME)


gpu_nodes = gpu_nodes_fixture(2)


def states(kube: client.ApiClient, names: list[str]) -> dict[str, str]:
    core = client.CoreV1Api(kube)
    return {n: (core.read_node(n).metadata.labels or {}).get(labels.UPGRADE_STATE, "") for n in names}


def patch_policy(kube: client.ApiClient, patch: dict[str, Any]) -> None:
    client.CustomObjectsApi(kube).patch_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies", "cluster-policy", patch
    )


def test_upgradeable_follows_the_driver_rollout(
    kube: client.ApiClient,
    control_plane: LocalControlPlane,
    gpu_nodes: list[str],
    operator_condition: Callable[[], dict[str, Any]],
    apply_policy: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    apply_policy(spec={"driver": {"version": "550.90.07"}})
    operator = start_operator(
        env={"OPERATOR_CONDITION_NAME": CONDITION_NAME, "OCP_GPU_DRIVER_RESTART_TIMEOUT_SECONDS": "5"}
    )
    wait_for(
        lambda: set(states(kube, gpu_nodes).values()) == {"upgrade-done"}, READY_S, what="initial labels"
    )
    settled = wait_for(
        lambda: operator_condition().get("status") == "True" and operator_condition(),
        REACT_S,
        what="Upgradeable=True",
    )
    assert settled["reason"] == "DriversSettled"

    # A new driver whose pods cannot start: the rollout begins, then the first node fails.
    failing = {stages.FATE_ANNOTATION: stages.FATE_IMAGE_PULL_FAILING}
    patch_policy(kube, {"spec": {"driver": {"version": "510.85.02"}, "daemonsets": {"annotations": failing}}})
    in_progress = wait_for(
        lambda: operator_condition().get("reason") == "DriverUpgradeInProgress" and operator_condition(),
        STEP_S,
        what="Upgradeable=False while the rollout runs",
    )
    assert in_progress["status"] == "False" and "driver rollout is in progress" in in_progress["message"]
    failed = wait_for(
        lambda: operator_condition().get("reason") == "DriverUpgradeFailed" and operator_condition(),
        READY_S,
        what="Upgradeable=False naming the failed node",
    )
    [node] = [n for n, s in states(kube, gpu_nodes).items() if s == "upgrade-failed"]
    assert failed["status"] == "False" and node in failed["message"]

    # The admin fixes the image and relabels: once every node is done, upgrades may go on.
    patch_policy(kube, {"spec": {"daemonsets": {"annotations": None}}})
    kubectl(control_plane, "label", "node", node, f"{labels.UPGRADE_STATE}=upgrade-required", "--overwrite")
    wait_for(lambda: set(states(kube, gpu_nodes).values()) == {"upgrade-done"}, UPGRADE_S, what="recovered")
    wait_for(lambda: operator_condition().get("status") == "True", REACT_S, what="Upgradeable=True again")
    assert "Upgradeable=False (DriverUpgradeFailed)" in operator.log()


@pytest.mark.parametrize(
    "env", [{}, {"OPERATOR_CONDITION_NAME": "no-such-condition"}], ids=["no-env", "no-cr"]
)
def test_without_olm_nothing_is_written_and_the_log_says_why_once(
    env: dict[str, str],
    kube: client.ApiClient,
    control_plane: LocalControlPlane,
    namespace: str,
    gpu_nodes: list[str],
    operatorcondition_crd: None,
    apply_policy: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    apply_policy(spec={"driver": {"version": "550.90.07"}})
    mark = control_plane.audit_line_count()
    operator = start_operator(env=env)
    wait_for(lambda: set(states(kube, gpu_nodes).values()) == {"upgrade-done"}, READY_S, what="labels")
    # A whole rollout: many upgrade passes, each of which would say Upgradeable.
    patch_policy(kube, {"spec": {"driver": {"version": "510.85.02"}}})
    # NB: the new driver pods, not a node seen leaving upgrade-done: two kwok nodes walked the
    # eight states in a quarter of a second, between two polls (hack/test.sh, 2026-11-28).
    wait_for(
        lambda: (
            driver_pods_ready(kube, namespace, gpu_nodes, "510.85.02")
            and set(states(kube, gpu_nodes).values()) == {"upgrade-done"}
        ),
        UPGRADE_S,
        what="the rollout done: every node's driver pod 510.85.02 and upgrade-done",
    )
    assert operator.log().count("not reporting Upgradeable to OLM") == 1
    writes = [
        event
        for event in control_plane.read_audit_events(since_line=mark)
        if (event.get("objectRef") or {}).get("resource") == PLURAL
        and event.get("verb") not in ("get", "list", "watch")
        # Only the operator's own writes: the namespace controller's deletecollection of an
        # earlier test's namespace lands in the same audit log.
        and (event.get("user") or {}).get("username") == OPERATOR_USER
    ]
    assert writes == []

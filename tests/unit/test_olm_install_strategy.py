"""We test these aspects of ocp_gpu_harness/olm_install_strategy.py (what OLM creates from the
bundle's ClusterServiceVersion, for the real node's test), on the bundle's own CSV:

- one ServiceAccount per name the permissions give, in the install namespace; a Role and
  RoleBinding per `permissions` entry and a ClusterRole and ClusterRoleBinding per
  `clusterPermissions` entry, with the CSV's rules as written, bound to that ServiceAccount there;
  every RBAC object before the Deployment that needs it;
- the Deployment: the declared spec, but for what OLM injects: the Subscription config's env merged
  by name (an existing variable replaced in place, a new one appended), tolerations appended
  unless the pod has them, the nodeSelector replaced, OPERATOR_CONDITION_NAME naming the CSV,
  revisionHistoryLimit 1, the entry's label plus olm.managed, the CSV's annotations over the pod
  template's;
- the OperatorCondition: named as the CSV, listing its ServiceAccounts and Deployments;
- a strategy other than `deployment` is refused, naming the field; the CSV is not changed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocp_gpu_harness import olm_install_strategy as strategy

ROOT = Path(__file__).resolve().parents[2]
CSV_PATH = ROOT / "bundle" / "manifests" / "ocp-gpu.clusterserviceversion.yaml"
NAMESPACE = "nvidia-gpu-operator"
TOLERATION = {"key": "ocp-gpu.io/real-node", "operator": "Exists", "effect": "NoSchedule"}
OTHER_TOLERATION = {"key": "example.com/other", "operator": "Exists"}


@pytest.fixture(scope="module")
def csv() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CSV_PATH.read_text())
    return loaded


def _install(csv: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = csv["spec"]["install"]["spec"]
    return spec


def _of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_rbac_as_the_csv_declares_it_bound_to_its_service_account(csv: dict[str, Any]) -> None:
    objects = strategy.install_objects(csv, NAMESPACE)
    assert [o["metadata"] for o in _of(objects, "ServiceAccount")] == [
        {"name": "gpu-operator", "namespace": NAMESPACE}
    ]
    install = _install(csv)
    assert [r["rules"] for r in _of(objects, "Role")] == [p["rules"] for p in install["permissions"]]
    assert [r["rules"] for r in _of(objects, "ClusterRole")] == [
        p["rules"] for p in install["clusterPermissions"]
    ]
    assert all(r["metadata"]["namespace"] == NAMESPACE for r in _of(objects, "Role"))
    assert all("namespace" not in r["metadata"] for r in _of(objects, "ClusterRole"))
    for kind in ("Role", "ClusterRole"):
        roles = {r["metadata"]["name"] for r in _of(objects, kind)}
        bindings = _of(objects, f"{kind}Binding")
        assert {b["roleRef"]["name"] for b in bindings} == roles
        assert all(b["roleRef"]["kind"] == kind for b in bindings)
        assert all(
            b["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-operator", "namespace": NAMESPACE}]
            for b in bindings
        )
    kinds = [o["kind"] for o in objects]
    assert kinds.index("Deployment") > max(i for i, k in enumerate(kinds) if k != "Deployment")


def test_the_deployment_is_the_declared_one_with_what_olm_injects(csv: dict[str, Any]) -> None:
    csv = copy.deepcopy(csv)
    declared = _install(csv)["deployments"][0]
    # A toleration the pod has already is not added twice.
    declared["spec"]["template"]["spec"]["tolerations"] = [TOLERATION]
    declared_env = declared["spec"]["template"]["spec"]["containers"][0]["env"]
    config = strategy.SubscriptionConfig(
        env=[
            {"name": "KUBERNETES_SERVICE_HOST", "value": "10.0.0.1"},
            {"name": "OPERATOR_IMAGE", "value": "x:1"},
        ],
        tolerations=[TOLERATION, OTHER_TOLERATION],
        node_selector={"ocp-gpu.io/real-node": "true"},
    )
    before = copy.deepcopy(csv)
    (deployment,) = _of(strategy.install_objects(csv, NAMESPACE, config), "Deployment")
    assert csv == before, "the CSV was changed"
    assert deployment["metadata"] == {
        "name": declared["name"],
        "namespace": NAMESPACE,
        "labels": {**declared["label"], "olm.managed": "true"},
    }
    pod = deployment["spec"]["template"]["spec"]
    env = pod["containers"][0]["env"]
    names = [item["name"] for item in env]
    # Replaced in place, appended, and OLM's own last.
    assert names == [item["name"] for item in declared_env] + [
        "KUBERNETES_SERVICE_HOST",
        "OPERATOR_CONDITION_NAME",
    ]
    assert {"name": "OPERATOR_IMAGE", "value": "x:1"} in env
    assert env[-1] == {"name": "OPERATOR_CONDITION_NAME", "value": csv["metadata"]["name"]}
    assert pod["tolerations"] == [TOLERATION, OTHER_TOLERATION]
    assert pod["nodeSelector"] == {"ocp-gpu.io/real-node": "true"}
    assert deployment["spec"]["revisionHistoryLimit"] == 1
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        **declared["spec"]["template"]["metadata"]["annotations"],
        **csv["metadata"]["annotations"],
    }
    # Everything else as declared.
    rest = copy.deepcopy(deployment["spec"])
    want = copy.deepcopy(declared["spec"])
    for spec in (rest, want):
        spec.pop("revisionHistoryLimit", None)
        spec["template"]["metadata"].pop("annotations")
        for key in ("tolerations", "nodeSelector"):
            spec["template"]["spec"].pop(key, None)
        spec["template"]["spec"]["containers"][0].pop("env")
    assert rest == want


def test_the_operator_condition_names_the_csv_its_accounts_and_deployments(csv: dict[str, Any]) -> None:
    condition = strategy.operator_condition(csv, NAMESPACE)
    assert condition["metadata"] == {"name": csv["metadata"]["name"], "namespace": NAMESPACE}
    assert condition["spec"] == {"serviceAccounts": ["gpu-operator"], "deployments": ["gpu-operator"]}


def test_a_strategy_olm_does_not_know_is_refused(csv: dict[str, Any]) -> None:
    other = copy.deepcopy(csv)
    other["spec"]["install"]["strategy"] = "helm"
    with pytest.raises(ValueError, match=r"spec\.install\.strategy 'helm'"):
        strategy.install_objects(other, NAMESPACE)

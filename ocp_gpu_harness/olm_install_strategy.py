"""What OLM makes of a ClusterServiceVersion's install strategy, for a cluster without OLM.

SIMULATION of OLM's installing step (docs/testing.md), for the real node (tests/e2e/
test_real_node.py), where the operator Deployment the bundle declares runs for real from our image
while OLM's own controllers (tests/olm) run only beside kwok.  From `spec.install.spec` of the CSV,
installed in `namespace`, `install_objects` gives what OLM would create, in the order it would:

- per ServiceAccount of `permissions` and `clusterPermissions`: the ServiceAccount, a Role and a
  RoleBinding (in the namespace) per `permissions` entry, a ClusterRole and a ClusterRoleBinding
  per `clusterPermissions` entry, the rules as written (OLM's catalog operator:
  pkg/controller/registry/resolver/rbac.go, RBACForClusterServiceVersion);
- per entry of `deployments`: a Deployment of that name in the namespace with the declared spec,
  the entry's `label` plus `olm.managed: "true"` as its labels, the CSV's annotations merged over
  the pod template's, the Subscription's `spec.config` injected (env merged by name into every
  container, tolerations appended unless the pod has them, the nodeSelector replaced), then
  `OPERATOR_CONDITION_NAME=<CSV name>` and `revisionHistoryLimit: 1` (OLM's olm operator:
  pkg/controller/install/deployment.go, deploymentForSpec; pkg/controller/operators/olm/
  overrides/inject/inject.go);

and `operator_condition` the OperatorCondition OLM creates for the CSV (pkg/controller/operators/
operatorconditiongenerator_controller.go: named as the CSV, listing its ServiceAccounts and
Deployments), which the operator named by OPERATOR_CONDITION_NAME writes `Upgradeable` to.

Checked against operator-lifecycle-manager at 992bb0977 (what hack/build-olm.sh builds).  Not
done as OLM does, and why it does not matter to what runs: OLM hashes its Role and ClusterRole
names (here `<csv>-<serviceaccount>-<n>`), sets owner references to the CSV and its owner labels
(there is no CSV object here), adds the OperatorGroup's annotations (`olm.targetNamespaces` ...,
which ocp-gpu does not read) and the `olm.deployment-spec-hash` label.  Pure: no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

# OLM's label on the Deployments it manages (install.OLMManagedLabelKey/Value).
OLM_MANAGED: Final = {"olm.managed": "true"}
CONDITION_NAME_ENV: Final = "OPERATOR_CONDITION_NAME"


@dataclass(frozen=True)
class SubscriptionConfig:
    """The part of a Subscription's `spec.config` an admin sets to place and configure the operator."""

    env: Sequence[Mapping[str, Any]] = ()
    tolerations: Sequence[Mapping[str, Any]] = ()
    node_selector: Mapping[str, str] | None = None


def _strategy(csv: Mapping[str, Any]) -> Mapping[str, Any]:
    install = csv["spec"]["install"]
    if install.get("strategy") != "deployment":
        raise ValueError(f"spec.install.strategy {install.get('strategy')!r}: OLM knows only 'deployment'")
    spec: Mapping[str, Any] = install["spec"]
    return spec


def _merge_env(
    current: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """OLM's mergeEnvVars: a new variable replaces the one of its name in place; the others follow."""
    by_name = {item["name"]: dict(item) for item in new}
    merged = [by_name.pop(item["name"], dict(item)) for item in current]
    return merged + [dict(item) for item in new if item["name"] in by_name]


def _deployment(
    csv: Mapping[str, Any], entry: Mapping[str, Any], namespace: str, config: SubscriptionConfig
) -> dict[str, Any]:
    spec = copy.deepcopy(dict(entry["spec"]))
    template = spec.setdefault("template", {})
    metadata = template.setdefault("metadata", {})
    metadata["annotations"] = {**metadata.get("annotations", {}), **csv["metadata"].get("annotations", {})}
    pod = template.setdefault("spec", {})
    for container in pod.get("containers", []):
        container["env"] = _merge_env(container.get("env", []), config.env)
    # NB: as OLM's mergeTolerations, each is looked for among the pod's own only.
    declared = list(pod.get("tolerations", []))
    tolerations = declared + [dict(t) for t in config.tolerations if dict(t) not in declared]
    if tolerations:
        pod["tolerations"] = tolerations
    if config.node_selector is not None:
        pod["nodeSelector"] = dict(config.node_selector)
    condition = [{"name": CONDITION_NAME_ENV, "value": csv["metadata"]["name"]}]
    for container in pod.get("containers", []):
        container["env"] = _merge_env(container["env"], condition)
    spec["revisionHistoryLimit"] = 1
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": entry["name"],
            "namespace": namespace,
            "labels": {**entry.get("label", {}), **OLM_MANAGED},
        },
        "spec": spec,
    }


def install_objects(
    csv: Mapping[str, Any], namespace: str, config: SubscriptionConfig | None = None
) -> list[dict[str, Any]]:
    """The objects OLM creates from the CSV's install strategy in `namespace` (see the module doc)."""
    strategy = _strategy(csv)
    config = config or SubscriptionConfig()
    name = csv["metadata"]["name"]
    accounts: dict[str, None] = {}
    rbac: list[dict[str, Any]] = []
    for scope, entries in (
        ("namespace", strategy.get("permissions", [])),
        ("cluster", strategy.get("clusterPermissions", [])),
    ):
        for index, entry in enumerate(entries):
            account = entry["serviceAccountName"]
            accounts[account] = None
            role_name = f"{name}-{account}-{index}"
            subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
            kind = "Role" if scope == "namespace" else "ClusterRole"
            meta = {"name": role_name, **({"namespace": namespace} if scope == "namespace" else {})}
            rbac.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": kind,
                    "metadata": meta,
                    "rules": entry["rules"],
                }
            )
            rbac.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": f"{kind}Binding",
                    "metadata": dict(meta),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
                    "subjects": [subject],
                }
            )
    service_accounts = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}}
        for account in accounts
    ]
    deployments = [_deployment(csv, entry, namespace, config) for entry in strategy.get("deployments", [])]
    return service_accounts + rbac + deployments


def operator_condition(csv: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The OperatorCondition OLM creates for the CSV (its operator writes `spec.conditions`)."""
    strategy = _strategy(csv)
    accounts = {
        entry["serviceAccountName"]: None
        for entry in [*strategy.get("permissions", []), *strategy.get("clusterPermissions", [])]
    }
    return {
        "apiVersion": "operators.coreos.com/v2",
        "kind": "OperatorCondition",
        "metadata": {"name": csv["metadata"]["name"], "namespace": namespace},
        "spec": {
            "serviceAccounts": list(accounts),
            "deployments": [entry["name"] for entry in strategy.get("deployments", [])],
        },
    }

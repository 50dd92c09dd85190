"""The operator's install manifests for one namespace, built from rbac.yaml and the release.

Pure: returns plain dicts (what `kubectl apply`, the CSV and the chart carry).  Names are
DESIGN.md's: Deployment and ServiceAccount `gpu-operator`, namespace `nvidia-gpu-operator`
under OLM, `gpu-operator` with Helm.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, Final

import yaml

from ocp_gpu.model import releases

NAME: Final = "gpu-operator"  # Deployment, ServiceAccount, ClusterRole(Binding), Role(Binding)
OLM_NAMESPACE: Final = "nvidia-gpu-operator"
HELM_NAMESPACE: Final = "gpu-operator"
METRICS_PORT: Final = 8080  # `ocp-gpu run --metrics-bind`: /metrics, /healthz, /readyz
APP_LABELS: Final = {"app": NAME, "app.kubernetes.io/name": NAME, "app.kubernetes.io/component": NAME}

# Requests and limits from bench/results (drivers-*.json, operator RSS measured by
# bench/drivers_at_scale.py on the local control plane): RSS idle 116 MiB at 100 nodes,
# 161 MiB at 1,000, peak 261 MiB at 5,000; CPU 0.22 s per quiet minute at 1,000 nodes,
# 1.7 s at 5,000.  The memory request covers 1,000 nodes at idle, the limit twice the
# 5,000-node peak.  NB: no CPU limit: throttling would only stretch the first full
# reconcile of a large cluster (CPU-bound for seconds), and the request keeps a share.
RESOURCES: Final = {
    "requests": {"cpu": "100m", "memory": "192Mi"},
    "limits": {"memory": "512Mi"},
}


@dataclasses.dataclass(frozen=True)
class Rule:
    """One RBAC policy rule and the reason the operator holds it."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str
    resource_names: tuple[str, ...] = ()

    def as_manifest(self) -> dict[str, Any]:
        """The rule as the RBAC API spells it."""
        rule: dict[str, Any] = {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resource_names:
            rule["resourceNames"] = list(self.resource_names)
        return rule


@dataclasses.dataclass(frozen=True)
class Rules:
    """The ClusterRole's rules and the namespace Role's rules."""

    cluster: tuple[Rule, ...]
    namespace: tuple[Rule, ...]


def parse_rules(text: str) -> Rules:
    """rbac.yaml's content as Rules; ValueError naming the entry that is malformed."""
    data = yaml.safe_load(text)

    def one(scope: str, index: int, entry: Mapping[str, Any]) -> Rule:
        where = f"rbac.yaml {scope}[{index}]"
        unknown = set(entry) - {"why", "apiGroups", "resources", "verbs", "resourceNames"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        for key in ("why", "apiGroups", "resources", "verbs"):
            if not entry.get(key) and entry.get(key) != [""]:
                raise ValueError(f"{where}: `{key}` is required and must not be empty")
        return Rule(
            api_groups=tuple(str(group) for group in entry["apiGroups"]),
            resources=tuple(str(resource) for resource in entry["resources"]),
            verbs=tuple(str(verb) for verb in entry["verbs"]),
            why=str(entry["why"]),
            resource_names=tuple(str(name) for name in entry.get("resourceNames") or ()),
        )

    return Rules(
        cluster=tuple(one("cluster", i, entry) for i, entry in enumerate(data.get("cluster") or ())),
        namespace=tuple(one("namespace", i, entry) for i, entry in enumerate(data.get("namespace") or ())),
    )


@functools.cache
def rules() -> Rules:
    """The operator's rules, from the package's rbac.yaml."""
    return parse_rules(resources.files(__package__).joinpath("rbac.yaml").read_text())


def service_account(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(APP_LABELS)},
    }


def cluster_role(name: str = NAME) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": dict(APP_LABELS)},
        "rules": [rule.as_manifest() for rule in rules().cluster],
    }


def role(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(APP_LABELS)},
        "rules": [rule.as_manifest() for rule in rules().namespace],
    }


def _subjects(namespace: str, subjects: Sequence[Mapping[str, str]] | None) -> list[dict[str, str]]:
    if subjects is not None:
        return [dict(subject) for subject in subjects]
    return [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]


def cluster_role_binding(
    namespace: str, name: str = NAME, subjects: Sequence[Mapping[str, str]] | None = None
) -> dict[str, Any]:
    """Binds the ClusterRole to the ServiceAccount (or to `subjects`, e.g. a test's user)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(APP_LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": _subjects(namespace, subjects),
    }


def role_binding(namespace: str, subjects: Sequence[Mapping[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(APP_LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
        "subjects": _subjects(namespace, subjects),
    }


def operator_env(image: str = releases.OPERATOR_IMAGE) -> list[dict[str, Any]]:
    """The operator container's env: its namespace and pod name (downward API), its own image and
    the operand images.

    NB: `image` is the Deployment's own image: the validator and the node status exporter run
    from it (releases.with_release_defaults), so a mirrored or overridden operator image moves them too.
    """
    env: list[dict[str, Any]] = [
        {"name": "OPERATOR_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        # The leader Lease's identity: a container restarted in this pod resumes its Lease at once.
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": releases.OPERATOR_IMAGE_ENV, "value": image},
    ]
    env += [{"name": key, "value": value} for key, value in releases.installed_images().items()]
    return env


def deployment_spec(image: str = releases.OPERATOR_IMAGE) -> dict[str, Any]:
    """The Deployment's spec (the CSV's install strategy carries only the spec)."""
    probe = {
        "httpGet": {"path": "/healthz", "port": "metrics"},
        "initialDelaySeconds": 10,
        "periodSeconds": 20,
    }
    return {
        # NB: replicas > 1 is safe (one leader holds the Lease, the others stand by and
        # answer /readyz) but one is enough: a restarted pod resumes from the cluster.
        "replicas": 1,
        "selector": {"matchLabels": {"app": NAME}},
        "template": {
            "metadata": {
                "labels": {
                    **APP_LABELS,
                    # the driver upgrade's drain never evicts the operator doing it (NVIDIA's label)
                    "nvidia.com/gpu-driver-upgrade-drain.skip": "true",
                },
                "annotations": {
                    "kubectl.kubernetes.io/default-container": NAME,
                    # OpenShift: the restricted SCC is all the operator needs
                    "openshift.io/required-scc": "restricted-v2",
                },
            },
            "spec": {
                "serviceAccountName": NAME,
                # GPU nodes lose their drivers when the operator cannot run: it is node-critical
                "priorityClassName": "system-node-critical",
                "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "terminationGracePeriodSeconds": 30,
                "containers": [
                    {
                        "name": NAME,
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        # leader election is always on (a coordination.k8s.io Lease named gpu-operator)
                        "command": ["ocp-gpu"],
                        "args": ["run", "--metrics-bind", f"0.0.0.0:{METRICS_PORT}"],
                        "env": operator_env(image),
                        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
                        "livenessProbe": probe,
                        "readinessProbe": {
                            "httpGet": {"path": "/readyz", "port": "metrics"},
                            "initialDelaySeconds": 5,
                            "periodSeconds": 10,
                        },
                        "resources": {kind: dict(values) for kind, values in RESOURCES.items()},
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                            "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True,
                        },
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    }
                ],
                "volumes": [{"name": "tmp", "emptyDir": {}}],
            },
        },
    }


def deployment(namespace: str, image: str = releases.OPERATOR_IMAGE) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(APP_LABELS)},
        "spec": deployment_spec(image),
    }


def operator_manifests(namespace: str, image: str = releases.OPERATOR_IMAGE) -> list[dict[str, Any]]:
    """Everything that installs the operator in `namespace`, in apply order (CRD apart)."""
    return [
        service_account(namespace),
        cluster_role(),
        cluster_role_binding(namespace),
        role(namespace),
        role_binding(namespace),
        deployment(namespace, image),
    ]

"""The Helm chart's copy of what installs the operator (used by hack/generate.py).

charts/ocp-gpu/templates/operator.yaml: ServiceAccount, ClusterRole, ClusterRoleBinding,
Role, RoleBinding and Deployment from ocp_gpu/install/, with the namespace and the
operator image left to Helm (`.Release.Namespace`, `.Values.operator.image`).  Each RBAC
rule carries its `why` as a comment.  The rest of the chart is written by hand.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.install import manifests
from ocp_gpu.model import releases

TARGET = "charts/ocp-gpu/templates/operator.yaml"
HEADER = (
    "# generated from ocp_gpu/install/ (rbac.yaml, manifests.py) and ocp_gpu/model/releases.py;\n"
    "# edit those and run hack/generate.py\n"
)
# Placeholders a YAML dump keeps as plain scalars, swapped for Helm expressions afterwards.
NAMESPACE_MARK = "OCP-GPU-HELM-NAMESPACE"
IMAGE_MARK = "OCP-GPU-HELM-OPERATOR-IMAGE"
NAMESPACE_EXPR = "{{ .Release.Namespace }}"
IMAGE_EXPR = (
    '{{ (.Values.operator | default dict).image | default "' + releases.OPERATOR_IMAGE + '" | quote }}'
)


def _dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=1000)


def _with_commented_rules(document: dict[str, Any], rules: tuple[manifests.Rule, ...]) -> str:
    """A Role or ClusterRole whose rules each follow a comment saying why the operator holds it."""
    head = {key: value for key, value in document.items() if key != "rules"}
    lines = [_dump(head), "rules:\n"]
    for rule in rules:
        for line in textwrap.wrap(rule.why, width=100):
            lines.append(f"# {line}\n")
        lines.append(
            yaml.safe_dump([rule.as_manifest()], sort_keys=False, width=1000, default_flow_style=None)
        )
    return "".join(lines)


def render(root: Path | None = None) -> str:
    """The expected content of charts/ocp-gpu/templates/operator.yaml."""
    del root  # built from the imported package, not from files under a root
    rules = manifests.rules()
    documents = []
    for document in manifests.operator_manifests(NAMESPACE_MARK, IMAGE_MARK):
        if document["kind"] == "ClusterRole":
            documents.append(_with_commented_rules(document, rules.cluster))
        elif document["kind"] == "Role":
            documents.append(_with_commented_rules(document, rules.namespace))
        else:
            documents.append(_dump(document))
    text = "---\n".join(documents)
    return HEADER + text.replace(NAMESPACE_MARK, NAMESPACE_EXPR).replace(IMAGE_MARK, IMAGE_EXPR)


def helm_free(text: str, namespace: str, image: str) -> str:
    """The chart file with its Helm expressions replaced by values (for tests without helm)."""
    return text.replace(NAMESPACE_EXPR, namespace).replace(IMAGE_EXPR, image)

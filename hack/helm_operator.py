"""The Helm chart's copy of what installs the operator (used by hack/generate.py).

charts/ocp-gpu/templates/operator.yaml: ServiceAccount, ClusterRole, ClusterRoleBinding,
Role, RoleBinding and Deployment from ocp_gpu/install/, with the namespace and the
operator image left to Helm (`.Release.Namespace`, `.Values.operator.image`).  Each RBAC
rule carries its `why` as a comment.  The rest of the chart is written by hand.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.install import install_manifests
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
IMAGE_EXPR = '{{ include "ocp-gpu.operatorImage" . | quote }}'
# The Deployment's parts that NVIDIA's chart takes from the `operator` values (its templates/
# operator.yaml): each marker key or value below is swapped for a Helm block, and helm_free
# swaps the block back for the source's own text.
MARK = "OCP-GPU-HELM-"
OP = "(.Values.operator | default dict)"


@dataclasses.dataclass(frozen=True)
class Block:
    """A marker line of the dumped Deployment, the source's text for it, and its Helm text."""

    marker: str
    plain: str
    helm: str


def _release_defines() -> str:
    """The release's operator image, for ocp-gpu.operatorImage (_helpers.tpl)."""
    version = releases.OPERATOR_IMAGE.rpartition(":")[2]
    return (
        '{{ define "ocp-gpu.releaseOperatorImage" }}' + releases.OPERATOR_IMAGE + "{{ end }}\n"
        '{{ define "ocp-gpu.releaseOperatorVersion" }}' + version + "{{ end }}\n"
    )


def _indented(value: Any, indent: int) -> str:
    """`value` dumped as the block it is in the Deployment, at `indent` spaces."""
    text = yaml.safe_dump(value, sort_keys=False, width=1000)
    return "".join(" " * indent + line + "\n" for line in text.splitlines())


def _merged(fixed: dict[str, str], *extra: str) -> str:
    """A Helm expression: `fixed` (kept as is) with the maps of `extra` values added."""
    maps = " ".join(f"({OP}.{key} | default dict)" for key in extra)
    return f"(merge (fromJson `{json.dumps(fixed, separators=(',', ':'))}`) {maps})"


def _deployment_blocks(document: dict[str, Any]) -> tuple[dict[str, Any], list[Block]]:
    """The Deployment with markers, and a Block for each marker.

    The plain text is what the source's own Deployment dumps as in that place (helm_free puts
    it back); the Helm text takes the value from `operator` as NVIDIA's chart does.
    """
    marked = copy.deepcopy(document)
    pod = marked["spec"]["template"]
    container = pod["spec"]["containers"][0]
    blocks: list[Block] = []

    def swap(owner: dict[str, Any], key: str, indent: int, helm: str) -> None:
        # the plain block is the key and its value as dumped at this indent
        plain = _indented({key: owner[key]}, indent)
        owner[key] = f"{MARK}{len(blocks)}"
        blocks.append(Block(f"{' ' * indent}{key}: {MARK}{len(blocks)}\n", plain, helm))

    labels, pod_labels, annotations = (
        document["metadata"]["labels"],
        document["spec"]["template"]["metadata"]["labels"],
        document["spec"]["template"]["metadata"]["annotations"],
    )
    swap(
        marked["metadata"],
        "labels",
        2,
        f"  labels: {{{{- toYaml {_merged(labels, 'labels')} | nindent 4 }}}}\n",
    )
    swap(
        pod["metadata"],
        "labels",
        6,
        f"      labels: {{{{- toYaml {_merged(pod_labels, 'labels')} | nindent 8 }}}}\n",
    )
    swap(
        pod["metadata"],
        "annotations",
        6,
        f"      annotations: {{{{- toYaml {_merged(annotations, 'podAnnotations', 'annotations')}"
        " | nindent 8 }}\n",
    )
    swap(
        pod["spec"],
        "priorityClassName",
        6,
        f"{{{{- with {OP}.priorityClassName }}}}\n"
        "      priorityClassName: {{ . | quote }}\n{{- end }}\n",
    )
    # Scheduling and pull secrets: nothing in the source, NVIDIA's values when set.
    spec = pod["spec"]
    spec_items = list(spec.items())
    at = [key for key, _ in spec_items].index("serviceAccountName") + 1
    spec.clear()
    spec.update([*spec_items[:at], (MARK + "scheduling", "x"), *spec_items[at:]])
    scheduling = "".join(
        f"{{{{- with {OP}.{key} }}}}\n      {key}: {{{{- toYaml . | nindent 8 }}}}\n{{{{- end }}}}\n"
        for key in ("nodeSelector", "affinity", "tolerations")
    )
    secrets = (
        f"{{{{- with {OP}.imagePullSecrets }}}}\n      imagePullSecrets:\n"
        "{{- range . }}\n"
        '      - name: {{ if kindIs "map" . }}{{ .name | quote }}{{ else }}{{ . | quote }}{{ end }}\n'
        "{{- end }}\n"
        "{{- end }}\n"
    )
    blocks.append(Block(f"      {MARK}scheduling: x\n", "", secrets + scheduling))
    swap(
        container,
        "imagePullPolicy",
        8,
        f"        imagePullPolicy: {{{{ {OP}.imagePullPolicy"
        f" | default {json.dumps(container['imagePullPolicy'])} }}}}\n",
    )
    # logging.level debug (or a zap level number) or develMode: the operator's debug log
    container["args"] = [MARK + "verbose", *container["args"]]
    blocks.append(
        Block(
            f"        - {MARK}verbose\n",
            "",
            f"{{{{- $logging := {OP}.logging | default dict }}}}\n"
            '{{- if or $logging.develMode (has (toString $logging.level) (list "debug")) '
            '(regexMatch "^[1-9][0-9]*$" (toString ($logging.level | default ""))) }}\n'
            "        - --verbose\n{{- end }}\n",
        )
    )
    container["env"] = [*container["env"], {"name": MARK + "env"}]
    blocks.append(
        Block(
            f"        - name: {MARK}env\n",
            "",
            f"{{{{- with {OP}.env }}}}\n{{{{ toYaml . | indent 8 }}}}\n{{{{- end }}}}\n",
        )
    )
    swap(
        container,
        "resources",
        8,
        f"{{{{- with {OP}.resources }}}}\n"
        "        resources: {{- toYaml . | nindent 10 }}\n{{- end }}\n",
    )
    return marked, blocks


def _dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=1000)


def _with_commented_rules(document: dict[str, Any], rules: tuple[install_manifests.Rule, ...]) -> str:
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
    text, _ = _render_with_blocks()
    return text


def _render_with_blocks() -> tuple[str, list[Block]]:
    rules = install_manifests.rules()
    documents = []
    blocks: list[Block] = []
    for document in install_manifests.operator_manifests(NAMESPACE_MARK, IMAGE_MARK):
        if document["kind"] == "ClusterRole":
            documents.append(_with_commented_rules(document, rules.cluster))
        elif document["kind"] == "Role":
            documents.append(_with_commented_rules(document, rules.namespace))
        elif document["kind"] == "Deployment":
            marked, blocks = _deployment_blocks(document)
            dumped = _dump(marked)
            for block in blocks:
                assert dumped.count(block.marker) == 1, block.marker
                dumped = dumped.replace(block.marker, block.helm)
            documents.append(dumped)
        else:
            documents.append(_dump(document))
    text = "---\n".join(documents)
    text = text.replace(NAMESPACE_MARK, NAMESPACE_EXPR).replace(IMAGE_MARK, IMAGE_EXPR)
    return HEADER + _release_defines() + text, blocks


def helm_free(text: str, namespace: str, image: str) -> str:
    """The chart file with its Helm expressions replaced by the source's values (for tests
    without helm): the Deployment's blocks become the source's own text again."""
    _, blocks = _render_with_blocks()
    for block in blocks:
        text = text.replace(block.helm, block.plain)
    text = text.replace(_release_defines(), "")
    return text.replace(NAMESPACE_EXPR, namespace).replace(IMAGE_EXPR, image)

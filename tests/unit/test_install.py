"""We test these aspects of what installs the operator (ocp_gpu/install/):

- least privilege: every rule says why; no wildcard group, resource or verb; no Secrets;
  pods `delete` and `pods/eviction` exactly once, cluster-wide (the upgrade's pod deletion
  and drain); `bind` only on the privileged SCC's role, by name; no `escalate`, no
  `impersonate`;
- RBAC escalation prevention: every permission an operand template's Role or ClusterRole
  grants is held by the operator (else the API server refuses to create it), and every
  kind the templates contain can be applied and deleted where it lives;
- a malformed rbac.yaml entry is an error naming the entry and the key;
- the Deployment: `gpu-operator`, the ServiceAccount, `system-node-critical`, probes on
  /healthz and /readyz at the metrics port the command binds, restricted security
  context, requests/limits, OPERATOR_NAMESPACE from the downward API and every operand
  image of the release (digest-pinned where the release has digests), arguments the CLI
  accepts;
- the Helm chart's generated copy is the same objects as the source, with its namespace
  and image left to Helm.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from ocp_gpu import cli
from ocp_gpu.install import install_manifests
from ocp_gpu.kube import requesting
from ocp_gpu.model import releases
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands import operand_common
from tests import hack_scripts

ROOT = Path(__file__).resolve().parents[2]
RULES = install_manifests.rules()
ALL_RULES = [*RULES.cluster, *RULES.namespace]


def _load_hack(name: str) -> Any:
    return hack_scripts.load(name, on_path=True)


# --- least privilege ------------------------------------------------------------------------


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: f"{rule.resources}:{rule.verbs}")
def test_every_rule_says_why_and_has_no_wildcard(rule: install_manifests.Rule) -> None:
    assert len(rule.why) > 20
    assert "*" not in (*rule.api_groups, *rule.resources, *rule.verbs)
    assert "secrets" not in rule.resources
    assert not {"escalate", "impersonate", "deletecollection"} & set(rule.verbs)


def test_pods_delete_and_eviction_only_for_the_upgrade() -> None:
    deleting = [rule for rule in ALL_RULES if "pods" in rule.resources and "delete" in rule.verbs]
    evicting = [rule for rule in ALL_RULES if "pods/eviction" in rule.resources]
    assert len(deleting) == 1 and deleting[0] in RULES.cluster and "upgrade" in deleting[0].why
    assert len(evicting) == 1 and evicting[0].verbs == ("create",)


def test_bind_only_on_the_privileged_scc_role() -> None:
    binding = [rule for rule in ALL_RULES if "bind" in rule.verbs]
    assert [(rule.resources, rule.resource_names) for rule in binding] == [
        (("clusterroles",), ("system:openshift:scc:privileged",))
    ]


def test_a_malformed_entry_is_named() -> None:
    with pytest.raises(ValueError, match=r"cluster\[1\]: `verbs` is required"):
        install_manifests.parse_rules(
            "cluster:\n- {why: a, apiGroups: [''], resources: [nodes], verbs: [get]}\n"
            "- {why: b, apiGroups: [''], resources: [pods]}\n"
        )
    with pytest.raises(ValueError, match=r"namespace\[0\]: unknown keys \['verb'\]"):
        install_manifests.parse_rules(
            "namespace:\n- {why: a, apiGroups: [''], resources: [pods], verb: [get]}\n"
        )


# --- escalation prevention: the operand templates ------------------------------------------


def _held(group: str, resource: str, verb: str, name: str | None, cluster_wide: bool) -> bool:
    rules = RULES.cluster if cluster_wide else ALL_RULES
    return any(
        group in rule.api_groups
        and resource in rule.resources
        and verb in rule.verbs
        and (not rule.resource_names or (name is not None and name in rule.resource_names))
        for rule in rules
    )


def _template_documents() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object of every operand template, rendered on OpenShift with placeholder values."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templating.templates_dir())),
        undefined=jinja2.ChainableUndefined,
    )
    for path in sorted(templating.templates_dir().glob("state-*/*.yaml.j2")):
        relative = path.relative_to(templating.templates_dir()).as_posix()
        text = environment.get_template(relative).render(
            openshift=True, trusted_ca={"name": "x"}, scc_cluster_role=operand_common.SCC_CLUSTER_ROLE
        )
        for document in yaml.safe_load_all(text):
            if document:
                yield relative, document


TEMPLATE_DOCUMENTS = list(_template_documents())


def test_the_templates_hold_rbac_objects() -> None:
    kinds = {document["kind"] for _, document in TEMPLATE_DOCUMENTS}
    assert {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "DaemonSet"} <= kinds


@pytest.mark.parametrize(
    "template, document",
    [(t, d) for t, d in TEMPLATE_DOCUMENTS if d["kind"] in ("Role", "ClusterRole")],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_the_operator_holds_what_an_operand_role_grants(template: str, document: dict[str, Any]) -> None:
    cluster_wide = document["kind"] == "ClusterRole"
    missing = [
        f"{group or 'core'}/{resource} {verb}"
        for rule in document["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in (rule.get("resourceNames") or [None])
        if not _held(group, resource, verb, name, cluster_wide)
    ]
    assert not missing, f"{template} grants what the operator does not hold: add to ocp_gpu/install/rbac.yaml"


@pytest.mark.parametrize(
    "template, document", TEMPLATE_DOCUMENTS, ids=lambda value: value if isinstance(value, str) else ""
)
def test_the_operator_may_apply_and_delete_every_templated_kind(
    template: str, document: dict[str, Any]
) -> None:
    prefix, plural, namespaced = requesting.RESOURCES[(document["apiVersion"], document["kind"])]
    group = "" if prefix == "/api/v1" else prefix.split("/")[2]
    for verb in ("create", "patch", "delete"):
        assert _held(group, plural, verb, None, cluster_wide=not namespaced), f"{template}: {plural} {verb}"
    if document["kind"] in ("RoleBinding", "ClusterRoleBinding"):
        ref = document["roleRef"]
        if ref["kind"] == "ClusterRole" and ref["name"] == operand_common.SCC_CLUSTER_ROLE:
            # a role the operator does not create: it must be allowed to bind it by name
            assert _held("rbac.authorization.k8s.io", "clusterroles", "bind", ref["name"], True), template


# --- the Deployment --------------------------------------------------------------------------

DEPLOYMENT = install_manifests.deployment(install_manifests.OLM_NAMESPACE)
POD = DEPLOYMENT["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]


def test_deployment_names_and_scheduling() -> None:
    assert DEPLOYMENT["metadata"] == {
        "name": "gpu-operator",
        "namespace": "nvidia-gpu-operator",
        "labels": install_manifests.APP_LABELS,
    }
    assert POD["serviceAccountName"] == "gpu-operator"
    assert POD["priorityClassName"] == "system-node-critical"
    selector = DEPLOYMENT["spec"]["selector"]["matchLabels"]
    assert selector.items() <= DEPLOYMENT["spec"]["template"]["metadata"]["labels"].items()


def test_deployment_probes_reach_the_port_the_command_binds() -> None:
    bind = CONTAINER["args"][CONTAINER["args"].index("--metrics-bind") + 1]
    port = int(bind.rpartition(":")[2])
    assert CONTAINER["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert CONTAINER["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert CONTAINER["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_deployment_command_is_one_the_cli_accepts() -> None:
    assert CONTAINER["command"] == ["ocp-gpu"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        cli.main([*CONTAINER["args"], "--help"])
    assert exit_info.value.code == 0
    flags = [arg for arg in CONTAINER["args"] if arg.startswith("--")]
    assert all(flag in out.getvalue() for flag in flags)


def test_deployment_security_context_is_restricted() -> None:
    assert POD["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    context = CONTAINER["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["readOnlyRootFilesystem"] is True
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(POD)


def test_deployment_resources_cover_the_measured_rss() -> None:
    resources = CONTAINER["resources"]
    assert resources == install_manifests.RESOURCES
    mib = {"Mi": 1, "Gi": 1024}

    def to_mib(quantity: str) -> int:
        return int(quantity[:-2]) * mib[quantity[-2:]]

    # bench/results/drivers-5000.json: operator RSS peak 261.3 MiB; drivers-1000.json idle 160.8 MiB
    peak_5000 = yaml.safe_load((ROOT / "bench/results/drivers-5000.json").read_text())["rss_peak_mib"]
    idle_1000 = yaml.safe_load((ROOT / "bench/results/drivers-1000.json").read_text())["rss_idle_mib"]
    assert to_mib(resources["limits"]["memory"]) >= 1.5 * peak_5000
    assert to_mib(resources["requests"]["memory"]) >= idle_1000


def test_deployment_env_carries_the_namespace_and_every_release_image() -> None:
    env = {item["name"]: item for item in CONTAINER["env"]}
    assert env["OPERATOR_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert set(releases.RELEASE_IMAGES) <= set(env)
    for name in releases.RELEASE_IMAGES:
        assert env[name]["value"] == releases.RELEASE_DIGESTS.get(name, releases.RELEASE_IMAGES[name])
    assert "@sha256:" in env["DEVICE_PLUGIN_IMAGE"]["value"]


# --- the Helm chart's copy --------------------------------------------------------------------


def test_the_chart_copy_is_the_source_with_helm_namespace_and_image() -> None:
    helm_operator = _load_hack("helm_operator")
    text = (ROOT / helm_operator.TARGET).read_text()
    assert "{{ .Release.Namespace }}" in text and ".Values.operator" in text
    plain = helm_operator.helm_free(text, "gpu-operator", "example.com/ocp-gpu:test")
    documents = [document for document in yaml.safe_load_all(plain) if document]
    assert documents == install_manifests.operator_manifests("gpu-operator", "example.com/ocp-gpu:test")
    # every rule's reason travels with it as a comment
    assert all(rule.why.split()[0] in text for rule in ALL_RULES)

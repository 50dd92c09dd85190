"""We test these aspects of `model/policy/api_values.py` (bug C of issue 8: values the CRD accepts and
the API server refuses when the DaemonSet is applied):

- each value the API server refuses (each reproduced on the local control plane: resource
  names and amounts, env names, label and annotation keys and values, tolerations, object
  names, host paths, probe ranges, pod security context ids and sysctls, maxUnavailable
  above 100%) is an error naming the field path, showing the value (cut to a few dozen
  characters) and saying the fix;
- values the API server accepts are never refused (a wrong rule would break a working
  policy), and a pull secret that cannot name a Secret is only a warning (the API server
  takes it);
- through `validate_policy`, so the policy gets `InvalidSpec` and nothing is applied;
- the YAML body of a server-side apply carries characters beyond U+FFFF as YAML escapes
  (the API server refused the surrogate pairs JSON uses).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from ocp_gpu.kube import requesting
from ocp_gpu.model.policy import api_values, policy_checks, policy_parser
from ocp_gpu.model.policy.policy_problems import Severity


def problems(spec: dict[str, Any]) -> list[api_values.PolicyProblem]:
    return api_values.problems(policy_parser.parse_policy(spec))


REFUSED = [
    # (spec, field of the problem, a fragment of its message)
    ({"driver": {"resources": {"requests": {"a": "1"}}}}, "spec.driver.resources.requests[a]", "'a' is not"),
    (
        {"toolkit": {"resources": {"limits": {"pods": "1"}}}},
        "spec.toolkit.resources.limits[pods]",
        "not a resource",
    ),
    (
        {"driver": {"resources": {"requests": {"requests.cpu": "1"}}}},
        "spec.driver.resources.requests[requests.cpu]",
        "not a resource",
    ),
    (
        {"driver": {"resources": {"requests": {"foo/bar/baz": "1"}}}},
        "spec.driver.resources.requests[foo/bar/baz]",
        "more than one '/'",
    ),
    (
        {"driver": {"resources": {"requests": {"cpu": "-1"}}}},
        "spec.driver.resources.requests[cpu]",
        "negative",
    ),
    (
        {"driver": {"resources": {"requests": {"nvidia.com/gpu": "1"}}}},
        "spec.driver.resources.requests[nvidia.com/gpu]",
        "without a limit",
    ),
    (
        {"driver": {"resources": {"requests": {"example.com/a": "1"}, "limits": {"example.com/a": "2"}}}},
        "spec.driver.resources.requests[example.com/a]",
        "differs from the limit",
    ),
    (
        {"driver": {"resources": {"limits": {"example.com/a": "500m"}}}},
        "spec.driver.resources.limits[example.com/a]",
        "whole units",
    ),
    (
        {"devicePlugin": {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}},
        "spec.devicePlugin.resources.requests[cpu]",
        "above the limit",
    ),
    (
        {"gfd": {"resources": {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "2Mi"}}}},
        "spec.gfd.resources",
        "without cpu or memory",
    ),
    ({"driver": {"env": [{"name": "A=B", "value": "1"}]}}, "spec.driver.env[0].name", "'A=B'"),
    ({"toolkit": {"env": [{"name": "\U0001f525"}]}}, "spec.toolkit.env[0].name", "printable ASCII"),
    (
        {"validator": {"plugin": {"env": [{"name": "ok"}, {"name": "é"}]}}},
        "spec.validator.plugin.env[1].name",
        "printable ASCII",
    ),
    ({"daemonsets": {"labels": {"a/b/c": "v"}}}, "spec.daemonsets.labels[a/b/c]", "more than one '/'"),
    ({"daemonsets": {"labels": {"Example.com/k": "v"}}}, "spec.daemonsets.labels[Example.com/k]", "prefix"),
    ({"daemonsets": {"labels": {"k": "x" * 64}}}, "spec.daemonsets.labels[k]", "longer than 63"),
    ({"daemonsets": {"labels": {"k": "-a"}}}, "spec.daemonsets.labels[k]", "start and end"),
    (
        {"daemonsets": {"annotations": {"\U0001f525": "v"}}},
        "spec.daemonsets.annotations[\U0001f525]",
        "not an annotation key",
    ),
    ({"daemonsets": {"annotations": {"k": "x" * 300_000}}}, "spec.daemonsets.annotations", "bytes"),
    (
        {"dcgmExporter": {"serviceMonitor": {"additionalLabels": {"k": "a b"}}}},
        "spec.dcgmExporter.serviceMonitor.additionalLabels[k]",
        "label value",
    ),
    (
        {"daemonsets": {"tolerations": [{"key": "\U0001f525", "operator": "Exists"}]}},
        "spec.daemonsets.tolerations[0].key",
        "taint key",
    ),
    (
        {"daemonsets": {"tolerations": [{"operator": "Equal", "value": "v"}]}},
        "spec.daemonsets.tolerations[0].operator",
        "without a key",
    ),
    (
        {"daemonsets": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}},
        "spec.daemonsets.tolerations[0].value",
        "operator Exists",
    ),
    (
        {"daemonsets": {"tolerations": [{"key": "k", "value": "a b"}]}},
        "spec.daemonsets.tolerations[0].value",
        "value",
    ),
    (
        {"daemonsets": {"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]}},
        "spec.daemonsets.tolerations[0].tolerationSeconds",
        "NoExecute",
    ),
    ({"daemonsets": {"priorityClassName": "UPPER"}}, "spec.daemonsets.priorityClassName", "PriorityClass"),
    ({"operator": {"runtimeClass": "\U0001f525"}}, "spec.operator.runtimeClass", "RuntimeClass"),
    ({"driver": {"secretEnv": "My_Secret"}}, "spec.driver.secretEnv", "Secret"),
    ({"hostPaths": {"rootFS": "/a/../b"}}, "spec.hostPaths.rootFS", "'..'"),
    ({"toolkit": {"installDir": ".."}}, "spec.toolkit.installDir", "'..'"),
    (
        {"driver": {"readinessProbe": {"periodSeconds": -1}}},
        "spec.driver.readinessProbe.periodSeconds",
        "out of range",
    ),
    (
        {"daemonsets": {"podSecurityContext": {"supplementalGroups": [612] * 299 + [-1]}}},
        "spec.daemonsets.podSecurityContext.supplementalGroups[299]",
        "not a group id",
    ),
    (
        {"daemonsets": {"podSecurityContext": {"runAsUser": 2**31}}},
        "spec.daemonsets.podSecurityContext.runAsUser",
        "not a user or group id",
    ),
    (
        {"daemonsets": {"podSecurityContext": {"sysctls": [{"name": "\U0001f525", "value": "1"}]}}},
        "spec.daemonsets.podSecurityContext.sysctls[0].name",
        "not a sysctl",
    ),
    (
        {"daemonsets": {"podSecurityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced"}] * 2}}},
        "spec.daemonsets.podSecurityContext.sysctls[1].name",
        "twice",
    ),
    (
        {"daemonsets": {"rollingUpdate": {"maxUnavailable": "101%"}}},
        "spec.daemonsets.rollingUpdate.maxUnavailable",
        "above 100%",
    ),
]


@pytest.mark.parametrize(("spec", "field", "fragment"), REFUSED, ids=[r[1] for r in REFUSED])
def test_a_value_the_apiserver_refuses_is_an_error_naming_field_value_and_fix(
    spec: dict[str, Any], field: str, fragment: str
) -> None:
    found = [p for p in problems(spec) if p.severity is Severity.ERROR]
    assert [p.field for p in found] == [field], found
    assert fragment in found[0].message
    assert found[0].fix
    # Shown values are cut: a 300 KB value never floods the status.
    assert len(found[0].message) < 300


ACCEPTED = [
    {"driver": {"resources": {"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"}}}},
    {"driver": {"resources": {"limits": {"cpu": "1e3", "memory": "1.5Gi"}, "requests": {"cpu": "1"}}}},
    {"driver": {"resources": {"limits": {"nvidia.com/gpu": "1"}}}},
    {"driver": {"resources": {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 2}}}},
    {"driver": {"resources": {"requests": {"kubernetes.io/foo": "1"}}}},
    {
        "driver": {
            "resources": {
                "limits": {"hugepages-2Mi": "2Mi", "memory": "1Gi"},
                "requests": {"hugepages-2Mi": "2Mi"},
            }
        }
    },
    {"driver": {"env": [{"name": "a b"}, {"name": "1A"}, {"name": "a.b-c"}]}},
    {"daemonsets": {"labels": {"example.com/team": "", "k": "v_1.2-3"}}},
    {"daemonsets": {"annotations": {"example.com/note": "\U0001f525 any text: with spaces"}}},
    {
        "daemonsets": {
            "tolerations": [{"operator": "Exists"}, {"key": "k", "value": "v", "effect": "NoSchedule"}]
        }
    },
    {
        "daemonsets": {
            "tolerations": [
                {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -5}
            ]
        }
    },
    {
        "daemonsets": {
            "podSecurityContext": {"supplementalGroups": [612] * 300, "runAsUser": 0, "fsGroup": 2**31 - 1}
        }
    },
    {"daemonsets": {"rollingUpdate": {"maxUnavailable": "100%"}}},
    {"hostPaths": {"rootFS": "relative/ok"}},
    {"driver": {"startupProbe": {"periodSeconds": 0, "failureThreshold": 0}}},
]


@pytest.mark.parametrize("spec", ACCEPTED)
def test_a_value_the_apiserver_accepts_is_never_refused(spec: dict[str, Any]) -> None:
    assert [p for p in problems(spec) if p.severity is Severity.ERROR] == []


@pytest.mark.parametrize("secret", ["\U0001f525", "", "101%", "UPPER"])
def test_a_pull_secret_that_cannot_name_a_secret_is_a_warning(secret: str) -> None:
    found = problems({"toolkit": {"imagePullSecrets": ["ok", secret]}})
    assert [(p.field, p.severity) for p in found] == [("spec.toolkit.imagePullSecrets[1]", Severity.WARNING)]


def test_validate_policy_reports_them_so_the_policy_is_invalid() -> None:
    policy = policy_parser.parse_policy({"driver": {"resources": {"requests": {"a": 1}}}})
    found = policy_checks.validate_policy(policy, {})
    assert "spec.driver.resources.requests[a]" in [p.field for p in found]


def test_a_long_value_is_shown_cut() -> None:
    found = problems({"daemonsets": {"priorityClassName": "X" * 10_000}})
    assert len(found) == 1 and "10000 chars" in found[0].message and len(found[0].message) < 150


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", "1/2"), ("1Gi", str(2**30)), ("2e3", "2000"), ("1.5k", "1500"), (".5", "1/2"), ("+3", "3")],
)
def test_quantities_parse_exactly(text: str, value: str) -> None:
    from fractions import Fraction

    assert api_values.parse_quantity(text) == Fraction(value)


@pytest.mark.parametrize("text", ["", "1 Gi", "1gi", "abc", "1.2.3"])
def test_not_a_quantity(text: str) -> None:
    assert api_values.parse_quantity(text) is None


@pytest.mark.parametrize(
    "value",
    ["\U0001f525", "a\\ud83d", "\\\U0001f525", "x\u00e9\U0002cd35y", "plain", "\u0085\u2028", 'q"\\'],
)
def test_the_apply_body_is_ascii_yaml_that_reads_back_the_same(value: str) -> None:
    body = requesting.yaml_body({"metadata": {"annotations": {"k": value}}})
    assert body.isascii()
    # NB: PyYAML reads YAML 1.1 as the apiserver's parser does for these escapes.
    assert yaml.safe_load(body.decode())["metadata"]["annotations"]["k"] == value
    assert b"\\ud8" not in body.lower().replace(b"\\\\ud8", b"")


@pytest.mark.parametrize(
    ("spec", "refused"),
    [
        ({"driver": {"env": [{"name": "A=B"}]}}, True),
        ({"toolkit": {"env": [{"name": "\U0001f525"}]}}, True),
        ({"driver": {"env": [{"name": "a b.c-1"}]}}, False),
        ({"daemonsets": {"priorityClassName": "UPPER"}}, True),
        ({"daemonsets": {"priorityClassName": "system-node-critical"}}, False),
        ({"operator": {"runtimeClass": "nvidia_x"}}, True),
        ({"operator": {"runtimeClass": "nvidia"}}, False),
    ],
)
def test_the_crd_refuses_at_admission_what_every_operator_would_fail_on(
    spec: dict[str, Any], refused: bool
) -> None:
    from tests.unit._crd_schema import schema_errors, spec_schema

    assert bool(schema_errors(spec_schema(), spec)) is refused
    # and the pure layer agrees, for a spec that reaches the operator some other way (render)
    assert bool([p for p in problems(spec) if p.severity is Severity.ERROR]) is refused

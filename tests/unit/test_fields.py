"""We test these aspects of the field list (ocp_gpu/model/policy/fields.py) and its documentation:

- every field of our CRD is covered by a rule, and every rule names a field of our CRD;
- no default (ours in the CRD, NVIDIA's in the OperatorHub example) is reported: a policy that
  sets nothing unusual has no `UnsupportedSetting`;
- a refused or deprecated field set to a value that would change something is reported by path,
  with what ocp-gpu does instead; honoured fields never are; NVIDIA's OperatorHub example reports
  exactly its two settings ocp-gpu does not act on;
- docs/clusterpolicy-fields.md is generated from the CRD and the list (drift fails the test).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from ocp_gpu.model.policy import fields
from tests import hack_scripts
from tests.unit import _nvidia_fields as nv
from tests.unit._crd_schema import apply_defaults, default_leaves, spec_schema

ROOT = Path(__file__).resolve().parents[2]
OPERATORHUB = Path(__file__).parent / "data" / "nvidia-operatorhub-clusterpolicy.yaml"


def load_generator() -> ModuleType:
    return hack_scripts.load("gen_field_docs")


def reported(spec: dict[str, Any]) -> list[str]:
    return [setting.path for setting in fields.unsupported_settings(spec)]


def test_every_crd_field_has_a_rule() -> None:
    uncovered = [path for path, _ in load_generator().leaves(spec_schema()) if fields.rule_for(path) is None]
    assert uncovered == []


def test_every_rule_names_a_crd_field() -> None:
    ours = nv.our_paths()
    assert [rule.path for rule in fields.RULES if rule.path not in ours] == []
    assert len({rule.path for rule in fields.RULES}) == len(fields.RULES)


def test_every_quiet_value_names_a_field_below_its_rule() -> None:
    ours = nv.our_paths()
    for rule in fields.RULES:
        for relative in rule.quiet:
            path = f"{rule.path}.{relative}" if relative else rule.path
            assert path in ours, path


@pytest.mark.parametrize(("path", "default"), [(".".join(p), d) for p, d, _ in default_leaves(spec_schema())])
def test_crd_defaults_are_never_reported(path: str, default: object) -> None:
    spec: dict[str, Any] = {}
    node = spec
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = default
    assert reported(spec) == []


def test_an_empty_policy_as_stored_reports_nothing() -> None:
    assert reported(apply_defaults(spec_schema(), {})) == []


def test_operatorhub_example_reports_no_unimplemented_setting() -> None:
    spec = apply_defaults(spec_schema(), yaml.safe_load(OPERATORHUB.read_text())["spec"])
    # spec.mig.strategy is honoured: it is the device plugin's and GFD's MIG strategy; the DCGM
    # exporter's serviceMonitor is made where monitoring.coreos.com is served (else a condition).
    assert reported(spec) == []


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ({"gds": {"hostNetwork": True}}, "spec.gds.hostNetwork", "driver.hostNetwork"),
        ({"driver": {"useOpenKernelModules": True}}, "spec.driver.useOpenKernelModules", "kernelModuleType"),
        ({"psp": {"enabled": True}}, "spec.psp.enabled", "removed in Kubernetes 1.25"),
        (
            {"sandboxWorkloads": {"mode": "kata"}},
            "spec.sandboxWorkloads.mode",
            "NVIDIA deprecated its Kata manager",
        ),
        (
            {"ccManager": {"defaultMode": "on"}},
            "spec.ccManager.defaultMode",
            "k8s-cc-manager",
        ),
        ({"operator": {"labels": {"team": "gpu"}}}, "spec.operator.labels.team", "daemonsets.labels"),
        ({"gds": {"args": ["-v"]}}, "spec.gds.args", "no container either"),
    ],
)
def test_a_set_unimplemented_field_is_named_with_what_happens_instead(
    spec: dict[str, Any], path: str, words: str
) -> None:
    settings = fields.unsupported_settings(spec)
    assert [setting.path for setting in settings] == [path]
    message = fields.describe(settings)
    assert message.startswith(f"{path}=")
    assert words in message


@pytest.mark.parametrize(
    "spec",
    [
        {"driver": {"version": "570.124.06", "env": [{"name": "A", "value": "1"}], "usePrecompiled": True}},
        {"daemonsets": {"tolerations": [{"key": "k", "operator": "Exists"}], "labels": {"a": "b"}}},
        {"toolkit": {"installDir": "/opt/nvidia", "enabled": False}},
        {"dcgm": {"enabled": False}, "hostPaths": {"rootFS": "/"}, "gds": {"enabled": False}},
        {
            "driver": {"licensingConfig": {"nlsEnabled": True}},
            "devicePlugin": {"imagePullPolicy": "IfNotPresent"},
        },
    ],
)
def test_honoured_fields_and_values_that_change_nothing_are_not_reported(spec: dict[str, Any]) -> None:
    assert reported(spec) == []


def test_the_every_field_policy_reports_every_refused_leaf_it_sets() -> None:
    spec = nv.every_field_spec()
    found = set(reported(spec))
    for path in nv.leaves():
        rule = fields.rule_for(path)
        assert rule is not None, path
        concrete = path.replace("[]", "").replace(
            "{}", ".cpu" if path.endswith(("limits{}", "requests{}")) else ".example"
        )
        if rule.support is fields.Support.HONOURED:
            assert concrete not in found, path
    assert {
        "spec.kataManager.config.artifactsDir",
        "spec.gds.args",
        "spec.psp.enabled",
        "spec.ccManager.defaultMode",
    } <= found
    assert (
        not {
            "spec.driver.rdma.enabled",
            "spec.gds.enabled",
            "spec.driver.secretEnv",
            "spec.vgpuManager.kernelModuleConfig.name",
            "spec.vfioManager.driverManager.image",
        }
        & found
    )


def test_field_docs_are_up_to_date() -> None:
    generator = load_generator()
    assert (ROOT / generator.TARGET).read_text() == generator.render(), "run hack/gen_field_docs.py"


def test_field_docs_check_fails_when_stale(tmp_path: Path) -> None:
    generator = load_generator()
    for relative in (generator.CRD, generator.NVIDIA_PATHS, generator.TARGET):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text((ROOT / relative).read_text())
    assert generator.render(tmp_path) == (tmp_path / generator.TARGET).read_text()
    crd = tmp_path / generator.CRD
    crd.write_text(crd.read_text().replace("useHostMofed:", "useHostMofedX:", 1))
    assert "`spec.driver.rdma.useHostMofedX` (ocp-gpu)" in generator.render(tmp_path)
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "gen_field_docs.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_a_long_report_stays_within_the_bound_and_names_every_section() -> None:
    settings = fields.unsupported_settings(nv.every_field_spec())
    for limit in (2048, 1024):
        message = fields.describe(settings, limit)
        assert len(message) <= limit
        assert message.endswith("(see docs/clusterpolicy-fields.md)")
        for section in {".".join(setting.path.split(".")[:2]) for setting in settings}:
            assert section in message, section


def test_a_rule_with_many_settings_names_them_compactly() -> None:
    spec = {"ccManager": {"defaultMode": "on", "image": "x", "version": "1", "repository": "r"}}
    message = fields.describe(fields.unsupported_settings(spec))
    assert message.startswith(
        "spec.ccManager.{defaultMode,image,version,repository}: not implemented; not deployed yet:"
    ), message

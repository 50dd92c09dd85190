"""We test these aspects of the Helm chart (charts/ocp-gpu) with real helm, without a server:

- every ClusterPolicy spec section of the CRD is a top-level value and in the template's list;
- `helm lint --strict` is clean, with NFD on and off;
- golden `helm template` output for the ClusterPolicy (defaults; a values file touching many
  sections) and the NodeFeatureRule (only when NFD's API is announced);
- any spec the CRD accepts (hypothesis), given as values, is accepted by helm's
  values.schema.json and makes a ClusterPolicy the CRD accepts; a field NVIDIA's chart does not
  map (operator.defaultRuntime, devicePlugin.resourceConfig, ...) reaches it as given (the fields
  it maps: test_helm_nvidia_inputs.py);
- bad values are refused by helm before anything is applied, naming the field;
- operator.image reaches the Deployment (and not the ClusterPolicy); every namespaced object of
  ours is in the release's namespace.

helm comes from the `helm_tools` fixture (built from Go modules on first use).
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings

from ocp_gpu_harness import helm as helm_harness

from . import _crd_schema

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ocp-gpu"
GOLDEN = Path(__file__).parent / "golden" / "helm"
NFD_API = "nfd.k8s-sigs.io/v1alpha1/NodeFeatureRule"
NO_NFD = ("--set", "nfd.enabled=false")


class _GoLikeLoader(yaml.SafeLoader):
    """PyYAML, reading plain scalars the way the Go YAML that helm and kubectl use does.

    NB: a plain scalar such as `.1E+400` looks like a float but overflows; Go's YAML keeps it a
    string (helm's toYaml therefore leaves it unquoted), PyYAML makes it `inf`. Read as Go does,
    so the round trip compares what the API server would receive."""

    def construct_yaml_float(self, node: yaml.Node) -> Any:
        value = super().construct_yaml_float(node)
        literal = str(node.value).lower().lstrip("+-")
        if math.isinf(value) and literal != ".inf":
            return str(node.value)
        return value


_GoLikeLoader.add_constructor("tag:yaml.org,2002:float", _GoLikeLoader.construct_yaml_float)


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=_GoLikeLoader) if d]


def policy_of(text: str) -> dict[str, Any]:
    (policy,) = [d for d in documents(text) if d["kind"] == "ClusterPolicy"]
    return policy


def crd_sections() -> list[str]:
    return list(_crd_schema.spec_schema()["properties"])


def test_every_policy_section_is_a_value_and_in_the_template() -> None:
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    match = re.search(r'define "ocp-gpu.policySections" -}}\n(.*)\n', helpers)
    assert match, "ocp-gpu.policySections not found in _helpers.tpl"
    assert match.group(1).split() == crd_sections()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert [s for s in crd_sections() if s not in values] == []


@pytest.mark.parametrize("nfd", ["true", "false"])
def test_lint_is_clean(helm: helm_harness.Helm, chart: Path, nfd: str) -> None:
    out = helm.check("lint", "--strict", str(chart), "--set", f"nfd.enabled={nfd}")
    assert "0 chart(s) failed" in out
    assert "[WARNING]" not in out and "[ERROR]" not in out


def _golden(name: str, rendered: str, update_golden: bool) -> None:
    path = GOLDEN / name
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rendered)
    assert path.is_file(), f"{path} missing: run pytest tests/unit --update-golden"
    assert rendered == path.read_text(), f"{name} differs from its golden file (--update-golden)"


@pytest.mark.parametrize(
    ("golden", "args"),
    [
        ("clusterpolicy-defaults.yaml", ()),
        ("clusterpolicy-values.yaml", ("--values", str(Path(__file__).parent / "data" / "helm-values.yaml"))),
    ],
)
def test_template_clusterpolicy_golden(
    helm: helm_harness.Helm, chart: Path, update_golden: bool, golden: str, args: tuple[str, ...]
) -> None:
    rendered = helm.template(chart, *NO_NFD, *args, "--show-only", "templates/clusterpolicy.yaml")
    policy = policy_of(rendered)
    assert policy["metadata"]["name"] == "cluster-policy"
    assert _crd_schema.schema_errors(_crd_schema.spec_schema(), policy["spec"]) == []
    _golden(golden, rendered, update_golden)


def contains(big: Any, small: Any) -> bool:
    """Every map entry of `small` is in `big` (recursively); anything else is equal."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and contains(big[k], v) for k, v in small.items())
    return bool(big == small)


def test_values_file_sections_reach_the_policy(helm: helm_harness.Helm, chart: Path) -> None:
    values = yaml.safe_load((Path(__file__).parent / "data" / "helm-values.yaml").read_text())
    policy = policy_of(
        helm.template(chart, *NO_NFD, "--values", str(Path(__file__).parent / "data" / "helm-values.yaml"))
    )
    for section in crd_sections():
        expected = dict(values.get(section) or {})
        if section == "operator":
            expected.pop("image", None)  # the Deployment's (test_operator_image_reaches_the_deployment_only)
        assert contains(policy["spec"].get(section, {}), expected), section


def test_nodefeaturerule_only_with_nfd_api(helm: helm_harness.Helm, chart: Path, update_golden: bool) -> None:
    without = documents(helm.template(chart, *NO_NFD))
    assert "NodeFeatureRule" not in {d["kind"] for d in without}
    rendered = helm.template(
        chart, *NO_NFD, "--api-versions", NFD_API, "--show-only", "templates/nodefeaturerule.yaml"
    )
    (rule,) = documents(rendered)
    assert rule["spec"]["rules"][0]["labels"] == {"feature.node.kubernetes.io/pci-10de.present": "true"}
    _golden("nodefeaturerule.yaml", rendered, update_golden)
    off = helm.template(chart, *NO_NFD, "--set", "nfd.nodefeaturerules=false", "--api-versions", NFD_API)
    assert "NodeFeatureRule" not in {d["kind"] for d in documents(off)}


def test_nfd_dependency_follows_nfd_enabled(helm: helm_harness.Helm, chart: Path) -> None:
    on = {(d["kind"], d["metadata"]["name"]) for d in documents(helm.template(chart))}
    off = {(d["kind"], d["metadata"]["name"]) for d in documents(helm.template(chart, *NO_NFD))}
    nfd = {name for kind, name in on - off}
    assert any("node-feature-discovery-worker" in name for name in nfd)
    assert not any("node-feature-discovery" in name for _, name in off)


@functools.cache
def nvidia_mapped() -> frozenset[tuple[str, str]]:
    """(section, key) of the values NVIDIA's chart maps into its ClusterPolicy its own way (its
    values.yaml's, and the few its template reads beyond them); the others are copied as given."""
    nvidia = yaml.safe_load(
        (Path(__file__).parent / "data" / "nvidia-helm" / "nvidia-values.yaml").read_text()
    )
    mapped = {
        (section, key) for section, values in nvidia.items() if isinstance(values, dict) for key in values
    }
    template_only = {
        "operator": ("defaultGPUMode", "metrics", "labels", "podAnnotations"),
        "validator": ("cuda", "driver", "toolkit", "vfioPCI", "vgpuManager", "vgpuDevices", "version"),
        "driver": ("livenessProbe", "readinessProbe", "args", "useNvidiaDriverCRD"),
        "dcgmExporter": ("hpcJobMapping", "podLabelAllowlistRegex", "config", "args", "imagePullSecrets"),
        "hostPaths": ("kubeletRootDir",),
        "kataManager": ("repository", "image", "version", "args"),
        "nodeStatusExporter": ("env", "args", "version"),
        "dcgm": ("imagePullSecrets",),
        "gfd": ("args",),
        "migManager": ("args",),
        "vgpuManager": ("args",),
        "vgpuDeviceManager": ("resources", "args"),
        "vfioManager": ("args",),
        "ccManager": ("env", "args"),
    }
    return frozenset(mapped | {(section, key) for section, keys in template_only.items() for key in keys})


@settings(
    max_examples=12,
    deadline=None,
    # NB: examples saved by an earlier schema replay as "flaky" data generation; each run stands alone.
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=_crd_schema.values(_crd_schema.spec_schema()))
# A quantity that looks like a float but overflows one (found by this test): stays a string.
@example(spec={"driver": {"resources": {"limits": {"cpu": ".1E+400"}}}})
@example(spec={"operator": {"defaultRuntime": "crio"}})
def test_any_accepted_spec_given_as_values_renders_a_valid_policy(
    helm: helm_harness.Helm, chart: Path, tmp_path: Path, spec: dict[str, Any]
) -> None:
    """helm's schema accepts any spec the CRD accepts, given as values; the ClusterPolicy made
    from it is one the CRD accepts; a field NVIDIA's chart does not map reaches it as given
    (test_helm_nvidia_inputs.py checks the fields it maps against NVIDIA's own rendering)."""
    cdi = spec.get("cdi") or {}
    # NRI without CDI (or without the toolkit): NVIDIA's chart refuses it, and so does ours
    # (test_helm_nvidia_inputs.py).
    assume(
        not (
            cdi.get("nriPluginEnabled")
            and (cdi.get("enabled") is False or (spec.get("toolkit") or {}).get("enabled") is False)
        )
    )
    values_file = tmp_path / "values.json"
    values_file.write_text(json.dumps({**spec, "nfd": {"enabled": False}}))
    policy = policy_of(
        helm.template(chart, "--values", str(values_file), "--show-only", "templates/clusterpolicy.yaml")
    )
    assert _crd_schema.schema_errors(_crd_schema.spec_schema(), policy["spec"]) == []
    mapped = nvidia_mapped()
    for section, values in spec.items():
        for key, value in (values or {}).items():
            if (section, key) not in mapped:
                assert policy["spec"][section][key] == value, f"{section}.{key}"


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("driver.version=5", "/driver/version"),
        ("driver.upgradePolicy.maxParallelUpgrades=-1", "/driver/upgradePolicy/maxParallelUpgrades"),
        ("nfd.enabled=maybe", "/nfd/enabled"),
    ],
)
def test_bad_values_are_refused_naming_the_field(
    helm: helm_harness.Helm, chart: Path, value: str, field: str
) -> None:
    result = helm.run("template", "x", str(chart), *NO_NFD, "--set", value)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert field in result.stderr, result.stderr


def test_operator_image_reaches_the_deployment_only(helm: helm_harness.Helm, chart: Path) -> None:
    image = "registry.example.com/ocp-gpu/ocp-gpu@sha256:" + "b" * 64
    out = documents(helm.template(chart, *NO_NFD, "--set", f"operator.image={image}", namespace="gpus"))
    (deployment,) = [d for d in out if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
    assert "image" not in policy_of(yaml.safe_dump_all(out))["spec"]["operator"]
    namespaced = [
        d for d in out if d["kind"] in {"ServiceAccount", "Role", "RoleBinding", "Deployment", "Job"}
    ]
    assert namespaced and all(d["metadata"]["namespace"] == "gpus" for d in namespaced)
    (binding,) = [
        d for d in out if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == "gpu-operator"
    ]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-operator", "namespace": "gpus"}]

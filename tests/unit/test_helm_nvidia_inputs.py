"""We test these aspects of the chart with NVIDIA's own Helm inputs, with real helm, without a server
(tests/unit/data/nvidia-helm: NVIDIA's values.yaml and the --set lines of NVIDIA's documentation,
listed in cases.yaml):

- each input renders (values.schema.json accepts NVIDIA's whole values.yaml);
- the ClusterPolicy, the NVIDIADriver and the config ConfigMaps equal what NVIDIA's chart renders
  for the same input (expected/<case>.yaml, written from NVIDIA's chart by
  hack/nvidia_chart_fixtures.py), but for the differences named in `ours_from_nvidias`: image
  defaults are our release table's (ocp_gpu/model/releases.py), the validator and node status
  exporter run from the operator's own image, the operand labels name our chart, and
  operator.defaultRuntime, which NVIDIA's chart drops and ocp-gpu reads, is kept;
- a golden `helm template` of NVIDIA's values.yaml, whole;
- NVIDIA's values.yaml gives the operator Deployment its image (the release's: NVIDIA's own
  operator image stands for ours), pull policy, resources, scheduling, priority and annotations
  from `operator`, and none of those chart keys reach the ClusterPolicy;
- operator.repository/image/version of another registry, full references, pull secrets, env and
  debug logging reach the Deployment;
- bad inputs NVIDIA's chart refuses are refused, naming the value;
- gpuCluster.deployCR makes NVIDIA's GPUCluster `gpu-cluster` from the draDriver values as NVIDIA's
  chart writes its spec.draDriver (less the image, the release's by digest), valid for NVIDIA's
  CRD and for the operator's mapping; beside draDriver.enabled it is refused.

helm comes from the `helm_tools` fixture (built from Go modules on first use).
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocp_gpu.model import images, releases
from ocp_gpu.model.policy import gpu_cluster
from ocp_gpu_harness import helm as helm_harness

from . import _crd_schema

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "nvidia-helm"
GOLDEN = Path(__file__).parent / "golden" / "helm"
CASES: dict[str, list[str]] = yaml.safe_load((DATA / "cases.yaml").read_text())["cases"]
CHART_META = yaml.safe_load((helm_harness.chart_source() / "Chart.yaml").read_text())
NVIDIA_OPERATOR = ("nvcr.io/nvidia", "gpu-operator")

# Where each operand image of the release table goes in the ClusterPolicy (and NVIDIADriver).
TABLE_IMAGES: dict[tuple[str, ...], str] = {
    ("driver",): "DRIVER_IMAGE",
    ("driver", "manager"): "DRIVER_MANAGER_IMAGE",
    ("vgpuManager", "driverManager"): "DRIVER_MANAGER_IMAGE",
    ("vfioManager", "driverManager"): "DRIVER_MANAGER_IMAGE",
    ("toolkit",): "CONTAINER_TOOLKIT_IMAGE",
    ("devicePlugin",): "DEVICE_PLUGIN_IMAGE",
    ("dcgm",): "DCGM_IMAGE",
    ("dcgmExporter",): "DCGM_EXPORTER_IMAGE",
    ("gfd",): "GFD_IMAGE",
    ("migManager",): "MIG_MANAGER_IMAGE",
}


def in_data(args: list[str]) -> list[str]:
    """A case's arguments with its values files as paths."""
    return [str(DATA / arg) if arg.endswith(".yaml") else str(arg) for arg in args]


def render(helm: helm_harness.Helm, chart: Path, *args: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(helm.template(chart, *args)) if d]


def ours(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects of NVIDIA's templates/{clusterpolicy,nvidiadriver,*_config}.yaml, from our chart."""
    chart = f"{CHART_META['name']}-{CHART_META['version']}"
    return [
        d
        for d in documents
        if d["kind"] in ("ClusterPolicy", "NVIDIADriver")
        or (d["kind"] == "ConfigMap" and d["metadata"].get("labels", {}).get("helm.sh/chart") == chart)
    ]


def without_nulls(value: Any) -> Any:
    """`value` without null map entries (NVIDIA's chart writes `key:` for an unset value)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def comparable(document: dict[str, Any]) -> tuple[str, str, Any]:
    """What both charts must agree on: kind, name, and the spec (or a ConfigMap's data)."""
    body = document.get("spec") if "spec" in document else document.get("data")
    return document["kind"], document["metadata"]["name"], without_nulls(body)


def sets(args: list[str], path: tuple[str, ...]) -> bool:
    """The case's input sets the value at `path` (by --set or in a values file)."""
    dotted = ".".join(path)
    for flag, value in itertools.pairwise(args):
        if flag.startswith("--set") and value.split("=", 1)[0] == dotted:
            return True
        if flag == "--values":
            node: Any = yaml.safe_load((DATA / value).read_text())
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            if node is not None:
                return True
    return False


def ours_from_nvidias(case: str, expected: dict[str, Any]) -> dict[str, Any]:
    """What our chart must render where NVIDIA's chart rendered `expected`: the deliberate
    differences, each derived from our release table or our chart, never hard-coded."""
    expected = copy.deepcopy(expected)
    args = CASES[case]
    kind, spec = expected["kind"], expected.get("spec")
    if kind not in ("ClusterPolicy", "NVIDIADriver") or spec is None:
        return expected
    # 1. Image defaults: our release table's (a value the input sets stays the input's).
    for path, env in TABLE_IMAGES.items():
        if env not in releases.RELEASE_IMAGES:
            continue
        reference = images.parse_reference(releases.RELEASE_IMAGES[env])
        assert reference is not None and reference.version
        node = spec if kind == "ClusterPolicy" else {"driver": spec}
        for key in path:
            node = node.get(key) or {}
        for part, value in (
            ("repository", reference.repository),
            ("image", reference.name),
            ("version", reference.version),
        ):
            if part in node and not sets(args, (*path, part)):
                node[part] = value
    if kind == "NVIDIADriver":
        return expected
    # 2. The validator and the node status exporter run ocp-gpu's commands: NVIDIA's operator
    # image there stands for ours, which the operator gives them by default.
    for section in ("validator", "nodeStatusExporter"):
        part = spec.get(section) or {}
        if (part.get("repository"), part.get("image")) == NVIDIA_OPERATOR:
            for key in ("repository", "image", "version"):
                part.pop(key, None)
    # 3. The chart's identity on the operands names our chart.
    labels = spec["daemonsets"]["labels"]
    labels["helm.sh/chart"] = f"{CHART_META['name']}-{CHART_META['version']}"
    labels["app.kubernetes.io/managed-by"] = CHART_META["name"]
    # 4. operator.defaultRuntime: NVIDIA's chart drops it (its operator detects the runtime);
    # ocp-gpu configures the toolkit from it, so the chart keeps it.
    if sets(args, ("operator", "defaultRuntime")):
        runtime = next(v.split("=", 1)[1] for v in args if v.startswith("operator.defaultRuntime="))
        spec["operator"]["defaultRuntime"] = runtime
    return expected


def nvidia_driver_spec_schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "ocp_gpu" / "crds" / "nvidiadrivers.nvidia.com.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage", True)]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def expected_documents(case: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DATA / "expected" / f"{case}.yaml").read_text()) if d]


def test_every_case_has_nvidias_rendering() -> None:
    assert sorted(p.stem for p in (DATA / "expected").glob("*.yaml")) == sorted(CASES)
    for case in CASES:
        header = (DATA / "expected" / f"{case}.yaml").read_text().splitlines()[0]
        assert "NVIDIA/gpu-operator@" in header and "v26.7.0" in header, case


@pytest.mark.parametrize("case", sorted(CASES))
def test_nvidia_input_renders_what_nvidias_chart_renders(
    helm: helm_harness.Helm, chart: Path, case: str
) -> None:
    rendered = ours(render(helm, chart, *in_data(CASES[case])))
    (policy,) = [d for d in rendered if d["kind"] == "ClusterPolicy"]
    assert _crd_schema.schema_errors(_crd_schema.spec_schema(), policy["spec"]) == []
    for driver in (d for d in rendered if d["kind"] == "NVIDIADriver"):
        assert _crd_schema.schema_errors(nvidia_driver_spec_schema(), driver["spec"]) == []
    want = sorted((comparable(ours_from_nvidias(case, d)) for d in expected_documents(case)), key=str)
    got = sorted((comparable(d) for d in rendered), key=str)
    assert got == want


def test_template_of_nvidias_values_golden(helm: helm_harness.Helm, chart: Path, update_golden: bool) -> None:
    rendered = helm.template(chart, "--values", str(DATA / "nvidia-values.yaml"))
    path = GOLDEN / "nvidia-values.yaml"
    if update_golden:
        path.write_text(rendered)
    assert path.is_file(), f"{path} missing: run pytest tests/unit --update-golden"
    assert rendered == path.read_text(), "differs from its golden file (--update-golden)"


def _deployment(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [
        d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] == "gpu-operator"
    ]
    return deployment


def test_nvidias_values_shape_the_operator_deployment_not_the_policy(
    helm: helm_harness.Helm, chart: Path
) -> None:
    nvidia = yaml.safe_load((DATA / "nvidia-values.yaml").read_text())["operator"]
    documents = render(helm, chart, "--values", str(DATA / "nvidia-values.yaml"))
    pod = _deployment(documents)["spec"]["template"]
    container = pod["spec"]["containers"][0]
    # NVIDIA's own operator image (nvcr.io/nvidia/gpu-operator) stands for the release's ocp-gpu.
    assert (nvidia["repository"], nvidia["image"]) == NVIDIA_OPERATOR
    assert container["image"] == releases.OPERATOR_IMAGE
    assert container["imagePullPolicy"] == nvidia["imagePullPolicy"]
    assert container["resources"] == nvidia["resources"]
    assert pod["spec"]["nodeSelector"] == nvidia["nodeSelector"]
    assert pod["spec"]["tolerations"] == nvidia["tolerations"]
    assert pod["spec"]["affinity"] == nvidia["affinity"]
    assert pod["spec"]["priorityClassName"] == nvidia["priorityClassName"]
    assert nvidia["annotations"].items() <= pod["metadata"]["annotations"].items()
    assert container["args"][0] == "run"  # logging.level info: no --verbose
    (policy,) = [d for d in documents if d["kind"] == "ClusterPolicy"]
    chart_keys = {
        "repository",
        "image",
        "version",
        "imagePullPolicy",
        "imagePullSecrets",
        "env",
        "resources",
        "tolerations",
        "affinity",
        "nodeSelector",
        "priorityClassName",
        "annotations",
        "logging",
        "upgradeCRD",
        "cleanupCRD",
    }
    assert set(policy["spec"]["operator"]) == set(nvidia) - chart_keys - {"use_ocp_driver_toolkit"}
    for key in ("clusterPolicy", "platform", "nfd", "gpuCluster", "draDriver", "extraObjects"):
        assert key not in policy["spec"]
    assert "nvidiaDriverCRD" not in policy["spec"]["driver"]
    assert {"create", "data"}.isdisjoint(policy["spec"]["devicePlugin"].get("config", {}))


@pytest.mark.parametrize(
    ("sets_", "image"),
    [
        (
            [
                "operator.repository=registry.example.com/mirror",
                "operator.image=ocp-gpu",
                "operator.version=v9",
            ],
            "registry.example.com/mirror/ocp-gpu:v9",
        ),
        (
            [
                "operator.repository=registry.example.com/mirror",
                "operator.image=ocp-gpu",
                "operator.version=sha256:" + "c" * 64,
            ],
            "registry.example.com/mirror/ocp-gpu@sha256:" + "c" * 64,
        ),
        (
            ["operator.repository=registry.example.com/mirror", "operator.version="],
            "registry.example.com/mirror/"
            + images.parse_reference(releases.OPERATOR_IMAGE).name  # type: ignore[union-attr]
            + ":"
            + (images.parse_reference(releases.OPERATOR_IMAGE).version or ""),
        ),  # type: ignore[union-attr]
        (
            ["operator.image=registry.example.com/ocp-gpu/ocp-gpu:v2"],
            "registry.example.com/ocp-gpu/ocp-gpu:v2",
        ),
        ([], releases.OPERATOR_IMAGE),
    ],
)
def test_operator_image_from_repository_image_version(
    helm: helm_harness.Helm, chart: Path, sets_: list[str], image: str
) -> None:
    documents = render(helm, chart, "--set", "nfd.enabled=false", *helm.values_args(sets_))
    assert _deployment(documents)["spec"]["template"]["spec"]["containers"][0]["image"] == image


def test_operator_pull_secrets_env_labels_and_debug_logging(helm: helm_harness.Helm, chart: Path) -> None:
    documents = render(
        helm,
        chart,
        "--set",
        "nfd.enabled=false",
        "--set",
        "operator.imagePullSecrets[0]=ngc",
        "--set",
        "operator.env[0].name=EXTRA",
        "--set-string",
        "operator.env[0].value=1",
        "--set",
        "operator.labels.team=gpu",
        "--set",
        "operator.podAnnotations.example\\.com/a=b",
        "--set",
        "operator.logging.level=debug",
    )
    deployment = _deployment(documents)
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert pod["spec"]["imagePullSecrets"] == [{"name": "ngc"}]
    assert container["env"][-1] == {"name": "EXTRA", "value": "1"}
    assert pod["metadata"]["labels"]["team"] == "gpu" == deployment["metadata"]["labels"]["team"]
    assert pod["metadata"]["labels"]["app"] == "gpu-operator"  # the selector's label stays
    assert pod["metadata"]["annotations"]["example.com/a"] == "b"
    assert container["args"][:2] == ["--verbose", "run"]


@pytest.mark.parametrize(
    ("sets_", "message"),
    [
        (["gpuCluster.deployCR=true", "draDriver.enabled=true"], "draDriver.enabled=false"),
        (["devicePlugin.config.create=true", "devicePlugin.config.name=x"], "devicePlugin.config.data"),
        (["devicePlugin.config.create=true", "devicePlugin.config.data.a=b"], "devicePlugin.config.name"),
        (["cdi.enabled=false", "cdi.nriPluginEnabled=true"], "cdi.nriPluginEnabled"),
        (["driver.verison=1"], "/driver"),
        (["operator.imagePullPolicy=1"], "/operator/imagePullPolicy"),
        (["unknownSection.x=1"], "unknownSection"),
    ],
)
def test_inputs_nvidias_chart_refuses_are_refused_naming_the_value(
    helm: helm_harness.Helm, chart: Path, sets_: list[str], message: str
) -> None:
    result = helm.run("template", "x", str(chart), "--set", "nfd.enabled=false", *helm.values_args(sets_))
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_gpu_cluster_from_the_dra_driver_values(helm: helm_harness.Helm, chart: Path) -> None:
    assert not [d for d in render(helm, chart, "--set", "nfd.enabled=false") if d["kind"] == "GPUCluster"]
    documents = render(
        helm,
        chart,
        "--set",
        "nfd.enabled=false",
        "--set",
        "gpuCluster.deployCR=true",
        "--set",
        "draDriver.featureGates.MPSSupport=true",
        "--set",
        "draDriver.computeDomains.enabled=false",
    )
    (found,) = [d for d in documents if d["kind"] == "GPUCluster"]
    assert (found["apiVersion"], found["metadata"]["name"]) == ("nvidia.com/v1alpha1", "gpu-cluster")
    # NVIDIA's chart's spec.draDriver, less the image (the operator's DRA_DRIVER_IMAGE, by digest)
    assert found["spec"] == {
        "draDriver": {
            "imagePullPolicy": "IfNotPresent",
            "featureGates": {"MPSSupport": True},
            "computeDomains": {"enabled": False},
        }
    }
    mapped = gpu_cluster.gpu_cluster_dra_driver(found["spec"])
    assert mapped.dra_driver.enabled and not mapped.dra_driver.compute_domains.enabled
    assert mapped.not_applied == ()
    # NVIDIA's values' default: ComputeDomains on
    (default,) = [
        d
        for d in render(helm, chart, "--set", "nfd.enabled=false", "--set", "gpuCluster.deployCR=true")
        if d["kind"] == "GPUCluster"
    ]
    assert default["spec"]["draDriver"]["computeDomains"] == {"enabled": True}

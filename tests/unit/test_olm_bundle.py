"""We test these aspects of the OLM bundle and catalog (hack/olm.py; validators in tests/olm/):

- the CSV's install strategy is the install source (ocp_gpu/install): the same
  Deployment spec, ClusterRole rules as clusterPermissions, Role rules as permissions,
  the ServiceAccount `gpu-operator`;
- relatedImages list the operator and every operand image of the release, operands by
  digest, and the Deployment's env uses exactly those references;
- alm-examples holds one ClusterPolicy named `cluster-policy` that the operator's own
  policy validation accepts, and one example of every other owned kind (NVIDIA's GPUCluster
  `gpu-cluster`, which the operator's mapping reads; ComputeDomain and its clique, the clique an
  internal object); every spec/status descriptor names a field the CRD has;
- suggested namespace `nvidia-gpu-operator`, install modes, infrastructure features and
  every `features.operators.openshift.io/*` annotation OpenShift's console reads;
- bundle metadata: annotations.yaml and bundle.Dockerfile's labels agree; the NFD
  dependency; the catalog has channels `stable` and `v0.x` with the release, the bundle
  embeds the same CSV and CRD, and the upgrade graph is a chain.
"""

from __future__ import annotations

import base64
import itertools
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocp_gpu.desired import pool_manifests
from ocp_gpu.install import install_manifests
from ocp_gpu.model import nvidia_driver_spec, releases
from ocp_gpu.model.policy import gpu_cluster, policy_checks, policy_parser, policy_spec
from tests import hack_scripts

ROOT = Path(__file__).resolve().parents[2]


def _load_olm() -> Any:
    sys.path.insert(0, str(ROOT / "hack"))
    sys.path.insert(0, str(ROOT))
    return hack_scripts.load("olm")


olm = _load_olm()
CSV: dict[str, Any] = yaml.safe_load((ROOT / olm.CSV_TARGET).read_text())
CRD: dict[str, Any] = yaml.safe_load((ROOT / "bundle/manifests/nvidia.com_clusterpolicies.yaml").read_text())
NVD_CRD: dict[str, Any] = yaml.safe_load(
    (ROOT / "bundle/manifests/nvidia.com_nvidiadrivers.yaml").read_text()
)
# NVIDIA's own CRDs, shipped as NVIDIA ships them (GPUCluster; the DRA driver's ComputeDomains).
NVIDIA_CRDS: list[dict[str, Any]] = [
    yaml.safe_load((ROOT / f"bundle/manifests/{name}.yaml").read_text())
    for name in (
        "nvidia.com_gpuclusters",
        "resource.nvidia.com_computedomains",
        "resource.nvidia.com_computedomaincliques",
    )
]
CATALOG = [doc for doc in yaml.safe_load_all((ROOT / "olm/ocp-gpu/catalog.yaml").read_text()) if doc]
ANNOTATIONS = CSV["metadata"]["annotations"]
INSTALL = CSV["spec"]["install"]


def test_the_install_strategy_is_the_install_source() -> None:
    assert INSTALL["strategy"] == "deployment"
    spec = INSTALL["spec"]
    (deployment,) = spec["deployments"]
    assert deployment["name"] == "gpu-operator"
    assert deployment["spec"] == install_manifests.deployment_spec()
    assert spec["clusterPermissions"] == [
        {"serviceAccountName": "gpu-operator", "rules": install_manifests.cluster_role()["rules"]}
    ]
    assert spec["permissions"] == [
        {"serviceAccountName": "gpu-operator", "rules": install_manifests.role("x")["rules"]}
    ]


def test_related_images_are_every_image_the_operator_uses() -> None:
    related = {item["image"] for item in CSV["spec"]["relatedImages"]}
    (deployment,) = INSTALL["spec"]["deployments"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env_images = {item["value"] for item in container["env"] if item["name"].endswith("_IMAGE")}
    assert related == env_images | {container["image"]}
    assert container["image"] == ANNOTATIONS["containerImage"] == releases.OPERATOR_IMAGE
    env = {item["name"]: item.get("value") for item in container["env"]}
    # The operator's own image (the validator's and node status exporter's) is the Deployment's.
    assert env["OPERATOR_IMAGE"] == container["image"] and "VALIDATOR_IMAGE" not in env
    assert releases.with_release_defaults(env)["VALIDATOR_IMAGE"] == container["image"]
    # Every operand image is pinned by digest, as the release table records it.
    assert {name: image for name, image in env.items() if name in releases.RELEASE_DIGESTS} == (
        releases.RELEASE_DIGESTS
    )
    assert all("@sha256:" in image for name, image in env.items() if name in releases.RELEASE_DIGESTS)
    names = [item["name"] for item in CSV["spec"]["relatedImages"]]
    assert len(names) == len(set(names))


def test_alm_example_is_a_valid_cluster_policy() -> None:
    example = json.loads(ANNOTATIONS["alm-examples"])[0]
    assert example["kind"] == "ClusterPolicy" and example["metadata"]["name"] == "cluster-policy"
    parsed = policy_parser.parse_policy(example["spec"])
    env = releases.with_release_defaults(releases.installed_images())
    assert policy_checks.validate_policy(parsed, env) == []


def test_alm_example_is_a_valid_nvidia_driver() -> None:
    policy, example, *_ = json.loads(ANNOTATIONS["alm-examples"])
    assert example["apiVersion"] == "nvidia.com/v1alpha1" and example["kind"] == "NVIDIADriver"
    driver = nvidia_driver_spec.NvidiaDriver(
        name=example["metadata"]["name"], uid="u", created="", generation=1, spec=example["spec"]
    )
    resolved = pool_manifests.pool_policy(driver, policy["spec"], releases.installed_images())
    assert isinstance(resolved, policy_spec.Policy), resolved


def _schema_has(schema: dict[str, Any], path: str) -> bool:
    for part in path.split("."):
        properties = schema.get("properties") or {}
        if part not in properties:
            return False
        schema = properties[part]
    return True


def test_descriptors_name_fields_the_crd_has() -> None:
    owned, nvd, *nvidias = CSV["spec"]["customresourcedefinitions"]["owned"]
    # Every CRD the bundle ships is owned, under its name, version and kind.
    assert [(d["name"], d["version"], d["kind"]) for d in nvidias] == [
        (crd["metadata"]["name"], crd["spec"]["versions"][0]["name"], crd["spec"]["names"]["kind"])
        for crd in NVIDIA_CRDS
    ]
    (gpu_cluster,) = [d for d in nvidias if d["kind"] == "GPUCluster"]
    gc_root = NVIDIA_CRDS[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    for kind, part in (("specDescriptors", "spec"), ("statusDescriptors", "status")):
        assert [d["path"] for d in gpu_cluster[kind] if not _schema_has(gc_root[part], d["path"])] == []
    assert (nvd["name"], nvd["version"], nvd["kind"]) == (
        "nvidiadrivers.nvidia.com",
        "v1alpha1",
        "NVIDIADriver",
    )
    nvd_root = NVD_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    for kind, part in (("specDescriptors", "spec"), ("statusDescriptors", "status")):
        assert [d["path"] for d in nvd[kind] if not _schema_has(nvd_root[part], d["path"])] == []
    assert (owned["name"], owned["version"], owned["kind"]) == (
        "clusterpolicies.nvidia.com",
        "v1",
        "ClusterPolicy",
    )
    root = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    specs = [d["path"] for d in owned["specDescriptors"]]
    statuses = [d["path"] for d in owned["statusDescriptors"]]
    assert {"driver.version", "driver.upgradePolicy.autoUpgrade", "toolkit.enabled"} <= set(specs)
    assert [path for path in specs if not _schema_has(root["spec"], path)] == []
    assert [path for path in statuses if not _schema_has(root["status"], path)] == []


def test_openshift_annotations() -> None:
    assert ANNOTATIONS["operatorframework.io/suggested-namespace"] == "nvidia-gpu-operator"
    assert json.loads(ANNOTATIONS["operators.openshift.io/infrastructure-features"]) == [
        "disconnected",
        "proxy-aware",
    ]
    features = {
        key.removeprefix("features.operators.openshift.io/"): value
        for key, value in ANNOTATIONS.items()
        if key.startswith("features.operators.openshift.io/")
    }
    for feature in ("disconnected", "proxy-aware", "fips-compliant", "tls-profiles"):
        assert features[feature] in ("true", "false")
    for cloud in ("aws", "azure", "gcp"):
        assert features[f"token-auth-{cloud}"] == "false"
    assert features["disconnected"] == "true" and features["proxy-aware"] == "true"
    modes = {mode["type"]: mode["supported"] for mode in CSV["spec"]["installModes"]}
    assert modes == {
        "OwnNamespace": True,
        "SingleNamespace": True,
        "MultiNamespace": False,
        "AllNamespaces": False,
    }


def test_the_bundle_carries_the_release_tables_max_openshift_version() -> None:
    wanted = releases.OPENSHIFT_VERSIONS.rsplit("-", 1)[1].removeprefix("v")
    expected = [{"type": "olm.maxOpenShiftVersion", "value": wanted}]
    properties = yaml.safe_load((ROOT / "bundle/metadata/properties.yaml").read_text())
    assert properties == {"properties": expected}
    assert isinstance(properties["properties"][0]["value"], str)  # "4.20" is not the number 4.2
    [bundle] = [doc for doc in CATALOG if doc["schema"] == "olm.bundle"]
    assert [p for p in bundle["properties"] if p["type"] == "olm.maxOpenShiftVersion"] == expected
    # in the bundle's metadata, not the CSV's annotation (the validators warn about that)
    assert "olm.properties" not in ANNOTATIONS


@pytest.mark.parametrize(
    ("versions", "newest"),
    [
        ("v4.18-v4.22", "4.22"),
        ("v4.14-v4.9", "4.9"),
        ("=v4.18", "4.18"),
        ("v4.18", None),
        (" v4.18 - v4.20 ", "4.20"),
    ],
)
def test_max_openshift_version_of_a_range(versions: str, newest: str | None) -> None:
    assert olm.max_openshift_version(versions) == newest


def test_bundle_metadata_and_dockerfile_agree() -> None:
    annotations = yaml.safe_load((ROOT / "bundle/metadata/annotations.yaml").read_text())["annotations"]
    assert annotations["operators.operatorframework.io.bundle.package.v1"] == "ocp-gpu"
    assert annotations["operators.operatorframework.io.bundle.channels.v1"] == "stable,v0.x"
    dockerfile = (ROOT / "bundle.Dockerfile").read_text()
    labels = dict(
        line.removeprefix("LABEL ").split("=", 1)
        for line in dockerfile.splitlines()
        if line.startswith("LABEL ")
    )
    assert {key: labels[key] for key in annotations} == annotations
    dependencies = yaml.safe_load((ROOT / "bundle/metadata/dependencies.yaml").read_text())["dependencies"]
    assert dependencies == [{"type": "olm.package", "value": {"packageName": "nfd", "version": ">=4.14.0"}}]


def _by_schema(schema: str) -> list[dict[str, Any]]:
    return [doc for doc in CATALOG if doc["schema"] == schema]


def test_catalog_channels_and_bundle() -> None:
    (package,) = _by_schema("olm.package")
    assert package["name"] == "ocp-gpu" and package["defaultChannel"] == "stable"
    channels = {channel["name"]: channel for channel in _by_schema("olm.channel")}
    assert set(channels) == {"stable", "v0.x"}
    (bundle,) = _by_schema("olm.bundle")
    assert bundle["name"] == CSV["metadata"]["name"]
    for channel in channels.values():
        assert channel["entries"][-1]["name"] == bundle["name"]
    objects = [
        json.loads(base64.b64decode(prop["value"]["data"]))
        for prop in bundle["properties"]
        if prop["type"] == "olm.bundle.object"
    ]
    assert objects == [CSV, CRD, NVD_CRD, *NVIDIA_CRDS]
    gvks = [prop["value"] for prop in bundle["properties"] if prop["type"] == "olm.gvk"]
    assert gvks == [
        {"group": "nvidia.com", "kind": "ClusterPolicy", "version": "v1"},
        {"group": "nvidia.com", "kind": "NVIDIADriver", "version": "v1alpha1"},
        {"group": "nvidia.com", "kind": "GPUCluster", "version": "v1alpha1"},
        {"group": "resource.nvidia.com", "kind": "ComputeDomain", "version": "v1beta1"},
        {"group": "resource.nvidia.com", "kind": "ComputeDomainClique", "version": "v1beta1"},
    ]
    required = [prop["value"] for prop in bundle["properties"] if prop["type"] == "olm.package.required"]
    assert required == [{"packageName": "nfd", "versionRange": ">=4.14.0"}]


@pytest.mark.parametrize("history", [("0.1.0",), ("0.1.0", "0.2.0", "0.3.0")])
def test_upgrade_graph_is_a_chain(monkeypatch: pytest.MonkeyPatch, history: tuple[str, ...]) -> None:
    monkeypatch.setattr(olm, "RELEASE_HISTORY", history)
    documents = olm.catalog_documents(ROOT)
    for channel in (doc for doc in documents if doc["schema"] == "olm.channel"):
        entries = channel["entries"]
        assert [entry["name"] for entry in entries] == [f"ocp-gpu.v{version}" for version in history]
        assert "replaces" not in entries[0]
        for before, entry in itertools.pairwise(entries):
            assert entry["replaces"] == before["name"]


def test_one_version_everywhere() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert olm.VERSION == CSV["spec"]["version"] == version
    assert releases.OPERATOR_IMAGE.endswith(f":v{version}")


def test_every_owned_kind_has_a_valid_example() -> None:
    examples = json.loads(ANNOTATIONS["alm-examples"])
    owned = CSV["spec"]["customresourcedefinitions"]["owned"]
    assert sorted(e["kind"] for e in examples) == sorted(d["kind"] for d in owned)
    for crd in NVIDIA_CRDS:
        (example,) = [e for e in examples if e["kind"] == crd["spec"]["names"]["kind"]]
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert example["apiVersion"] == f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}"
        for top in set(example) - {"apiVersion", "kind", "metadata"}:
            assert top in schema["properties"], (example["kind"], top)
    (cluster,) = [e for e in examples if e["kind"] == "GPUCluster"]
    # NVIDIA's schema: a singleton named gpu-cluster; and the operator's mapping reads it
    assert cluster["metadata"]["name"] == "gpu-cluster"
    assert gpu_cluster.gpu_cluster_dra_driver(cluster["spec"]).dra_driver.compute_domains.enabled
    # the cliques are the DRA driver's own writing: hidden from the console
    internal = json.loads(ANNOTATIONS["operators.operatorframework.io/internal-objects"])
    assert internal == ["computedomaincliques.resource.nvidia.com"]

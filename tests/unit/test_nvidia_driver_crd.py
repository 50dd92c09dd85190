"""We test these aspects of our NVIDIADriver CRD (ocp_gpu/crds/nvidiadrivers.nvidia.com.yaml):

- every field path of NVIDIA's NVIDIADriver v1alpha1 schema (tests/unit/data/nvidia-nvidiadriver-paths.txt,
  written by hack/gen_nvidia_paths.py --kind nvidiadriver from NVIDIA's CRD) is in ours, with a type
  that accepts NVIDIA's values; a removed path is named (the check can fail);
- a spec setting every leaf of NVIDIA's list passes our structural schema and sets every leaf;
- that spec, laid over a ClusterPolicy (model/nvidia_driver.cluster_policy_spec), parses with the
  one policy model, and each driver field lands on the ClusterPolicy field it means;
- the CRD is cluster-scoped, served as nvidia.com/v1alpha1 with a status subresource whose
  `state` and `conditions` are NVIDIA's.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.desired import pool_manifests
from ocp_gpu.model import nvidia_driver_spec, releases
from ocp_gpu.model.policy import policy_spec
from tests.unit import _nvidia_fields as nv
from tests.unit._crd_schema import Schema, schema_errors

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "ocp_gpu" / "crds" / "nvidiadrivers.nvidia.com.yaml"
PATHS_FILE = Path(__file__).parent / "data" / "nvidia-nvidiadriver-paths.txt"


@functools.cache
def _crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return loaded


def spec_schema() -> Schema:
    schema: Schema = _crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


@functools.cache
def nvidia_paths() -> dict[str, str]:
    return nv.read_paths(PATHS_FILE)


def missing_or_narrowed(ours: dict[str, str]) -> list[str]:
    return [
        f"{path}: missing" if path not in ours else f"{path}: {ours[path]} does not accept NVIDIA's {theirs}"
        for path, theirs in nvidia_paths().items()
        if path not in ours or not nv.accepts(ours[path], theirs)
    ]


# Leaves whose generic sample our schema (or NVIDIA's CEL rules) refuses, by path suffix.
_SAMPLES: dict[str, object] = {
    "spec.default": False,  # a default NVIDIADriver may not have a nodeSelector (CEL, as NVIDIA's)
    "spec.driverType": "gpu",
    "spec.usePrecompiled": False,  # GDS and GDRCopy build on the node
    "spec.nodeSelector{}": "pool-a",
    "matchExpressions[].operator": "In",
    "matchFields[].operator": "In",
    "[].weight": 10,
}


def _sample(path: str) -> object:
    suffixes = [suffix for suffix in _SAMPLES if path.endswith(suffix)]
    if suffixes:
        return _SAMPLES[max(suffixes, key=len)]
    shared = [
        suffix
        for suffix in nv._SAMPLES
        if path.endswith(suffix) and not suffix.startswith(("driver.", "operator.", "hostPaths."))
    ]
    if shared:
        # the ClusterPolicy fixture's value for the same kind of field (images, env, resources, pods)
        return nv._SAMPLES[max(shared, key=len)]
    return nv.generic_sample(path, nv.schema_at(path, spec_schema()), nvidia_paths()[path], int_or_string="1")


def every_field_spec() -> dict[str, Any]:
    """An NVIDIADriver spec setting every leaf of NVIDIA's list (one item per list, one key per map)."""
    return nv.spec_setting(nv.leaves(nvidia_paths()), _sample, map_key="example.com/pool")


def test_the_list_is_nvidias_whole_schema() -> None:
    listed = nvidia_paths()
    assert len(listed) == 190
    assert listed["spec.nodeSelector{}"] == "string"
    assert listed["spec.upgradePolicy.maxUnavailable"] == "int-or-string"


def test_our_crd_has_every_nvidia_path_with_a_compatible_type() -> None:
    assert missing_or_narrowed(nv.walk(spec_schema())) == []


def test_a_missing_field_is_named() -> None:
    schema = copy.deepcopy(spec_schema())
    del schema["properties"]["nodeSelector"]
    del schema["properties"]["licensingConfig"]["properties"]["nlsEnabled"]
    problems = missing_or_narrowed(nv.walk(schema))
    assert problems == [
        "spec.licensingConfig.nlsEnabled: missing",
        "spec.nodeSelector: missing",
        "spec.nodeSelector{}: missing",
    ]


def test_the_every_field_spec_passes_our_schema_and_sets_every_leaf() -> None:
    spec = every_field_spec()
    assert schema_errors(spec_schema(), spec) == []
    assert set(nvidia_paths()) <= set(nv.walk_value(spec, schema=spec_schema()))


def test_the_every_field_spec_maps_onto_the_policy_model() -> None:
    spec = every_field_spec()
    driver = nvidia_driver_spec.NvidiaDriver("every-field", "uid", "2026-01-01T00:00:00Z", 1, spec)
    resolved = pool_manifests.pool_policy(
        driver, {"driver": {"useNvidiaDriverCRD": True}}, releases.installed_images()
    )
    assert isinstance(resolved, policy_spec.Policy), resolved
    # NVIDIA's names for the ConfigMaps land on ours; the pool's pod settings on spec.daemonsets
    assert resolved.driver.repo_config_map == spec["repoConfig"]["name"]
    assert resolved.driver.licensing.config_map_name == spec["licensingConfig"]["name"]
    assert resolved.driver.licensing.secret_name == spec["licensingConfig"]["secretName"]
    assert resolved.driver.kernel_module_config_map == spec["kernelModuleConfig"]["name"]
    assert resolved.driver.image.repository == spec["repository"]
    assert resolved.driver.image.version == spec["version"]
    assert resolved.driver.image.pull_secrets == tuple(spec["imagePullSecrets"])
    assert resolved.driver.manager.image.pull_secrets == tuple(spec["manager"]["imagePullSecrets"])
    assert resolved.daemonsets.priority_class_name == spec["priorityClassName"]
    assert resolved.daemonsets.labels["example.com/pool"] == spec["labels"]["example.com/pool"]
    assert resolved.gds.enabled and resolved.gdrcopy.enabled
    assert resolved.driver.rdma.enabled


def test_the_crd_is_nvidias_resource() -> None:
    crd = _crd()
    assert crd["metadata"]["name"] == "nvidiadrivers.nvidia.com"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["kind"] == "NVIDIADriver"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert status["state"]["enum"] == ["ready", "notReady", "disabled"]
    assert {"type", "status", "reason", "message", "lastTransitionTime"} <= set(
        status["conditions"]["items"]["properties"]
    )

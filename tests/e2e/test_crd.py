"""We test these aspects of the ClusterPolicy CRD on the real API server of the local control plane:

- `kubectl apply` rejects a ClusterPolicy with a wrong type, an unknown enum value, an
  out-of-range number, a maxUnavailable that is not a count or percentage, an unknown
  field, duplicate env names, or what the CEL rules forbid, with a message naming the field;
- a minimal `cluster-policy` is stored with every default filled in (the seed's
  upgradePolicy among them), exactly as tests/unit/_crd_schema.apply_defaults predicts,
  so the unit tests' defaulting is the server's;
- NVIDIA's sample ClusterPolicy is accepted as is and means the same after defaulting;
- a ClusterPolicy setting every field of NVIDIA's v1 schema, and one shaped like NVIDIA's
  OperatorHub example, are applied by kubectl without an error or an unknown-field warning and
  stored as sent (plus our defaults);
- the seed's `kubectl patch ... /spec/driver/version` works verbatim on a minimal policy;
- `kubectl get clusterpolicy` shows the State and Age columns.

Nothing here runs the operator.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.model.policy import policy_parser
from ocp_gpu_harness import crds
from ocp_gpu_harness.cluster import LocalControlPlane
from tests.unit._crd_schema import apply_defaults, spec_schema
from tests.unit._nvidia_fields import every_field_spec

from .conftest import kubectl as run_kubectl

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "ocp_gpu" / "crds" / "clusterpolicies.nvidia.com.yaml"
NVIDIA_SAMPLE = REPO / "tests" / "unit" / "data" / "nvidia-clusterpolicy.yaml"
OPERATORHUB_SAMPLE = REPO / "tests" / "unit" / "data" / "nvidia-operatorhub-clusterpolicy.yaml"
GROUP, VERSION, PLURAL = "nvidia.com", "v1", "clusterpolicies"


def kubectl(
    plane: LocalControlPlane, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    # These tests look at kubectl's refusals: a non-zero exit is an outcome, not an error.
    return run_kubectl(plane, *args, stdin=stdin, check=False)


def policy_manifest(name: str, spec: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ClusterPolicy",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


@pytest.fixture(scope="module")
def crd(control_plane: LocalControlPlane) -> None:
    """The CRD, applied with kubectl as an admin would, and established."""
    applied = kubectl(control_plane, "apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    assert applied.returncode == 0, applied.stderr
    # NB: polled (harness/crds.py says why kubectl's own wait is not enough).
    with control_plane.api_client() as api:
        crds.wait_until_served(api, [f"{PLURAL}.{GROUP}"])


@pytest.fixture
def policies(control_plane: LocalControlPlane, crd: None, kube: client.ApiClient) -> Iterator[list[str]]:
    """Names of ClusterPolicies the test created; deleted afterwards."""
    created: list[str] = []
    yield created
    api = client.CustomObjectsApi(kube)
    for name in created:
        try:
            api.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except client.exceptions.ApiException as error:
            if error.status != 404:
                raise


def read_spec(kube: client.ApiClient, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = client.CustomObjectsApi(kube).get_cluster_custom_object(
        GROUP, VERSION, PLURAL, name
    )
    return dict(obj["spec"])


REJECTED: dict[str, tuple[dict[str, Any], list[str]]] = {
    "wrong type": ({"driver": {"enabled": "yes"}}, ["spec.driver.enabled", "boolean"]),
    "unknown enum value": (
        {"devicePlugin": {"migStrategy": "all"}},
        ["spec.devicePlugin.migStrategy", "Unsupported value"],
    ),
    "negative maxParallelUpgrades": (
        {"driver": {"upgradePolicy": {"maxParallelUpgrades": -1}}},
        ["spec.driver.upgradePolicy.maxParallelUpgrades", "greater than or equal to 0"],
    ),
    "negative timeout": (
        {"driver": {"upgradePolicy": {"drain": {"timeoutSeconds": -5}}}},
        ["spec.driver.upgradePolicy.drain.timeoutSeconds", "greater than or equal to 0"],
    ),
    "maxUnavailable not a count": (
        {"driver": {"upgradePolicy": {"maxUnavailable": "a quarter"}}},
        ["spec.driver.upgradePolicy.maxUnavailable"],
    ),
    "unknown field": ({"driver": {"useNvidiaDriverCrd": True}}, ["useNvidiaDriverCrd"]),
    "duplicate env names": (
        {"toolkit": {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}},
        ["spec.toolkit.env", "Duplicate value"],
    ),
    "resourceConfig entry": (
        {"devicePlugin": {"resourceConfig": "gpu:sharedgpu"}},
        ["spec.devicePlugin.resourceConfig", "<resource>:<newname>:<replicas>"],
    ),
    "fallback without a version": (
        {"driver": {"precompiledFallback": {"enabled": True}}},
        ["spec.driver.precompiledFallback.version"],
    ),
}


@pytest.mark.parametrize(("spec", "expected"), REJECTED.values(), ids=REJECTED.keys())
def test_invalid_policies_are_rejected_naming_the_field(
    control_plane: LocalControlPlane, policies: list[str], spec: dict[str, Any], expected: list[str]
) -> None:
    policies.append("invalid-policy")
    result = kubectl(control_plane, "apply", "-f", "-", stdin=policy_manifest("invalid-policy", spec))
    assert result.returncode != 0, f"accepted: {spec}"
    for fragment in expected:
        assert fragment in result.stderr, result.stderr


def test_minimal_policy_gets_every_default(
    control_plane: LocalControlPlane, policies: list[str], kube: client.ApiClient
) -> None:
    policies.append("cluster-policy")
    result = kubectl(control_plane, "apply", "-f", "-", stdin=policy_manifest("cluster-policy", {}))
    assert result.returncode == 0, result.stderr
    stored = read_spec(kube, "cluster-policy")
    assert stored["driver"]["upgradePolicy"] == {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "maxUnavailable": "25%",
        "waitForCompletion": {"timeoutSeconds": 0, "podSelector": ""},
        "gpuPodDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
        "drain": {
            "enable": False,
            "force": False,
            "podSelector": "",
            "timeoutSeconds": 300,
            "deleteEmptyDir": False,
        },
    }
    # The unit tests' defaulting is the server's, so their default checks hold on a server too.
    assert stored == apply_defaults(spec_schema(), {})
    assert policy_parser.parse_policy(stored) == policy_parser.parse_policy({})


def test_nvidia_sample_is_accepted_as_is(
    control_plane: LocalControlPlane, policies: list[str], kube: client.ApiClient
) -> None:
    sample = yaml.safe_load(NVIDIA_SAMPLE.read_text())
    policies.append(sample["metadata"]["name"])
    result = kubectl(control_plane, "apply", "-f", str(NVIDIA_SAMPLE))
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    stored = read_spec(kube, sample["metadata"]["name"])
    assert stored == apply_defaults(spec_schema(), sample["spec"])
    assert policy_parser.parse_policy(stored) == policy_parser.parse_policy(sample["spec"])


@pytest.mark.parametrize("which", ["every-field", "operatorhub"])
def test_nvidia_schema_policies_are_accepted_as_is(
    control_plane: LocalControlPlane, policies: list[str], kube: client.ApiClient, which: str
) -> None:
    if which == "every-field":
        name, spec = "every-nvidia-field", every_field_spec()
        manifest = policy_manifest(name, spec)
    else:
        sample = yaml.safe_load(OPERATORHUB_SAMPLE.read_text())
        name, spec, manifest = sample["metadata"]["name"], sample["spec"], json.dumps(sample)
    policies.append(name)
    result = kubectl(control_plane, "apply", "-f", "-", stdin=manifest)
    assert result.returncode == 0, result.stderr
    # an unknown field is dropped with a warning, not refused: no warning means every path is ours
    assert "Warning" not in result.stderr, result.stderr
    assert read_spec(kube, name) == apply_defaults(spec_schema(), spec)


def test_seed_version_patch_works_verbatim(
    control_plane: LocalControlPlane, policies: list[str], kube: client.ApiClient
) -> None:
    policies.append("cluster-policy")
    created = kubectl(control_plane, "apply", "-f", "-", stdin=policy_manifest("cluster-policy", {}))
    assert created.returncode == 0, created.stderr
    patched = kubectl(
        control_plane,
        "patch",
        "clusterpolicy/cluster-policy",
        "--type=json",
        '-p=[{"op": "replace", "path": "/spec/driver/version", "value":"510.85.02"}]',
    )
    assert patched.returncode == 0, patched.stderr
    assert read_spec(kube, "cluster-policy")["driver"]["version"] == "510.85.02"


def test_printer_columns(control_plane: LocalControlPlane, policies: list[str]) -> None:
    policies.append("cluster-policy")
    created = kubectl(control_plane, "apply", "-f", "-", stdin=policy_manifest("cluster-policy", {}))
    assert created.returncode == 0, created.stderr
    listed = kubectl(control_plane, "get", "clusterpolicy", "cluster-policy")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split("\n")[0].split() == ["NAME", "STATE", "AGE"]

"""ocp-gpu's DRA driver operand against NVIDIA's own rendering of its GPUCluster DRA stack.

NVIDIA ships the DRA driver only through its GPUCluster resource; its own golden file of the
full spec (ComputeDomains on, extra env and resources: tests/unit/data/nvidia-dra/, captured
from NVIDIA/gpu-operator v26.7.0) is what its operator renders.  We test these aspects:
- ocp-gpu renders the same spec in ClusterPolicy terms (`draDriver`, `draDriver.computeDomains`)
  without errors;
- the kubelet plugin DaemonSet and the compute-domain controller Deployment are compared per pod
  and per container as tests/unit/test_nvidia_conformance.py compares the ClusterPolicy's
  operands (image, command, args, each env, mounts, security context; tolerations, selectors,
  affinity, service account); each object NVIDIA or ocp-gpu renders (by kind and name), and each
  DeviceClass's CEL: every difference is a row of docs/differences-from-nvidia.md, and every row
  of its DRA section still occurs here.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.rendering.operands import operand_catalog, operand_common, operand_rendering
from tests.unit import _conformance as conformance

FIXTURE = Path(__file__).parent / "data" / "nvidia-dra" / "gpucluster-dra-driver-full-spec.yaml"
CASE = "gpucluster-dra-driver-full-spec"
# NVIDIA's test namespace and the spec of its fullSpecGPUCluster (internal/state), in ClusterPolicy terms.
NAMESPACE = "test-operator"
IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v0.1.0"
RESOURCES = {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}}
POLICY = {
    "daemonsets": {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-node-critical",
    },
    "draDriver": {
        "enabled": True,
        "repository": "nvcr.io/nvidia",
        "image": "k8s-dra-driver-gpu",
        "version": "v0.1.0",
        "imagePullPolicy": "IfNotPresent",
        "featureGates": {"MPSSupport": True, "AdminAccess": False},
        "env": [{"name": "GPUS_EXTRA", "value": "1"}],
        "resources": RESOURCES,
        "computeDomains": {
            "enabled": True,
            "controller": {"env": [{"name": "CD_CONTROLLER_EXTRA", "value": "1"}]},
            "kubeletPlugin": {
                "env": [{"name": "CD_PLUGIN_EXTRA", "value": "1"}],
                "resources": {
                    "limits": {"cpu": "300m", "memory": "512Mi"},
                    "requests": {"cpu": "200m", "memory": "64Mi"},
                },
            },
        },
    },
}
POD = conformance.POD


def nvidia_objects() -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(FIXTURE.read_text()) if o]


def ours() -> list[dict[str, Any]]:
    policy = policy_parser.parse_policy(POLICY)
    inputs = operand_common.OperandRenderInputs(NAMESPACE, False, ImageRef(IMAGE))
    return operand_rendering.render_operand(operand_catalog.DRA_DRIVER, policy, inputs)


def _by(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


@functools.cache
def dra_differences() -> tuple[conformance.Difference, ...]:
    mine, theirs = ours(), nvidia_objects()
    found: list[conformance.Difference] = []
    for kind in ("DaemonSet", "Deployment"):
        my_workloads, their_workloads = _by(mine, kind), _by(theirs, kind)
        for name in sorted(my_workloads.keys() | their_workloads.keys()):
            found += conformance.compare_daemonsets(
                CASE, name, my_workloads.get(name), their_workloads.get(name)
            )
    my_names = {(o["kind"], o["metadata"]["name"]) for o in mine}
    their_names = {(o["kind"], o["metadata"]["name"]) for o in theirs}
    for kind, name in sorted(my_names ^ their_names):
        key = conformance.Key(f"{kind} {name}", POD, "present")
        found.append(conformance.Difference(key, CASE, (kind, name) in my_names, (kind, name) in their_names))
    my_classes, their_classes = _by(mine, "DeviceClass"), _by(theirs, "DeviceClass")
    for name in sorted(my_classes.keys() & their_classes.keys()):
        if my_classes[name]["spec"] != their_classes[name]["spec"]:
            key = conformance.Key(f"DeviceClass {name}", POD, "spec")
            found.append(
                conformance.Difference(key, CASE, my_classes[name]["spec"], their_classes[name]["spec"])
            )
    return tuple(found)


def test_nvidias_full_spec_is_rendered_and_compared() -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in ours()}
    # ComputeDomains: the controller, its DeviceClasses, the plugin's second container.
    assert ("Deployment", "nvidia-dra-driver-controller") in kinds
    assert {
        ("DeviceClass", "compute-domain-daemon.nvidia.com"),
        ("DeviceClass", "compute-domain-default-channel.nvidia.com"),
    } <= kinds
    (plugin,) = _by(ours(), "DaemonSet").values()
    assert [c["name"] for c in plugin["spec"]["template"]["spec"]["containers"]] == [
        "gpus",
        "compute-domains",
    ]
    # The comparison can fail: NVIDIA's own DaemonSet compared with itself has no difference, one
    # with a changed env value has exactly that one.
    (theirs,) = _by(nvidia_objects(), "DaemonSet").values()
    assert list(conformance.compare_daemonsets(CASE, "x", theirs, theirs)) == []
    changed = conformance.copy.deepcopy(theirs)
    changed["spec"]["template"]["spec"]["containers"][1]["env"][0]["value"] = ":9999"
    assert [d.key.field for d in conformance.compare_daemonsets(CASE, "x", changed, theirs)] == [
        "env HTTP_ENDPOINT"
    ]


def test_every_difference_from_nvidias_dra_stack_is_documented() -> None:
    rows = conformance.documented()
    unlisted = [str(d) for d in dra_differences() if conformance.row_for(d.key, rows) is None]
    assert not unlisted, (
        f"{len(unlisted)} differences from NVIDIA's GPUCluster rendering are not in "
        f"{conformance.DOC.name} (fix them, or add a row saying why):\n" + "\n".join(unlisted)
    )


def test_every_documented_dra_difference_still_occurs() -> None:
    rows = {key: why for key, why in conformance.documented(dra_section()).items()}
    used = {conformance.row_for(d.key, rows) for d in dra_differences()}
    stale = [str(row) for row in rows if row not in used]
    assert not stale, (
        f"{conformance.DOC.name}'s DRA section lists differences that no longer occur:\n" + "\n".join(stale)
    )


def dra_section() -> str:
    """The document's DRA section (its rows are checked here, not by the ClusterPolicy cases)."""
    text = conformance.DOC.read_text()
    start = text.index(DRA_SECTION)
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


DRA_SECTION = "## DRA driver (NVIDIA's GPUCluster)"

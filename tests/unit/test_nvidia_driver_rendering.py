"""We test these aspects of rendering per-pool drivers (NVIDIADriver), without a server:

- a golden file (tests/unit/golden/nvidia-driver/two-pools.yaml, rewritten with `--update-golden`):
  two NVIDIADrivers with their own versions, labels and tolerations, each on nodes of two RHCOS
  builds, planned and rendered as the operator does (model/nvidia_driver_spec.py over the ClusterPolicy,
  planning/drivers/driver_pools.py, desired/driver_manifests.py): four DaemonSets;
- each DaemonSet selects its pool's owner label and its RHCOS build, and no two pools' selectors
  overlap; the pool's image, the DTK image of the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.desired import driver_manifests, pool_manifests
from ocp_gpu.model import labels, nodes, nvidia_driver_spec
from ocp_gpu.planning.platforms import Platform, PlatformKind
from tests.unit._drivers import DTK_416, DTK_417, V416, V417

ENV = {
    "DRIVER_IMAGE": "nvcr.io/nvidia/driver:550.90.07",
    "DRIVER_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0",
}
OPENSHIFT = Platform(PlatformKind.OPENSHIFT, "image.openshift.io is served")
POLICY = {"driver": {"useNvidiaDriverCRD": True}}
POOLS = {
    "pool-a": {"version": "570.124.06", "nodeSelector": {"example.com/gpu-pool": "a"}},
    "pool-b": {
        "version": "550.90.07",
        "nodeSelector": {"example.com/gpu-pool": "b"},
        "labels": {"team": "inference"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}
        ],
        "env": [{"name": "NVIDIA_DRIVER_DEBUG", "value": "1"}],
    },
}
IMAGESTREAM = {
    "metadata": {"name": "driver-toolkit", "namespace": "openshift"},
    "spec": {
        "tags": [
            {"name": v, "from": {"kind": "DockerImage", "name": i}}
            for v, i in ((V416, DTK_416), (V417, DTK_417))
        ]
    },
}


def _facts(name: str, pool: str, rhcos: str) -> nodes.NodeFacts:
    found = {
        labels.NFD_NVIDIA_PCI: "true",
        labels.GPU_PRESENT: "true",
        labels.OSTREE_VERSION: rhcos,
        labels.OS_ID: "rhcos",
        labels.OS_VERSION_ID: "4.16",
        labels.OS_RHEL_VERSION: "9.4",
        "example.com/gpu-pool": pool,
    }
    return nodes.NodeFacts(
        name=nodes.NodeName(name),
        labels=found,
        os_image=f"Red Hat Enterprise Linux CoreOS {rhcos} (Plow)",
        kernel_version="5.14.0-427.22.1.el9_4.x86_64",
        unschedulable=False,
        gpus=1,
    )


FACTS = tuple(
    _facts(f"{pool}-{index}", pool[-1], rhcos) for pool in POOLS for index, rhcos in enumerate((V416, V417))
)


def rendered_pools() -> list[dict[str, Any]]:
    """Every pool's DaemonSets, through the functions the reconciler and `ocp-gpu render` share."""
    drivers = [
        nvidia_driver_spec.NvidiaDriver(name, f"uid-{name}", f"2026-01-0{i + 1}T00:00:00Z", 1, spec)
        for i, (name, spec) in enumerate(POOLS.items())
    ]
    selection = pool_manifests.select_pools(
        drivers, POLICY, ENV, {facts.name: facts.labels for facts in FACTS}
    )
    assert not selection.invalid and not selection.owners.conflicts
    view = driver_manifests.DriverView(
        namespace=labels.OPENSHIFT_NAMESPACE,
        env=ENV,
        node_facts=FACTS,
        dtk_imagestream=IMAGESTREAM,
        config_map_keys={},
    )
    found: list[dict[str, Any]] = []
    for driver in selection.drivers:
        desired = pool_manifests.desired_pool_manifests(
            driver,
            selection.policies[driver.name],
            OPENSHIFT,
            pool_manifests.pool_view(driver, selection.owners, view),
        )
        assert isinstance(desired, driver_manifests.DriverManifests), desired
        found += [m for m in desired.manifests if m["kind"] == "DaemonSet"]
    return found


def test_golden_two_pools(update_golden: bool, golden_dir: Path) -> None:
    rendered = rendered_pools()
    path = golden_dir / "nvidia-driver" / "two-pools.yaml"
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump_all(rendered, sort_keys=False, width=120))
    assert path.exists(), f"{path} missing: run `pytest tests/unit --update-golden`"
    assert rendered == list(yaml.safe_load_all(path.read_text())), (
        f"differs from {path}; rerun with --update-golden"
    )


def test_each_pool_daemonset_selects_its_pool_and_build_only() -> None:
    rendered = {ds["metadata"]["name"]: ds for ds in rendered_pools()}
    expected = {f"nvidia-gpu-driver-{pool}-{v}": (pool, v) for pool in POOLS for v in (V416, V417)}
    assert set(rendered) == set(expected)
    selectors = set()
    for name, (pool, version) in expected.items():
        pod = rendered[name]["spec"]["template"]["spec"]
        assert pod["nodeSelector"][labels.NVIDIA_DRIVER_OWNER] == pool
        assert pod["nodeSelector"][labels.OSTREE_VERSION] == version
        images = {c["name"]: c["image"] for c in pod["containers"]}
        assert images["nvidia-driver-ctr"].endswith(f":{POOLS[pool]['version']}-rhcos4.16")
        assert images["openshift-driver-toolkit-ctr"] == (DTK_416 if version == V416 else DTK_417)
        selectors.add(tuple(sorted(rendered[name]["spec"]["selector"]["matchLabels"].items())))
    assert len(selectors) == 4
    b = rendered[f"nvidia-gpu-driver-pool-b-{V416}"]["spec"]["template"]
    assert b["metadata"]["labels"]["team"] == "inference"
    assert {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"} in b[
        "spec"
    ]["tolerations"]

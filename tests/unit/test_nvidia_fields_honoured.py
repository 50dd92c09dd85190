"""ClusterPolicy fields ocp-gpu used to refuse and now honours as NVIDIA's v26.7.0 code does.

We test these aspects:
- `<operand>.hostNetwork: true` puts that operand's pods (and only them) on the host's network with
  dnsPolicy ClusterFirstWithHostNet (NVIDIA's applyHostNetworkConfig), for every operand and the
  driver; a network sysctl then holds the operand back as for `dcgm.hostNetwork`;
- `hostPaths.kubeletRootDir` moves the device plugin's and the DCGM exporter's kubelet sockets'
  host directories, not their paths inside the containers;
- `driver.virtualTopology.config` mounts the ConfigMap's nvidia-topologyd.conf where the driver
  container reads it, and a ConfigMap without that key is an error naming the field;
- an NVIDIADriver's `hostNetwork` and `virtualTopologyConfig.name` reach its pool's DaemonSet;
- the fields NVIDIA's code reads nowhere (`operator.labels`, `operator.annotations`,
  `operator.initContainer`, `gds.args`, `gdrcopy.args`) are deprecated-and-ignored, as there.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from ocp_gpu.commands import render
from ocp_gpu.model import nvidia_driver_spec
from ocp_gpu.model.policy import fields
from tests.unit import _conformance as conformance

BASE = next(case for case in conformance.cases() if case.name == "operatorhub")
# Every operand's section and its DaemonSet (the driver's: any driver DaemonSet).
OPERANDS = {
    "toolkit": "nvidia-container-toolkit-daemonset",
    "validator": "nvidia-operator-validator",
    "devicePlugin": "nvidia-device-plugin-daemonset",
    "dcgm": "nvidia-dcgm",
    "dcgmExporter": "nvidia-dcgm-exporter",
    "gfd": "gpu-feature-discovery",
    "migManager": "nvidia-mig-manager",
    "nodeStatusExporter": "nvidia-node-status-exporter",
    "driver": "driver",
}


def rendering(spec: Mapping[str, Any], config_maps: Mapping[str, Mapping[str, str]] | None = None) -> Any:
    """ocp-gpu's rendering of NVIDIA's OperatorHub example with `spec` merged over it."""
    header = copy.deepcopy(dict(BASE.header))
    header["clusterPolicy"]["spec"] = merged(header["clusterPolicy"]["spec"], spec)
    header["objects"] = [
        {"kind": "ConfigMap", "metadata": {"name": name}, "data": dict(data)}
        for name, data in (config_maps or {}).items()
    ]
    return conformance.render_case(conformance.Case("x", header, ()))


def merged(base: Any, change: Any) -> Any:
    if isinstance(base, Mapping) and isinstance(change, Mapping):
        return {**base, **{key: merged(base.get(key), value) for key, value in change.items()}}
    return copy.deepcopy(change)


def daemonsets(result: render.Rendering) -> dict[str, dict[str, Any]]:
    found = {}
    for manifest in result.manifests:
        if manifest["kind"] == "DaemonSet":
            name = manifest["metadata"]["name"]
            found["driver" if name.startswith("nvidia-driver-daemonset") else name] = manifest
    return found


def pod(daemonset: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = daemonset["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("section", sorted(OPERANDS))
def test_host_network_puts_only_that_operand_on_the_host_network(section: str) -> None:
    result = rendering({section: {"hostNetwork": True}})
    assert not result.errors, result.errors
    rendered = daemonsets(result)
    assert set(OPERANDS.values()) <= set(rendered)
    for other, name in OPERANDS.items():
        spec = pod(rendered[name])
        if other == section:
            assert spec.get("hostNetwork") is True and spec.get("dnsPolicy") == "ClusterFirstWithHostNet", (
                name
            )
        else:
            assert not spec.get("hostNetwork") and "dnsPolicy" not in spec, name


def test_a_network_sysctl_holds_back_an_operand_on_the_host_network() -> None:
    sysctls = {
        "daemonsets": {"podSecurityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1"}]}}
    }
    result = rendering({**sysctls, "gfd": {"hostNetwork": True}})
    problems = [p for p in result.problems if "spec.gfd.hostNetwork is true" in p.message]
    assert problems, [p.message for p in result.problems]
    assert "gpu-feature-discovery" not in daemonsets(result)
    assert "nvidia-device-plugin-daemonset" in daemonsets(result)


def _host_path(daemonset: Mapping[str, Any], mount_path: str) -> str:
    spec = pod(daemonset)
    for container in spec["containers"]:
        for mount in container.get("volumeMounts") or []:
            if mount["mountPath"] == mount_path:
                volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
                path: str = volume["hostPath"]["path"]
                return path
    raise AssertionError(f"no mount at {mount_path}")


@pytest.mark.parametrize("root", ["/var/lib/kubelet", "/data/kubelet", "/data/kubelet/"])
def test_kubelet_root_dir_moves_the_kubelet_sockets_host_directories(root: str) -> None:
    rendered = daemonsets(rendering({"hostPaths": {"kubeletRootDir": root}}))
    want = root.rstrip("/")
    assert (
        _host_path(rendered["nvidia-device-plugin-daemonset"], "/var/lib/kubelet/device-plugins")
        == f"{want}/device-plugins"
    )
    assert (
        _host_path(rendered["nvidia-dcgm-exporter"], "/var/lib/kubelet/pod-resources")
        == f"{want}/pod-resources"
    )
    assert not fields.unsupported_settings({"hostPaths": {"kubeletRootDir": root}})


def test_virtual_topology_mounts_the_topology_daemon_config() -> None:
    result = rendering(
        {"driver": {"virtualTopology": {"config": "topology"}}},
        {"topology": {"nvidia-topologyd.conf": "[topology]\n"}},
    )
    assert not result.errors, result.errors
    driver = daemonsets(result)["driver"]
    container = next(c for c in pod(driver)["containers"] if c["name"] == "nvidia-driver-ctr")
    mount = next(m for m in container["volumeMounts"] if m["name"] == "topology-config")
    assert mount == {
        "name": "topology-config",
        "mountPath": "/etc/nvidia/nvidia-topologyd.conf",
        "subPath": "nvidia-topologyd.conf",
        "readOnly": True,
    }
    volume = next(v for v in pod(driver)["volumes"] if v["name"] == "topology-config")
    assert volume["configMap"] == {
        "name": "topology",
        "items": [{"key": "nvidia-topologyd.conf", "path": "nvidia-topologyd.conf"}],
    }
    without = daemonsets(rendering({}))["driver"]
    assert all(v["name"] != "topology-config" for v in pod(without)["volumes"])


@pytest.mark.parametrize(
    ("config_maps", "words"),
    [({}, "does not exist"), ({"topology": {"other.conf": ""}}, "no key 'nvidia-topologyd.conf'")],
)
def test_a_virtual_topology_config_map_that_cannot_be_mounted_is_an_error(
    config_maps: Mapping[str, Mapping[str, str]], words: str
) -> None:
    result = rendering({"driver": {"virtualTopology": {"config": "topology"}}}, config_maps)
    assert [p.field for p in result.errors] == ["spec.driver.virtualTopology.config"]
    assert words in result.errors[0].message


def test_an_nvidia_driver_pool_takes_its_host_network_and_virtual_topology() -> None:
    spec = nvidia_driver_spec.cluster_policy_spec(
        {"driver": {"enabled": True}},
        {"hostNetwork": True, "virtualTopologyConfig": {"name": "topology"}, "version": "580.95.05"},
    )
    assert spec["driver"]["hostNetwork"] is True
    assert spec["driver"]["virtualTopology"] == {"config": "topology"}
    assert nvidia_driver_spec.nvidia_driver_field("spec.driver.virtualTopology.config") == (
        "spec.virtualTopologyConfig.name"
    )
    assert (
        nvidia_driver_spec.refused_settings({"hostNetwork": True, "virtualTopologyConfig": {"name": "t"}})
        == {}
    )


@pytest.mark.parametrize(
    "spec",
    [
        {"operator": {"labels": {"team": "gpu"}}},
        {"operator": {"annotations": {"team": "gpu"}}},
        {"operator": {"initContainer": {"repository": "nvcr.io/nvidia", "image": "cuda", "version": "12"}}},
        {"gds": {"args": ["--verbose"]}},
        {"gdrcopy": {"args": ["--verbose"]}},
    ],
)
def test_fields_nvidia_reads_nowhere_are_ignored_as_there(spec: dict[str, Any]) -> None:
    settings = fields.unsupported_settings(spec)
    assert settings, spec
    for setting in settings:
        rule = fields.rule_for(setting.path)
        assert rule is not None and rule.support is fields.Support.IGNORED, setting.path
        assert "NVIDIA's operator (v26.7.0)" in rule.note
    # and the rendering is the same as without them
    assert rendering(spec).manifests == rendering({}).manifests


@pytest.mark.parametrize(
    "path",
    [
        "spec.driver.hostNetwork",
        "spec.toolkit.hostNetwork",
        "spec.migManager.hostNetwork",
        "spec.driver.virtualTopology.config",
        "spec.hostPaths.kubeletRootDir",
    ],
)
def test_the_fields_are_honoured(path: str) -> None:
    rule = fields.rule_for(path)
    assert rule is not None and rule.support is fields.Support.HONOURED

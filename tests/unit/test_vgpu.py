"""vGPU for virtual machines (issue 26, item 2): the vGPU manager, the vGPU device manager and the
sandbox validator's vGPU checks, without a server.

We test these aspects:
- the default vGPU devices config: NVIDIA's counts and default types for the products it covers;
- the vGPU manager's plan: the driver's mechanism on the vm-vgpu nodes only, one DaemonSet per
  RHCOS build with NVIDIA's names and selector on OpenShift, one per OS elsewhere, collected when
  its build has no vm-vgpu node left;
- the image NVIDIA does not publish: unset with vm-vgpu nodes is an Error naming the fields and how
  to build it; unset without them is nothing;
- its rendering: the Driver Toolkit sidecar and entrypoint on OpenShift, `nvidia-driver init`
  elsewhere, the `<version>-<os>` tag, its node selector and NVIDIA's pod labels;
- the sandbox validator's vgpu-manager and vgpu-devices checks on a host tree.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ocp_gpu.commands import render, validate
from ocp_gpu.desired import driver_manifests, vgpu_manager_manifests
from ocp_gpu.kube import reading
from ocp_gpu.model import labels, vgpu_catalog
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.planning import platforms

OPENSHIFT = platforms.Platform(platforms.PlatformKind.OPENSHIFT, "test")
VANILLA = platforms.Platform(platforms.PlatformKind.KUBERNETES, "test")
BUILD_A, BUILD_B = "417.94.202501010000-0", "418.94.202502020000-0"
IMAGE = {"repository": "registry.example.com/nvidia", "image": "vgpu-manager", "version": "570.124.03"}
DTK_A = "quay.io/openshift/dtk@sha256:" + "a" * 64


def node(name: str, build: str, *, vgpu: bool = True, os_id: str = "rhcos", version: str = "4.17") -> Any:
    node_labels = {
        labels.NFD_NVIDIA_PCI: "true",
        labels.OSTREE_VERSION: build,
        labels.OS_ID: os_id,
        labels.OS_VERSION_ID: version,
    }
    if vgpu:
        node_labels |= {labels.GPU_WORKLOAD_CONFIG: "vm-vgpu", labels.deploy_label("vgpu-manager"): "true"}
    return reading.node_facts({"metadata": {"name": name, "labels": node_labels}})


def view(*facts: Any, daemonsets: tuple[Any, ...] = ()) -> driver_manifests.DriverView:
    stream = {
        "metadata": {"name": "driver-toolkit", "namespace": "openshift"},
        "spec": {"tags": [{"name": BUILD_A, "from": {"kind": "DockerImage", "name": DTK_A}}]},
    }
    return driver_manifests.DriverView(
        namespace="nvidia-gpu-operator",
        env={"DRIVER_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"},
        node_facts=facts,
        daemonsets=daemonsets,
        dtk_imagestream=stream,
        cluster_version={"status": {"desired": {"version": "4.17.3"}}},
    )


def desired(spec: dict[str, Any], platform: platforms.Platform, seen: driver_manifests.DriverView) -> Any:
    policy = policy_parser.parse_policy(spec)
    return vgpu_manager_manifests.desired_vgpu_manager_manifests(policy, platform, seen)


ENABLED = {"sandboxWorkloads": {"enabled": True}, "vgpuManager": {"enabled": True, **IMAGE}}


def daemonsets(manifests: Any) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == "DaemonSet"}


# --- the default vGPU devices config -----------------------------------------------------------


@pytest.mark.parametrize(
    ("vgpu_type", "count"),
    # NVIDIA's default-vgpu-devices-config at v26.7.0 (assets/state-vgpu-device-manager/0500_configmap.yaml).
    [("A10-4Q", 6), ("A10-24C", 1), ("A40-1Q", 32), ("A16-2Q", 8), ("L40S-24Q", 2), ("L4-3Q", 8)],
)
def test_default_config_counts_are_nvidias(vgpu_type: str, count: int) -> None:
    configs = vgpu_catalog.default_configs()["vgpu-configs"]
    assert configs[vgpu_type] == [{"devices": "all", "vgpu-devices": {vgpu_type: count}}]


def test_default_config_picks_nvidias_type_per_gpu() -> None:
    default = vgpu_catalog.default_configs()["vgpu-configs"]["default"]
    assert {"device-filter": "0x223610DE", "devices": "all", "vgpu-devices": {"A10-12Q": 2}} in default
    assert {"device-filter": "0x26B910DE", "devices": "all", "vgpu-devices": {"L40S-24Q": 2}} in default
    # no C type smaller than 4 GB, as NVIDIA's
    assert "A10-2C" not in vgpu_catalog.default_configs()["vgpu-configs"]


# --- the vGPU manager's plan -------------------------------------------------------------------


def test_one_daemonset_per_rhcos_build_of_the_vgpu_nodes_only() -> None:
    seen = view(
        node("a1", BUILD_A), node("a2", BUILD_A), node("b1", BUILD_B), node("c1", BUILD_A, vgpu=False)
    )
    found = desired(ENABLED, OPENSHIFT, seen)
    assert [(d.name, d.nodes) for d in found.plan.desired] == [
        (f"nvidia-vgpu-manager-daemonset-{BUILD_A}", ("a1", "a2")),
        (f"nvidia-vgpu-manager-daemonset-{BUILD_B}", ("b1",)),
    ]
    by_name = daemonsets(found.manifests)
    ds = by_name[f"nvidia-vgpu-manager-daemonset-{BUILD_A}"]
    # NVIDIA's selector and DTK labels, our component (never the driver's)
    assert ds["spec"]["selector"]["matchLabels"] == {"app": f"nvidia-vgpu-manager-daemonset-{BUILD_A}"}
    assert ds["metadata"]["labels"]["openshift.driver-toolkit"] == "true"
    assert ds["metadata"]["labels"]["openshift.driver-toolkit.rhcos"] == BUILD_A
    assert ds["metadata"]["labels"][labels.COMPONENT] == labels.VGPU_MANAGER_COMPONENT
    assert labels.PRECOMPILED not in ds["metadata"]["labels"]
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        "nvidia.com/gpu.deploy.vgpu-manager": "true",
        labels.OSTREE_VERSION: BUILD_A,
    }
    main, sidecar = pod["containers"]
    assert (main["name"], main["command"], main["args"]) == (
        "nvidia-vgpu-manager-ctr",
        ["ocp_dtk_entrypoint"],
        ["nv-ctr-run-with-dtk"],
    )
    assert main["image"] == "registry.example.com/nvidia/vgpu-manager:570.124.03-rhcos4.17"
    assert {"name": "OPENSHIFT_VERSION", "value": "4.17"} in main["env"]
    assert sidecar["name"] == "openshift-driver-toolkit-ctr"
    assert sidecar["image"] == DTK_A
    assert {"name": "RHCOS_VERSION", "value": BUILD_A} in sidecar["env"]
    assert pod["initContainers"][0]["image"] == "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"
    # the build without a DTK tag: NVIDIA's fallback (the sidecar runs the vGPU manager image)
    missing = by_name[f"nvidia-vgpu-manager-daemonset-{BUILD_B}"]
    assert missing["metadata"]["labels"]["openshift.driver-toolkit.rhcos-image-missing"] == "true"
    assert {"name": "RHCOS_IMAGE_MISSING", "value": "true"} in missing["spec"]["template"]["spec"][
        "containers"
    ][0]["env"]
    # the shared objects once: ServiceAccount, RBAC
    kinds = [m["kind"] for m in found.manifests if m["kind"] != "DaemonSet"]
    assert sorted(kinds) == ["ClusterRole", "ClusterRoleBinding", "RoleBinding", "ServiceAccount"]


def test_vanilla_keys_by_os_and_runs_nvidia_driver_init() -> None:
    seen = view(
        node("u1", "", os_id="ubuntu", version="22.04"), node("u2", "", os_id="ubuntu", version="24.04")
    )
    found = desired(ENABLED, VANILLA, seen)
    by_name = daemonsets(found.manifests)
    assert sorted(by_name) == [
        "nvidia-vgpu-manager-daemonset-ubuntu22.04",
        "nvidia-vgpu-manager-daemonset-ubuntu24.04",
    ]
    ds = by_name["nvidia-vgpu-manager-daemonset-ubuntu22.04"]
    assert ds["spec"]["selector"]["matchLabels"]["app"] == "nvidia-vgpu-manager-daemonset"
    (main,) = ds["spec"]["template"]["spec"]["containers"]
    assert (main["command"], main["args"]) == (["nvidia-driver"], ["init"])
    assert main["image"] == "registry.example.com/nvidia/vgpu-manager:570.124.03-ubuntu22.04"


def test_a_build_without_vgpu_nodes_is_collected() -> None:
    first = desired(ENABLED, OPENSHIFT, view(node("a1", BUILD_A)))
    (entry,) = first.plan.desired
    manifest = daemonsets(first.manifests)[entry.name]
    existing = reading.driver_daemonset(manifest)
    # the node moved on to another build: its old DaemonSet has no node left
    later = desired(ENABLED, OPENSHIFT, view(node("a1", BUILD_B), daemonsets=(existing,)))
    assert [d.name for d in later.plan.desired] == [f"nvidia-vgpu-manager-daemonset-{BUILD_B}"]
    assert [s.name for s in later.plan.stale] == [entry.name]


def test_the_unpublished_image_unset_is_an_error_only_with_vgpu_nodes() -> None:
    spec = {"sandboxWorkloads": {"enabled": True}, "vgpuManager": {"enabled": True}}
    problem = desired(spec, OPENSHIFT, view(node("a1", BUILD_A)))
    assert isinstance(problem, PolicyProblem)
    assert problem.field.startswith("spec.vgpuManager")
    assert "NVIDIA does not publish it" in problem.message
    assert "spec.vgpuManager.repository, spec.vgpuManager.image and spec.vgpuManager.version" in problem.fix
    # no vm-vgpu node: nothing to deploy, nothing to say
    quiet = desired(spec, OPENSHIFT, view(node("c1", BUILD_A, vgpu=False)))
    assert not isinstance(quiet, PolicyProblem)
    assert quiet.plan.desired == () and quiet.manifests == ()


def test_kernel_module_config_is_mounted_under_drivers_as_nvidias() -> None:
    spec = {
        **ENABLED,
        "vgpuManager": {**ENABLED["vgpuManager"], "kernelModuleConfig": {"name": "vgpu-params"}},
    }
    keys = {"vgpu-params": ("nvidia.conf", "extra.conf")}
    found = desired(spec, OPENSHIFT, dataclasses.replace(view(node("a1", BUILD_A)), config_map_keys=keys))
    pod = daemonsets(found.manifests)[f"nvidia-vgpu-manager-daemonset-{BUILD_A}"]["spec"]["template"]["spec"]
    main, sidecar = pod["containers"]
    # NVIDIA's TransformVGPUManager: one subPath mount per key (sorted) at /drivers/<key>, the main
    # container only, the ConfigMap's keys as the volume's items.
    mounts = [m for m in main["volumeMounts"] if m["name"] == "kernel-module-config"]
    assert mounts == [
        {
            "name": "kernel-module-config",
            "mountPath": "/drivers/extra.conf",
            "subPath": "extra.conf",
            "readOnly": True,
        },
        {
            "name": "kernel-module-config",
            "mountPath": "/drivers/nvidia.conf",
            "subPath": "nvidia.conf",
            "readOnly": True,
        },
    ]
    assert not [m for m in sidecar["volumeMounts"] if m["name"] == "kernel-module-config"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "kernel-module-config"]
    assert volume["configMap"] == {
        "name": "vgpu-params",
        "items": [{"key": "extra.conf", "path": "extra.conf"}, {"key": "nvidia.conf", "path": "nvidia.conf"}],
    }
    # unset: no such volume
    plain = desired(ENABLED, OPENSHIFT, view(node("a1", BUILD_A)))
    plain_pod = daemonsets(plain.manifests)[f"nvidia-vgpu-manager-daemonset-{BUILD_A}"]["spec"]["template"][
        "spec"
    ]
    assert "kernel-module-config" not in {v["name"] for v in plain_pod["volumes"]}


def test_a_missing_kernel_module_config_is_an_error_naming_the_field() -> None:
    spec = {
        **ENABLED,
        "vgpuManager": {**ENABLED["vgpuManager"], "kernelModuleConfig": {"name": "vgpu-params"}},
    }
    absent = dataclasses.replace(view(node("a1", BUILD_A)), config_map_keys={"vgpu-params": None})
    problem = desired(spec, OPENSHIFT, absent)
    assert isinstance(problem, PolicyProblem)
    assert problem.field == "spec.vgpuManager.kernelModuleConfig.name"
    assert "'vgpu-params' does not exist" in problem.message
    # offline (nothing read): its keys decide the mounts, so it is said rather than guessed
    offline = desired(spec, OPENSHIFT, view(node("a1", BUILD_A)))
    assert isinstance(offline, PolicyProblem) and "cannot be read offline" in offline.message
    # no vm-vgpu node: nothing to deploy, nothing to say
    quiet = desired(
        spec, OPENSHIFT, dataclasses.replace(absent, node_facts=(node("c1", BUILD_A, vgpu=False),))
    )
    assert not isinstance(quiet, PolicyProblem)


def test_render_labels_the_vm_vgpu_nodes_as_the_labeller_does() -> None:
    # A file of nodes: the workload label only, no deploy label yet (nothing ran the labeller).
    bare = [node("a1", BUILD_A, vgpu=False), node("a2", BUILD_A, vgpu=False), node("c1", BUILD_A, vgpu=False)]
    workload = {"a1": "vm-vgpu", "a2": "vm-passthrough", "c1": "container"}
    facts = tuple(
        dataclasses.replace(f, labels={**f.labels, labels.GPU_WORKLOAD_CONFIG: workload[f.name]})
        for f in bare
    )
    policy = policy_parser.parse_policy(ENABLED)
    by_name = {f.name: f.labels for f in render.labelled_nodes(policy, facts)}
    assert by_name["a1"][labels.deploy_label("vgpu-manager")] == "true"
    assert labels.deploy_label("vfio-manager") not in by_name["a1"]
    assert by_name["a2"][labels.deploy_label("vfio-manager")] == "true"
    assert labels.deploy_label("vgpu-manager") not in by_name["a2"]
    assert by_name["c1"][labels.deploy_label("device-plugin")] == "true"
    found = desired(
        ENABLED, OPENSHIFT, dataclasses.replace(view(), node_facts=render.labelled_nodes(policy, facts))
    )
    assert [(d.name, d.nodes) for d in found.plan.desired] == [
        (f"nvidia-vgpu-manager-daemonset-{BUILD_A}", ("a1",))
    ]
    # sandboxWorkloads off: the label is ignored (NVIDIA's), no vGPU manager anywhere
    off = policy_parser.parse_policy({**ENABLED, "sandboxWorkloads": {"enabled": False}})
    assert all(labels.deploy_label("vgpu-manager") not in f.labels for f in render.labelled_nodes(off, facts))


# --- the sandbox validator's vGPU checks ---------------------------------------------------------


def _pf(host: Path, address: str, total: int, enabled: int) -> None:
    device = host / "sys/bus/pci/devices" / address
    device.mkdir(parents=True)
    (device / "vendor").write_text("0x10de\n")
    (device / "sriov_totalvfs").write_text(f"{total}\n")
    (device / "sriov_numvfs").write_text(f"{enabled}\n")


def test_vgpu_parents_need_every_vf_or_an_mdev_parent(tmp_path: Path) -> None:
    host = tmp_path / "host"
    assert validate.vgpu_parents_missing(host) is not None
    # SR-IOV (Ampere and later): every PF with all its VFs
    _pf(host, "0000:3b:00.0", 16, 16)
    _pf(host, "0000:5e:00.0", 16, 4)
    missing = validate.vgpu_parents_missing(host)
    assert missing is not None and "0000:5e:00.0 (4/16)" in missing
    (host / "sys/bus/pci/devices/0000:5e:00.0/sriov_numvfs").write_text("16\n")
    assert validate.vgpu_parents_missing(host) is None


def test_vgpu_parents_without_sriov_are_mdev_parents(tmp_path: Path) -> None:
    host = tmp_path / "host"
    _pf(host, "0000:3b:00.0", 0, 0)
    assert validate.vgpu_parents_missing(host) is not None
    (host / "sys/class/mdev_bus/0000:3b:00.0").mkdir(parents=True)
    assert validate.vgpu_parents_missing(host) is None


def test_vgpu_devices_are_the_mdev_devices(tmp_path: Path) -> None:
    host = tmp_path / "host"
    assert validate.vgpu_devices(host) == []
    (host / "sys/bus/mdev/devices/5e3f0a8e-1c2b-4b6e-9d7a-0a1b2c3d4e5f").mkdir(parents=True)
    assert validate.vgpu_devices(host) == ["5e3f0a8e-1c2b-4b6e-9d7a-0a1b2c3d4e5f"]


@pytest.mark.parametrize("component", ["vgpu-manager", "vgpu-devices"])
def test_vgpu_checks_are_commands_beside_the_components(component: str) -> None:
    assert validate.parse([component]).component == component


def test_vgpu_devices_writes_its_marker_on_vm_vgpu_nodes_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host, markers = tmp_path / "host", tmp_path / "validations"
    (host / "sys/bus/mdev/devices/one").mkdir(parents=True)
    workload = {"value": "vm-passthrough"}

    def node_workload(args: Any, env: Any, check: str) -> str:
        markers.mkdir(exist_ok=True)
        (markers / validate.WORKLOAD_TYPE_MARKER).write_text(workload["value"] + "\n")
        return workload["value"]

    monkeypatch.setattr(validate, "node_workload", node_workload)
    args = validate.parse(
        ["vgpu-devices", "--host-root", str(host), "--validations-dir", str(markers), "--retry-for", "0"]
    )
    assert validate.main(args, env={}) == 0
    assert not (markers / validate.VGPU_DEVICES_MARKER).exists()
    workload["value"] = "vm-vgpu"
    assert validate.main(args, env={}) == 0
    assert (markers / validate.VGPU_DEVICES_MARKER).exists()
    # no device left: the check fails and the marker goes
    (host / "sys/bus/mdev/devices/one").rmdir()
    assert validate.main(args, env={}) == 1
    assert not (markers / validate.VGPU_DEVICES_MARKER).exists()

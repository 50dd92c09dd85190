"""We test these aspects of what makes a driver pod outdated (planning/drivers/driver_currency.py, the rule):

- NVIDIA's driver pod template (its labels, probes, mounts and env of its own, no sidecar env of
  ours) installing the driver ocp-gpu renders is current: no reasons;
- each thing the rule compares, changed alone, makes the pod outdated and is named: the driver
  image (version), the driver-toolkit image, KERNEL_MODULE_TYPE (absent means auto), RDMA, GDS
  and GDRCopy (their env and module containers), a repository, certificate, kernel module or
  licensing ConfigMap or Secret;
- what the rule ignores, changed, keeps the pod current: labels, probes, resources, the init
  container, other env, the operator's own mounts;
- every directory ocp-gpu mounts driver configuration into is one the rule reads;
- the same driver (repository, image, version) built for another OS (tags `<version>-<os>`) is the
  same driver: a working pod of it is current, a failing one outdated; another version, a
  precompiled tag (kernel in it), a digest are not "another OS's build";
- check_driver: a pod of an older revision installing the desired driver is current (Ready,
  previous_template) unless it is failing (a restart can only help it); one installing another
  driver is outdated with the reason; an unknown install keeps the revision rule;
  on_previous_template counts them, and the condition says so.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from ocp_gpu.model.driver_install import DriverInstall
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.upgrade_observations import DriverPod, DriverRevision, PodRef, UpgradeNode, UpgradeSnapshot
from ocp_gpu.planning.drivers import driver_check, driver_currency
from ocp_gpu.rendering.operands import driver_rendering
from tests.unit.test_driver_rendering import MODULE_IMAGES, SCENARIOS, daemonsets, render

DTK_IMAGE = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "1" * 64


def ours() -> dict[str, Any]:
    """ocp-gpu's rendered DTK driver pod template (every configuration field set)."""
    desired, spec, inputs = SCENARIOS["honoured-nvidia-fields"]
    with_modules = dataclasses.replace(inputs, module_images=MODULE_IMAGES)
    (daemonset, *_) = daemonsets(render(desired, spec, with_modules))
    spec_: dict[str, Any] = daemonset["spec"]["template"]["spec"]
    return spec_


def containers(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in spec["containers"]}


def nvidia_like(spec: dict[str, Any]) -> dict[str, Any]:
    """The same install, written as NVIDIA's operator does: other volume names, probes, env, labels."""
    other = copy.deepcopy(spec)
    driver = containers(other)["nvidia-driver-ctr"]
    driver["startupProbe"] = {"exec": {"command": ["sh", "-c", "nvidia-smi"]}, "periodSeconds": 10}
    driver["env"] = [e for e in driver.get("env", []) if e["name"] != "DRIVER_CONFIG_DIGEST"] + [
        {"name": "DRIVER_CONFIG_DIGEST", "value": "nvidia-computes-its-own"},
        {"name": "NVIDIA_ONLY", "value": "1"},
    ]
    driver["resources"] = {"limits": {"memory": "1Gi"}}
    # NVIDIA names a ConfigMap's volume after the ConfigMap: renaming changes nothing installed
    renames = {v["name"]: f"nv-{v['name']}" for v in other["volumes"]}
    for volume in other["volumes"]:
        volume["name"] = renames[volume["name"]]
    for container in other["containers"] + other.get("initContainers", []):
        for mount in container.get("volumeMounts", []):
            mount["name"] = renames[mount["name"]]
    other["initContainers"] = []
    other["volumes"].append({"name": "extra", "hostPath": {"path": "/run/nvidia-extra"}})
    driver.setdefault("volumeMounts", []).append({"name": "extra", "mountPath": "/run/nvidia-extra"})
    return other


def install(spec: dict[str, Any]) -> DriverInstall:
    found = driver_currency.driver_install(spec)
    assert found is not None
    return found


def test_nvidias_template_with_our_driver_is_current() -> None:
    spec = ours()
    assert install(spec).config, "the scenario mounts repo, cert, kernel module and licensing config"
    assert driver_currency.outdated_reasons(install(nvidia_like(spec)), install(spec)) == ()


def _set_env(spec: dict[str, Any], name: str, value: str | None) -> None:
    driver = containers(spec)["nvidia-driver-ctr"]
    driver["env"] = [e for e in driver["env"] if e["name"] != name]
    if value is not None:
        driver["env"].append({"name": name, "value": value})


def _image(spec: dict[str, Any]) -> None:
    containers(spec)["nvidia-driver-ctr"]["image"] = "nvcr.io/nvidia/driver:580.65.06-rhcos4.16"


def _dtk(spec: dict[str, Any]) -> None:
    containers(spec)["openshift-driver-toolkit-ctr"]["image"] = DTK_IMAGE


def _module_type(spec: dict[str, Any]) -> None:
    _set_env(spec, "KERNEL_MODULE_TYPE", "proprietary")


def _rdma(spec: dict[str, Any]) -> None:
    _set_env(spec, "GPU_DIRECT_RDMA_ENABLED", "true")


def _gds_container(spec: dict[str, Any]) -> None:
    spec["containers"] = [c for c in spec["containers"] if c["name"] != "nvidia-fs-ctr"]


def _config_map(spec: dict[str, Any], old: str) -> None:
    for volume in spec["volumes"]:
        if (volume.get("configMap") or {}).get("name") == old:
            volume["configMap"]["name"] = f"{old}-v2"
            return
    raise AssertionError(f"no volume of ConfigMap {old}")


def _licensing(spec: dict[str, Any]) -> None:
    for volume in spec["volumes"]:
        if "secret" in volume and volume["secret"].get("secretName") == "licensing":
            volume["secret"]["secretName"] = "licensing-v2"
            return
    raise AssertionError("no licensing Secret volume")


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_image, "driver image"),
        (_dtk, "driver-toolkit image"),
        (_module_type, "KERNEL_MODULE_TYPE"),
        (_rdma, "GPU_DIRECT_RDMA_ENABLED"),
        (_gds_container, "module containers"),
        (lambda s: _config_map(s, "repos"), "driver configuration"),
        (lambda s: _config_map(s, "certs"), "driver configuration"),
        (lambda s: _config_map(s, "module-params"), "driver configuration"),
        (_licensing, "driver configuration"),
    ],
    ids=[
        "image",
        "dtk",
        "kernel-module-type",
        "rdma",
        "gds",
        "repo",
        "cert",
        "kernel-module-config",
        "licensing",
    ],
)
def test_each_install_change_makes_the_pod_outdated(change: Any, named: str) -> None:
    desired = ours()
    running = nvidia_like(desired)
    change(running)
    reasons = driver_currency.outdated_reasons(install(running), install(desired))
    assert len(reasons) == 1 and named in reasons[0], reasons


def test_absent_kernel_module_type_means_auto() -> None:
    desired = ours()
    running = copy.deepcopy(desired)
    _set_env(desired, "KERNEL_MODULE_TYPE", "auto")
    _set_env(running, "KERNEL_MODULE_TYPE", None)
    assert driver_currency.outdated_reasons(install(running), install(desired)) == ()


def test_every_config_dir_we_mount_is_one_the_rule_reads() -> None:
    for os in ("rhcos", "rhel", "ubuntu", "sles"):
        for field in ("spec.driver.repoConfig.configMapName", "spec.driver.certConfig.name", "kernel"):
            where = driver_rendering.config_dir(field, os)
            assert where is not None and where in driver_currency.CONFIG_DIRS, (field, os, where)
    assert driver_rendering.LICENSING_PATH.startswith("/drivers/")
    assert driver_rendering.NLS_TOKEN_PATH.startswith("/drivers/")


DS = "nvidia-driver-daemonset-416.94.202407030122-0"
SAME = install(ours())
OTHER = install(
    {"containers": [{"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:580-rhcos4.16"}]}
)


def pod(revision: str, installs: DriverInstall | None, ready: bool = True) -> DriverPod:
    return DriverPod(
        ref=PodRef(namespace="ns", name=f"driver-{revision}", uid=f"uid-{revision}"),
        node=NodeName("n1"),
        daemonset=DS,
        revision_hash=revision,
        ready=ready,
        install=installs,
    )


def check(driver: DriverPod) -> driver_check.DriverStatus:
    node = UpgradeNode(name=NodeName("n1"), driver_pods=(driver,))
    snapshot = UpgradeSnapshot(
        nodes=(node,), daemonsets={DS: DriverRevision(daemonset=DS, current_hash="new", install=SAME)}
    )
    return driver_check.check_driver(node, snapshot)


def test_a_pod_of_an_older_template_with_the_desired_driver_is_current() -> None:
    status = check(pod("old", SAME))
    assert (status.check, status.current, status.previous_template) == (
        driver_check.DriverCheck.READY,
        True,
        True,
    )
    assert "previous template" in status.detail
    starting = check(pod("old", SAME, ready=False))
    assert (starting.check, starting.previous_template) == (driver_check.DriverCheck.STARTING, True)
    assert check(pod("new", SAME)).previous_template is False


def test_a_failing_pod_of_an_older_template_is_outdated_a_starting_one_is_not() -> None:
    failing = dataclasses.replace(pod("old", SAME, ready=False), waiting_reason="ImagePullBackOff")
    status = check(failing)
    assert status.check is driver_check.DriverCheck.OUTDATED and "ImagePullBackOff" in status.detail
    crashing = dataclasses.replace(pod("old", SAME, ready=False), restart_count=11)
    assert check(crashing).check is driver_check.DriverCheck.OUTDATED
    creating = dataclasses.replace(pod("old", SAME, ready=False), waiting_reason="ContainerCreating")
    assert check(creating).check is driver_check.DriverCheck.STARTING
    # a current revision's failing pod is failing, not outdated (as before the rule)
    assert check(dataclasses.replace(failing, revision_hash="new")).check is driver_check.DriverCheck.STARTING


def test_a_pod_installing_another_driver_is_outdated_and_says_why() -> None:
    status = check(pod("old", OTHER))
    assert status.check is driver_check.DriverCheck.OUTDATED
    assert "driver image nvcr.io/nvidia/driver:580-rhcos4.16 ->" in status.detail
    # an unknown install: the revision alone decides, as before the rule
    assert check(pod("old", None)).check is driver_check.DriverCheck.OUTDATED


def test_pods_on_the_previous_template_are_counted_and_described() -> None:
    pods = [pod("old", SAME), pod("new", SAME), pod("older", OTHER)]
    revisions = {DS: DriverRevision(daemonset=DS, current_hash="new", install=SAME)}
    found = driver_check.on_previous_template(pods, revisions)
    assert [p.ref.name for p in found] == ["driver-old"]
    message = driver_check.describe_previous_template(found)
    assert message.startswith("1 driver pod(s) run an older template") and "driver-old on n1" in message
    assert driver_check.describe_previous_template([]) == ""


VANILLA = "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"


@pytest.mark.parametrize(
    ("running", "same_driver"),
    [
        ("nvcr.io/nvidia/driver:595.91.07-rhel9", True),
        ("nvcr.io/nvidia/driver:595.91.07-ubuntu24.04", True),
        ("nvcr.io/nvidia/driver:595.91.08-rhel9", False),
        ("nvcr.io/other/driver:595.91.07-rhel9", False),
        ("nvcr.io/nvidia/driver:595.91.07-5.15.0-105-generic-ubuntu22.04", False),
        ("nvcr.io/nvidia/driver@sha256:" + "a" * 64, False),
        (VANILLA, False),
    ],
    ids=[
        "rhel9",
        "ubuntu24.04",
        "another-version",
        "another-repository",
        "precompiled",
        "digest",
        "same-image",
    ],
)
def test_the_same_driver_built_for_another_os(running: str, same_driver: bool) -> None:
    assert driver_currency.other_os_build(running, VANILLA) is same_driver
    installs = DriverInstall(driver_image=running, dtk_image="", env=SAME.env, modules=(), config=())
    desired = dataclasses.replace(installs, driver_image=VANILLA)
    reasons = driver_currency.outdated_reasons(installs, desired)
    assert (reasons == ()) is (same_driver or running == VANILLA), reasons


def test_a_working_pod_of_another_oss_build_is_current_a_failing_one_outdated() -> None:
    desired = dataclasses.replace(SAME, driver_image=VANILLA)
    running = dataclasses.replace(SAME, driver_image="nvcr.io/nvidia/driver:595.91.07-rhel9")
    node_pod = pod("old", running)

    def against(driver: DriverPod) -> driver_check.DriverStatus:
        node = UpgradeNode(name=NodeName("n1"), driver_pods=(driver,))
        revision = DriverRevision(daemonset=DS, current_hash="new", install=desired)
        return driver_check.check_driver(node, UpgradeSnapshot(nodes=(node,), daemonsets={DS: revision}))

    working = against(node_pod)
    assert (working.check, working.previous_template) == (driver_check.DriverCheck.READY, True)
    crashing = dataclasses.replace(node_pod, ready=False, waiting_reason="CrashLoopBackOff")
    assert against(crashing).check is driver_check.DriverCheck.OUTDATED

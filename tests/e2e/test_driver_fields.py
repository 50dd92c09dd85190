"""We test these aspects of NVIDIA's driver fields that ocp-gpu honours, with the operator running
against the local control plane (the API server validates and stores what we render):

- driver.manager.imagePullSecrets, driver.secretEnv, driver.{startup,liveness,readiness}Probe,
  driver.licensingConfig, daemonsets.podSecurityContext and hostPaths.rootFS reach the driver
  DaemonSet (pull secrets, envFrom, probes, licensing volume and mounts, pod security context,
  host-root volume and HOST_ROOT) and podSecurityContext the toolkit DaemonSet too;
- removing them from the policy removes them from the DaemonSet; no UnsupportedSetting is
  reported for them;
- repoConfig / kernelModuleConfig ConfigMaps are mounted key by key where the OS reads them; a
  missing one is an error naming the field that creates nothing, until the admin creates it;
- the finished DaemonSet: the startup probe script from its ConfigMap, /sys/devices/system,
  nvidia-peermem-ctr (driver.rdma) and nvidia-fs-ctr (gds) appearing and leaving with their
  flags, and the driver ClusterRole without cluster-wide pod deletion.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.rendering.operands import toolkit as toolkit_rendering

from .conftest import STEP_S, Operated, condition, patch_policy, read_policy, wait_for

pytestmark = pytest.mark.e2e

DRIVER = "nvidia-driver-daemonset-ubuntu22.04"
SPEC: dict[str, Any] = {
    "daemonsets": {"podSecurityContext": {"runAsUser": 0, "seLinuxOptions": {"type": "spc_t"}}},
    "hostPaths": {"rootFS": "/sysroot"},
    "driver": {
        "imagePullSecrets": ["ngc"],
        "manager": {"imagePullSecrets": ["manager-pull"]},
        "secretEnv": "driver-secrets",
        "startupProbe": {"failureThreshold": 30},
        "livenessProbe": {"periodSeconds": 45},
        "readinessProbe": {"timeoutSeconds": 7},
        "licensingConfig": {"secretName": "licensing"},
    },
}


def pod_spec(kube: client.ApiClient, namespace: str, name: str) -> Any:
    return client.AppsV1Api(kube).read_namespaced_daemon_set(name, namespace).spec.template.spec


def driver_container(pod: Any) -> Any:
    return next(c for c in pod.containers if c.name == "nvidia-driver-ctr")


def test_honoured_driver_fields_reach_the_daemonset_and_leave_with_the_policy(
    kube: client.ApiClient,
    namespace: str,
    gpu_node: str,
    operated: Operated,
) -> None:
    operated.run(SPEC)
    wait_for(
        lambda: (
            client.AppsV1Api(kube)
            .list_namespaced_daemon_set(namespace, field_selector=f"metadata.name={DRIVER}")
            .items
            and driver_container(pod_spec(kube, namespace, DRIVER)).env_from
        ),
        STEP_S,
        what="driver DaemonSet with the policy's fields",
    )
    pod = pod_spec(kube, namespace, DRIVER)
    driver = driver_container(pod)
    assert [s.name for s in pod.image_pull_secrets] == ["ngc", "manager-pull"]
    assert driver.env_from[0].secret_ref.name == "driver-secrets"
    assert driver.startup_probe.failure_threshold == 30
    assert driver.startup_probe.period_seconds == 10
    assert driver.liveness_probe.period_seconds == 45
    assert driver.readiness_probe.timeout_seconds == 7
    licensing = next(v for v in pod.volumes if v.name == "licensing-config")
    assert licensing.secret.secret_name == "licensing"
    assert {m.mount_path for m in driver.volume_mounts if m.name == "licensing-config"} == {
        "/drivers/gridd.conf",
        "/drivers/ClientConfigToken/client_configuration_token.tok",
    }
    assert pod.security_context.run_as_user == 0
    assert pod.security_context.se_linux_options.type == "spc_t"
    assert next(v for v in pod.volumes if v.name == "host-root").host_path.path == "/sysroot"
    assert {e.name: e.value for e in driver.env}["HOST_ROOT"] == "/sysroot"
    wait_for(
        lambda: (
            client.AppsV1Api(kube)
            .list_namespaced_daemon_set(
                namespace, field_selector=f"metadata.name={toolkit_rendering.DAEMONSET}"
            )
            .items
        ),
        STEP_S,
        what="toolkit DaemonSet",
    )
    assert pod_spec(kube, namespace, toolkit_rendering.DAEMONSET).security_context.run_as_user == 0
    assert not condition(read_policy(kube), "UnsupportedSetting")

    # all of it goes away with the policy's fields
    # a merge patch: null removes a field
    patch_policy(
        kube,
        {
            "driver": {"secretEnv": None, "licensingConfig": None, "livenessProbe": None},
            "hostPaths": None,
            "daemonsets": {"podSecurityContext": None},
        },
    )
    wait_for(
        lambda: not driver_container(pod_spec(kube, namespace, DRIVER)).env_from,
        STEP_S,
        what="envFrom removed",
    )
    pod = pod_spec(kube, namespace, DRIVER)
    driver = driver_container(pod)
    assert driver.liveness_probe is None
    assert driver.readiness_probe.timeout_seconds == 7
    assert not [v for v in pod.volumes if v.name == "licensing-config"]
    assert next(v for v in pod.volumes if v.name == "host-root").host_path.path == "/"
    assert "HOST_ROOT" not in {e.name for e in driver.env}
    assert pod.security_context is None or pod.security_context.run_as_user is None


def test_named_config_maps_are_mounted_key_by_key_and_a_missing_one_changes_nothing(
    kube: client.ApiClient,
    namespace: str,
    gpu_node: str,
    operated: Operated,
) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_config_map(
        namespace,
        {"metadata": {"name": "module-params"}, "data": {"nvidia.conf": "NVreg_EnableGpuFirmware=0\n"}},
    )
    operated.apply(
        spec={
            "driver": {
                "kernelModuleConfig": {"name": "module-params"},
                "repoConfig": {"configMapName": "repos"},
            }
        }
    )
    operated.start()
    # repos does not exist: an error naming the field, and no driver DaemonSet half-configured
    error = wait_for(
        lambda: (
            condition(read_policy(kube), "Error").get("status") == "True"
            and condition(read_policy(kube), "Error")
        ),
        STEP_S,
        what="Error condition",
    )
    assert "spec.driver.repoConfig.configMapName" in error["message"]
    assert "'repos' does not exist" in error["message"]
    assert (
        not client.AppsV1Api(kube)
        .list_namespaced_daemon_set(namespace, field_selector=f"metadata.name={DRIVER}")
        .items
    )

    # the admin creates it: the operator looks again and mounts each key where Ubuntu reads repositories
    core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {"name": "repos"},
            "data": {"cuda.list": "deb http://mirror.example/ /\n", "extra.list": ""},
        },
    )
    wait_for(
        lambda: (
            client.AppsV1Api(kube)
            .list_namespaced_daemon_set(namespace, field_selector=f"metadata.name={DRIVER}")
            .items
        ),
        STEP_S,
        what="driver DaemonSet once the ConfigMap exists",
    )
    pod = pod_spec(kube, namespace, DRIVER)
    mounts = {
        m.mount_path: m.sub_path
        for m in driver_container(pod).volume_mounts
        if m.sub_path and m.name != "driver-startup-probe-script"
    }
    assert mounts == {
        "/etc/apt/sources.list.d/cuda.list": "cuda.list",
        "/etc/apt/sources.list.d/extra.list": "extra.list",
        "/drivers/nvidia.conf": "nvidia.conf",
    }
    volumes = {v.name: v.config_map.name for v in pod.volumes if v.config_map}
    assert volumes["repo-config"] == "repos"
    assert volumes["kernel-module-config"] == "module-params"
    wait_for(
        lambda: condition(read_policy(kube), "Error").get("status") == "False", STEP_S, what="error cleared"
    )


def test_finished_daemonset_startup_script_and_rdma_and_gds_containers_come_and_go(
    kube: client.ApiClient,
    namespace: str,
    gpu_node: str,
    operated: Operated,
) -> None:
    operated.apply(
        spec={
            "driver": {"rdma": {"enabled": True}},
            "gds": {
                "enabled": True,
                "repository": "nvcr.io/nvidia/cloud-native",
                "image": "nvidia-fs",
                "version": "2.20.5",
            },
        }
    )
    operated.start()

    def containers() -> list[str]:
        found = client.AppsV1Api(kube).list_namespaced_daemon_set(
            namespace, field_selector=f"metadata.name={DRIVER}"
        )
        return [c.name for c in found.items[0].spec.template.spec.containers] if found.items else []

    wait_for(
        lambda: containers() == ["nvidia-driver-ctr", "nvidia-peermem-ctr", "nvidia-fs-ctr"],
        STEP_S,
        what="peermem and nvidia-fs containers",
    )
    fs = next(c for c in pod_spec(kube, namespace, DRIVER).containers if c.name == "nvidia-fs-ctr")
    assert fs.image == "nvcr.io/nvidia/cloud-native/nvidia-fs:2.20.5-ubuntu22.04"
    pod = pod_spec(kube, namespace, DRIVER)
    driver = driver_container(pod)
    assert {e.name: e.value for e in driver.env}["GPU_DIRECT_RDMA_ENABLED"] == "true"
    assert {e.name: e.value for e in driver.env}["GDS_ENABLED"] == "true"
    assert driver.startup_probe._exec.command == ["sh", "/usr/local/bin/startup-probe.sh"]
    script = client.CoreV1Api(kube).read_namespaced_config_map("nvidia-driver-startup-probe", namespace)
    assert "/sys/module/nvidia/refcnt" in script.data["startup-probe.sh"]
    assert {v.name for v in pod.volumes} >= {
        "host-sys-devices-system",
        "mlnx-ofed-usr-src",
        "run-mellanox-drivers",
    }
    # the driver pods' ClusterRole no longer deletes pods cluster-wide, and reads DRA claims
    role = client.RbacAuthorizationV1Api(kube).read_cluster_role("ocp-gpu-nvidia-driver")
    assert not [r for r in role.rules if "pods" in r.resources and "delete" in r.verbs]
    assert [r.verbs for r in role.rules if r.resources == ["resourceclaims"]] == [["get", "list"]]

    patch_policy(kube, {"driver": {"rdma": {"enabled": False}}, "gds": {"enabled": False}})
    wait_for(lambda: containers() == ["nvidia-driver-ctr"], STEP_S, what="peermem and nvidia-fs gone")
    assert not {v.name for v in pod_spec(kube, namespace, DRIVER).volumes} & {
        "mlnx-ofed-usr-src",
        "run-mellanox-drivers",
    }

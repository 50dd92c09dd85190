"""We test CDI as NVIDIA's v26.7.0 operator does it, on the local control plane
with the node-agent SIMULATION (ocp_gpu_harness/node_agent.py) standing in for the NVIDIA stack:

- CDI on (the default): the toolkit DaemonSet carries CDI_ENABLED, NVIDIA_CONTAINER_RUNTIME_MODE=cdi,
  the device plugin the strategies cdi-annotations,cdi-cri, the CDI annotation prefix and
  nvidia-cdi-hook's path, its pods run under the RuntimeClass `nvidia`; the RuntimeClasses
  `nvidia`, `nvidia-cdi` and `nvidia-legacy` exist; the node advertises its 8 GPUs and the
  policy is ready.  `cdi.enabled: false` (containerd): the CDI env goes, `nvidia-cdi` and
  `nvidia-legacy` are deleted, `nvidia` stays (containerd names it), the plugin is back on
  envvar, the node still advertises 8 GPUs and the policy is ready again; then
  `cdi.nriPluginEnabled`: no RuntimeClass left or named by the plugin, its NRI annotation, the
  toolkit configures no runtime and starts the NRI plugin, 8 GPUs, ready;
- on OpenShift (cri-o), as NVIDIA v26.7.0 rendered its OperatorHub example there (its own
  DaemonSets and RuntimeClasses, captured in tests/unit/data/nvidia-conformance: `operatorhub`
  and `cdi-off`): with CDI on, the toolkit's CDI env (CRIO_CONFIG_MODE=config: `nvidia` a cri-o
  runtime handler), the plugin's CDI env, every operand pod's runtimeClassName and the three
  RuntimeClasses are NVIDIA's; turned off on the running cluster, the toolkit goes back to the OCI
  hook (CRIO_CONFIG_MODE=hook, OpenShift's hooks directory), the plugin to envvar, no operand pod
  names a RuntimeClass and only `nvidia` is left, again as NVIDIA's; then `cdi.nriPluginEnabled`
  (NVIDIA's code: setNRIPluginAnnotation, transformNRISocketMounts, setRuntimeClassName, its
  pre-requisites state off): the toolkit starts the NRI plugin on cri-o's NRI socket and configures
  no runtime, each GPU operand pod asks for every GPU by annotation for NVIDIA's container, none
  names a RuntimeClass, no RuntimeClass is left, the validator's cuda and plugin workloads get none.
  Each time the nodes advertise their 8 GPUs and the policy is ready.  Then the NRI plugin without
  CDI (NVIDIA's validateClusterPolicySpec refuses it): an Error naming `spec.cdi.nriPluginEnabled`
  and the fix, an Event, no DaemonSet changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness import polling
from ocp_gpu_harness.cluster import unique_name
from ocp_gpu_harness.operating import OperatorProcess

from . import test_stack
from .conftest import (
    REACT_S,
    READY_S,
    STEP_S,
    condition,
    patch_policy,
    read_policy,
    ready_for_the_spec,
    wait_for,
    wait_for_event,
)
from .test_stack import Stack, container_env, nvidia_resources, read_daemonset

pytestmark = pytest.mark.e2e
# What the simulated device plugin advertises on a node of 8 GPUs without sharing; the node agent
# writes it in its pass after the plugin pod is Ready, so a test waits for it (STEP_S).
EIGHT_GPUS = {"nvidia.com/gpu": "8"}

# test_stack.py's fixtures, registered in this module too.
make_nodes = test_stack.make_nodes
stack = test_stack.stack


def _runtime_classes(kube: client.ApiClient) -> set[str]:
    selector = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
    items = client.NodeV1Api(kube).list_runtime_class(label_selector=selector).items
    return {item.metadata.name for item in items if not item.metadata.deletion_timestamp}


def test_cdi_on_by_default_and_off_goes_back_to_the_runtime(
    kube: client.ApiClient, namespace: str, stack: Stack
) -> None:
    (gpu,) = stack.make_nodes(1, gpus=8)
    stack.apply_policy(spec={})
    stack.start_operator()
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready with CDI")
    toolkit = read_daemonset(kube, namespace, operand_catalog.CONTAINER_TOOLKIT.daemonset)
    toolkit_env = container_env(toolkit, "nvidia-container-toolkit-ctr")
    assert toolkit_env["CDI_ENABLED"] == "true"
    assert toolkit_env["NVIDIA_CONTAINER_RUNTIME_MODE"] == "cdi"
    plugin = read_daemonset(kube, namespace, operand_catalog.DEVICE_PLUGIN.daemonset)
    plugin_env = container_env(plugin, "nvidia-device-plugin")
    assert plugin_env["DEVICE_LIST_STRATEGY"] == "cdi-annotations,cdi-cri"
    assert plugin_env["CDI_ANNOTATION_PREFIX"] == "cdi.k8s.io/"
    assert plugin_env["NVIDIA_CDI_HOOK_PATH"] == "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    assert plugin.spec.template.spec.runtime_class_name == "nvidia"
    assert _runtime_classes(kube) == {"nvidia", "nvidia-cdi", "nvidia-legacy"}
    wait_for(lambda: nvidia_resources(kube, gpu) == EIGHT_GPUS, STEP_S, what="8 GPUs advertised")

    patch_policy(kube, {"cdi": {"enabled": False}})
    wait_for(
        lambda: (
            "CDI_ENABLED"
            not in container_env(
                read_daemonset(kube, namespace, operand_catalog.CONTAINER_TOOLKIT.daemonset),
                "nvidia-container-toolkit-ctr",
            )
        ),
        STEP_S,
        what="the toolkit without CDI",
    )
    wait_for(
        lambda: _runtime_classes(kube) == {"nvidia"}, STEP_S, what="nvidia-cdi and nvidia-legacy deleted"
    )
    # NB: the RuntimeClasses go first (pre-requisites), the DaemonSets in the same pass after them.
    wait_for(
        lambda: (
            container_env(
                read_daemonset(kube, namespace, operand_catalog.DEVICE_PLUGIN.daemonset),
                "nvidia-device-plugin",
            )["DEVICE_LIST_STRATEGY"]
            == "envvar"
        ),
        STEP_S,
        what="the plugin back on envvar",
    )
    plugin = read_daemonset(kube, namespace, operand_catalog.DEVICE_PLUGIN.daemonset)
    assert "CDI_ANNOTATION_PREFIX" not in container_env(plugin, "nvidia-device-plugin")
    # containerd: the toolkit registers the `nvidia` runtime, the operands keep naming it.
    assert plugin.spec.template.spec.runtime_class_name == "nvidia"
    toolkit_env = container_env(
        read_daemonset(kube, namespace, operand_catalog.CONTAINER_TOOLKIT.daemonset),
        "nvidia-container-toolkit-ctr",
    )
    assert toolkit_env["CONTAINERD_RUNTIME_CLASS"] == "nvidia"
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready without CDI")
    wait_for(lambda: nvidia_resources(kube, gpu) == EIGHT_GPUS, STEP_S, what="8 GPUs advertised")

    # The NRI plugin on containerd: no runtime configured, no RuntimeClass, GPUs by annotation.
    patch_policy(kube, {"cdi": {"enabled": True, "nriPluginEnabled": True}})
    wait_for(lambda: not _runtime_classes(kube), STEP_S, what="no RuntimeClass with the NRI plugin")
    wait_for(
        lambda: (
            (
                read_daemonset(
                    kube, namespace, operand_catalog.DEVICE_PLUGIN.daemonset
                ).spec.template.metadata.annotations
                or {}
            ).get("nvidia.cdi.k8s.io/container.nvidia-device-plugin")
            == "management.nvidia.com/gpu=all"
        ),
        STEP_S,
        what="the plugin's NRI annotation",
    )
    toolkit_env = container_env(
        read_daemonset(kube, namespace, operand_catalog.CONTAINER_TOOLKIT.daemonset),
        "nvidia-container-toolkit-ctr",
    )
    assert toolkit_env["RUNTIME"] == "containerd" and toolkit_env["ENABLE_NRI_PLUGIN"] == "true"
    assert "RUNTIME_CONFIG" not in toolkit_env and "CONTAINERD_RUNTIME_CLASS" not in toolkit_env
    plugin = read_daemonset(kube, namespace, operand_catalog.DEVICE_PLUGIN.daemonset)
    assert plugin.spec.template.spec.runtime_class_name is None
    assert container_env(plugin, "nvidia-device-plugin")["DEVICE_LIST_STRATEGY"] == "cdi-annotations,cdi-cri"
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready with the NRI plugin")
    wait_for(lambda: nvidia_resources(kube, gpu) == EIGHT_GPUS, STEP_S, what="8 GPUs advertised")


# --- OpenShift (cri-o), against NVIDIA's own rendering ----------------------------------------

# What NVIDIA v26.7.0 rendered on the local control plane (hack/capture_nvidia_conformance.py).
NVIDIA_RENDERED = Path(__file__).resolve().parents[1] / "unit" / "data" / "nvidia-conformance"
# The RHCOS build of those captures' first node, and a Driver Toolkit image for it.
RHCOS = "416.94.202407030122-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "1" * 64
TOOLKIT = operand_catalog.CONTAINER_TOOLKIT.daemonset
PLUGIN = operand_catalog.DEVICE_PLUGIN.daemonset
# The toolkit env that says how the runtime gets GPUs (NVIDIA's transformToolkitCtrForCDI and its
# cri-o branch), and the plugin's (transformDevicePluginCtrForCDI). NB: the other env and the
# runtime's config paths differ on purpose (docs/differences-from-nvidia.md).
TOOLKIT_CDI_ENV = (
    "RUNTIME",
    "CDI_ENABLED",
    "NVIDIA_CONTAINER_RUNTIME_MODE",
    "CRIO_CONFIG_MODE",
    "ENABLE_NRI_PLUGIN",
    "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
)
PLUGIN_CDI_ENV = ("DEVICE_LIST_STRATEGY", "CDI_ANNOTATION_PREFIX", "NVIDIA_CDI_HOOK_PATH")
# The toolkit's host directories the runtime reads: the CDI specs, cri-o's OCI hooks (OpenShift's).
TOOLKIT_HOST_DIRS = ("cdi-root", "crio-hooks")
# With the NRI plugin, the container of each GPU operand pod NVIDIA's setNRIPluginAnnotation names:
# its first (the MPS daemon: its main) container, the validator's toolkit-validation (NVIDIA's
# container names, as ours).
NRI_CONTAINERS = {
    PLUGIN: "nvidia-device-plugin",
    operand_catalog.GPU_FEATURE_DISCOVERY.daemonset: "gpu-feature-discovery",
    operand_catalog.DCGM.daemonset: "nvidia-dcgm-ctr",
    operand_catalog.DCGM_EXPORTER.daemonset: "nvidia-dcgm-exporter",
    operand_catalog.OPERATOR_VALIDATOR.daemonset: "toolkit-validation",
    operand_catalog.MPS_CONTROL_DAEMON.daemonset: "mps-control-daemon-ctr",
    operand_catalog.MIG_MANAGER.daemonset: "nvidia-mig-manager",
}
NRI_ANNOTATION_PREFIX = "nvidia.cdi.k8s.io/container."


def nvidia_rendered(case: str) -> dict[tuple[str, str], dict[str, Any]]:
    """NVIDIA's objects for a conformance case, by (kind, name)."""
    header, *objects = yaml.safe_load_all((NVIDIA_RENDERED / f"{case}.yaml").read_text())
    assert header["platform"] == "openshift", header
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def _env(pod_spec: dict[str, Any], container: str, keys: tuple[str, ...]) -> dict[str, str | None]:
    (found,) = [c for c in pod_spec["containers"] if c["name"] == container]
    env = {e["name"]: e.get("value") for e in found.get("env") or ()}
    return {key: env[key] for key in keys if key in env}


def _host_dirs(pod_spec: dict[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    paths = {v["name"]: (v.get("hostPath") or {}).get("path") for v in pod_spec.get("volumes") or ()}
    return {name: paths[name] for name in names if name in paths}


def _our_pod_specs(kube: client.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    """Our DaemonSets' pod specs (the API's JSON), by DaemonSet name."""
    selector = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
    found = client.AppsV1Api(kube).list_namespaced_daemon_set(namespace, label_selector=selector).items
    return {ds.metadata.name: kube.sanitize_for_serialization(ds.spec.template.spec) for ds in found}


def differences_from_nvidia(kube: client.ApiClient, namespace: str, case: str) -> list[str]:
    """Where our running DaemonSets and RuntimeClasses differ from NVIDIA's rendering of `case` in
    how GPUs reach containers; [] when they agree."""
    nvidia = nvidia_rendered(case)
    ours = _our_pod_specs(kube, namespace)
    found: list[str] = []
    for name, container, keys in (
        (TOOLKIT, "nvidia-container-toolkit-ctr", TOOLKIT_CDI_ENV),
        (PLUGIN, "nvidia-device-plugin", PLUGIN_CDI_ENV),
    ):
        theirs = nvidia["DaemonSet", name]["spec"]["template"]["spec"]
        if name not in ours:
            found.append(f"{name}: not deployed")
        elif (mine := _env(ours[name], container, keys)) != (want := _env(theirs, container, keys)):
            found.append(f"{name} env: ours {mine}, NVIDIA's {want}")
    theirs = nvidia["DaemonSet", TOOLKIT]["spec"]["template"]["spec"]
    if TOOLKIT in ours and _host_dirs(ours[TOOLKIT], TOOLKIT_HOST_DIRS) != _host_dirs(
        theirs, TOOLKIT_HOST_DIRS
    ):
        found.append(
            f"toolkit host dirs: ours {_host_dirs(ours[TOOLKIT], TOOLKIT_HOST_DIRS)}, "
            f"NVIDIA's {_host_dirs(theirs, TOOLKIT_HOST_DIRS)}"
        )
    # Every DaemonSet both run (driver, toolkit, validator, plugin, GFD, DCGM, exporter).
    for name, spec in sorted(ours.items()):
        if ("DaemonSet", name) not in nvidia:
            continue
        want_class = nvidia["DaemonSet", name]["spec"]["template"]["spec"].get("runtimeClassName")
        if spec.get("runtimeClassName") != want_class:
            found.append(
                f"{name} runtimeClassName: ours {spec.get('runtimeClassName')}, NVIDIA's {want_class}"
            )
    want_classes = {name for kind, name in nvidia if kind == "RuntimeClass"}
    if (classes := _runtime_classes(kube)) != want_classes:
        found.append(f"RuntimeClasses: ours {sorted(classes)}, NVIDIA's {sorted(want_classes)}")
    return found


def wait_as_nvidia(kube: client.ApiClient, namespace: str, case: str) -> None:
    """Until our objects agree with NVIDIA's `case` (budget STEP_S: one pass of the operator)."""
    last: list[str] = []

    def agree() -> bool:
        last[:] = differences_from_nvidia(kube, namespace, case)
        return not last

    try:
        wait_for(agree, STEP_S, what=f"the DaemonSets as NVIDIA rendered {case!r}")
    except polling.WaitTimeout as timeout:
        raise polling.WaitTimeout(f"{timeout}; still different: {last}") from None


@pytest.fixture
def rhcos_gpu_nodes(kube: client.ApiClient) -> Iterator[Callable[[int], list[str]]]:
    made: list[str] = []

    def make(count: int) -> list[str]:
        names = [unique_name("rhcos") for _ in range(count)]
        fake_nodes.create_nodes(
            kube, [fake_nodes.gpu_node(n, rhcos=RHCOS, gpus=8, simulated=True) for n in names]
        )
        made.extend(names)
        return names

    yield make
    fake_nodes.delete_nodes(kube, made)


def test_cdi_on_openshift_as_nvidia_renders_it_off_back_to_the_hook_then_nri(
    kube: client.ApiClient,
    openshift: client.ApiClient,
    namespace: str,
    rhcos_gpu_nodes: Callable[[int], list[str]],
    start_operator: Callable[..., OperatorProcess],
    apply_policy: Callable[..., dict[str, Any]],
) -> None:
    openshift_emulation.set_driver_toolkit_tags(openshift, {RHCOS: DTK})
    (gpu,) = rhcos_gpu_nodes(1)
    apply_policy(spec={})
    start_operator()
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready with CDI on cri-o")
    wait_as_nvidia(kube, namespace, "operatorhub")
    wait_for(lambda: nvidia_resources(kube, gpu) == EIGHT_GPUS, STEP_S, what="8 GPUs advertised")

    # Off on the running cluster: back to cri-o's OCI hook, as NVIDIA's.
    patch_policy(kube, {"cdi": {"enabled": False}})
    wait_as_nvidia(kube, namespace, "cdi-off")
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready with the hook")
    wait_for(lambda: nvidia_resources(kube, gpu) == EIGHT_GPUS, STEP_S, what="8 GPUs advertised")

    # The NRI plugin (no capture of NVIDIA's: its code says what it renders).
    patch_policy(kube, {"cdi": {"enabled": True, "nriPluginEnabled": True}})

    def toolkit_env() -> dict[str, str]:
        return container_env(read_daemonset(kube, namespace, TOOLKIT), "nvidia-container-toolkit-ctr")

    wait_for(
        lambda: toolkit_env().get("ENABLE_NRI_PLUGIN") == "true", STEP_S, what="the toolkit's NRI plugin"
    )
    env = toolkit_env()
    assert env["CDI_ENABLED"] == "true" and env["NVIDIA_CONTAINER_RUNTIME_MODE"] == "cdi"
    assert env["NRI_SOCKET"] == "/runtime/nri-sock-dir/nri.sock"
    # The installer's no-op configurer: no runtime config, no hook.
    assert "RUNTIME_CONFIG" not in env
    toolkit_dirs = _host_dirs(
        _our_pod_specs(kube, namespace)[TOOLKIT], ("nri-socket", "crio-hooks", "cdi-root")
    )
    assert toolkit_dirs == {"nri-socket": "/var/run/nri", "cdi-root": "/var/run/cdi"}
    wait_for(lambda: not _runtime_classes(kube), STEP_S, what="no RuntimeClass (pre-requisites off)")

    def nri_annotated() -> dict[str, str]:
        """DaemonSet -> the container its pods' NRI annotation names (one each)."""
        found = {}
        for name in NRI_CONTAINERS:
            annotations = read_daemonset(kube, namespace, name).spec.template.metadata.annotations or {}
            named = [
                key.removeprefix(NRI_ANNOTATION_PREFIX)
                for key, value in annotations.items()
                if key.startswith(NRI_ANNOTATION_PREFIX) and value == "management.nvidia.com/gpu=all"
            ]
            found[name] = ",".join(named)
        return found

    wait_for(lambda: nri_annotated() == NRI_CONTAINERS, STEP_S, what="the NRI annotations")
    pod_specs = _our_pod_specs(kube, namespace)
    assert {
        name: spec.get("runtimeClassName") for name, spec in pod_specs.items() if spec.get("runtimeClassName")
    } == {}
    for name in (TOOLKIT, f"nvidia-driver-daemonset-{RHCOS}"):
        annotations = read_daemonset(kube, namespace, name).spec.template.metadata.annotations or {}
        assert not [key for key in annotations if key.startswith(NRI_ANNOTATION_PREFIX)], name
    # The validator's workload pods run without a RuntimeClass (the cuda pod's NRI annotation:
    # test_validate.py).
    validator = pod_specs[operand_catalog.OPERATOR_VALIDATOR.daemonset]
    for init in validator["initContainers"]:
        if init["name"] in ("cuda-validation", "plugin-validation"):
            # NB: set and empty (the program's default is nvidia); the API omits an empty value.
            (entry,) = [e for e in init["env"] if e["name"] == "VALIDATOR_RUNTIME_CLASS"]
            assert entry == {"name": "VALIDATOR_RUNTIME_CLASS"}, init["name"]
    wait_for(lambda: ready_for_the_spec(kube), READY_S, what="policy ready with the NRI plugin")
    wait_for(lambda: nvidia_resources(kube, gpu) == EIGHT_GPUS, STEP_S, what="8 GPUs advertised")

    # Bad input, as NVIDIA's validateClusterPolicySpec refuses it: the NRI plugin without CDI.
    def generations() -> dict[str, int]:
        apps = client.AppsV1Api(kube)
        return {
            name: apps.read_namespaced_daemon_set(name, namespace).metadata.generation for name in pod_specs
        }

    before = generations()
    patch_policy(kube, {"cdi": {"enabled": False, "nriPluginEnabled": True}})

    def error_message() -> str:
        found = condition(read_policy(kube), "Error")
        return str(found.get("message", "")) if found.get("status") == "True" else ""

    wait_for(
        lambda: "spec.cdi.nriPluginEnabled" in error_message(), REACT_S, what="the Error naming the field"
    )
    assert "spec.cdi.enabled to true" in error_message()
    wait_for_event(kube, "InvalidClusterPolicy", "spec.cdi.nriPluginEnabled")
    # Nothing running changed meanwhile.
    assert generations() == before
    assert nvidia_resources(kube, gpu) == EIGHT_GPUS

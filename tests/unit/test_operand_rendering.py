"""We test the operand mechanism's pure parts (rendering/operands/operand_catalog.py,
rendering/operands/operand_rendering.py,
planning/operands.unready_nodes), no server:

- every generic operand has a template folder and a context, its DaemonSet is named and
  labelled as DESIGN §4 says, selects on its deploy label, and tolerates nvidia.com/gpu first;
- golden files for every operand and the pre-requisites (tests/unit/golden/state-<name>/);
- the device plugin: every seed-002 option reaches the plugin (env and config file), a
  resourceConfig becomes time-slicing in our ConfigMap, an admin's devicePlugin.config.name
  is mounted instead with its default key, compatWithCPUManager runs it privileged;
- the validator: one init container per validation, toolkit/plugin left out when disabled;
- the RuntimeClass is set on GPU-using pods except under cri-o;
- injection-proof: hostile strings in every new string field render verbatim, as values;
- readiness is judged per node: a GPU node labelled for an operand without a Ready pod of
  it is named; CPU nodes and opted-out nodes never are.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import yaml
from hypothesis import strategies as st

from ocp_gpu.model import driver_snapshot, labels, operand_types, releases
from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import policy_checks, policy_parser
from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity
from ocp_gpu.planning.operands import operand_planning
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands import (
    device_plugin,
    operand_catalog,
    operand_common,
    operand_rendering,
    validator,
)
from tests.unit._hostile import swapped
from tests.unit.test_driver_rendering import hostile, token

IMAGE = ImageRef("nvcr.io/nvidia/k8s-device-plugin:v0.17.0")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def render(
    operand: operand_types.Operand,
    spec: dict[str, Any],
    openshift: bool = True,
    image: str = IMAGE,
    ns: str = "gpu",
) -> list[dict[str, Any]]:
    policy = policy_parser.parse_policy(spec)
    # A k8s-driver-manager init container's image as the operator resolves it (the release's default).
    manager = operand_rendering.driver_manager_image(operand, policy, releases.with_release_defaults({}))
    assert not isinstance(manager, PolicyProblem), manager
    inputs = operand_common.OperandRenderInputs(ns, openshift, ImageRef(image), driver_manager_image=manager)
    return operand_rendering.render_operand(operand, policy, inputs)


def the(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [m for m in manifests if m["kind"] == kind]
    return found


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in container.get("env", [])}


# NVIDIA's DaemonSet selectors (assets/*/0500_daemonset.yaml and the like in NVIDIA/gpu-operator at
# v26.7.0, commit 10ee5b3638b89e11e949412aafa5ba99279c3721): the selector is immutable.
NVIDIA_SELECTORS = {
    "nvidia-container-toolkit-daemonset": {"app": "nvidia-container-toolkit-daemonset"},
    "nvidia-operator-validator": {
        "app": "nvidia-operator-validator",
        "app.kubernetes.io/part-of": "gpu-operator",
    },
    "nvidia-device-plugin-daemonset": {"app": "nvidia-device-plugin-daemonset"},
    # assets/state-mps-control-daemon/0400_daemonset.yaml
    "nvidia-device-plugin-mps-control-daemon": {"app": "nvidia-device-plugin-mps-control-daemon"},
    "gpu-feature-discovery": {"app": "gpu-feature-discovery", "app.kubernetes.io/part-of": "nvidia-gpu"},
    "nvidia-dcgm": {"app": "nvidia-dcgm"},
    "nvidia-dcgm-exporter": {"app": "nvidia-dcgm-exporter"},
    "nvidia-mig-manager": {"app": "nvidia-mig-manager"},
    "nvidia-node-status-exporter": {"app": "nvidia-node-status-exporter"},
    # manifests/state-dra-driver/0500_daemonset.yaml (GPUCluster's stack)
    "nvidia-dra-driver-kubelet-plugin": {"app": "nvidia-dra-driver-kubelet-plugin"},
    # assets/state-vfio-manager, state-sandbox-validation, state-sandbox-device-plugin
    "nvidia-vfio-manager": {"name": "nvidia-vfio-manager"},
    "nvidia-sandbox-validator": {
        "app": "nvidia-sandbox-validator",
        "app.kubernetes.io/part-of": "gpu-operator",
    },
    "nvidia-sandbox-device-plugin-daemonset": {"app": "nvidia-sandbox-device-plugin-daemonset"},
    # assets/state-vgpu-device-manager/0600_daemonset.yaml
    "nvidia-vgpu-device-manager": {"app": "nvidia-vgpu-device-manager"},
}

all_generic = pytest.mark.parametrize("operand", operand_catalog.GENERIC, ids=lambda o: o.name)


@all_generic
def test_every_generic_operand_is_declared_and_rendered(operand: operand_types.Operand) -> None:
    assert operand.name in operand_rendering.covered()
    assert (templating.templates_dir() / operand.component).is_dir()
    assert operand.image_env  # a default image in the operator's environment
    ds = the(render(operand, {}), "DaemonSet")
    assert ds["metadata"]["name"] == operand.daemonset
    # NVIDIA's selector for the same DaemonSet, so an existing one is updated in place
    assert ds["spec"]["selector"]["matchLabels"] == NVIDIA_SELECTORS[operand.daemonset]
    assert (
        ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    )
    pod = ds["spec"]["template"]["spec"]
    # NVIDIA's nodeSelector: the deploy label (the MPS control daemon shares the plugin's, on
    # nodes GFD labels MPS-capable).
    expected = {labels.deploy_label(operand.name): "true"}
    if operand is operand_catalog.MPS_CONTROL_DAEMON:
        expected = {labels.deploy_label("device-plugin"): "true", labels.MPS_CAPABLE: "true"}
    assert pod["nodeSelector"] == expected
    assert pod["tolerations"][0] == GPU_TOLERATION
    assert pod["priorityClassName"] == "system-node-critical"


def test_order_and_names_follow_the_design() -> None:
    assert [o.name for o in operand_catalog.OPERANDS] == [
        "driver",
        "container-toolkit",
        "operator-validator",
        "device-plugin",
        "mps-control-daemon",
        "dra-driver",
        "dcgm",
        "dcgm-exporter",
        "gpu-feature-discovery",
        "mig-manager",
        "node-status-exporter",
        "vfio-manager",
        "vgpu-manager",
        "sandbox-validator",
        "vgpu-device-manager",
        "sandbox-device-plugin",
    ]
    assert operand_catalog.OPERATOR_VALIDATOR.app == "nvidia-operator-validator"
    assert operand_catalog.DRIVER.app == labels.DRIVER_APP
    # Every operand's deploy label is one the node labeller writes (the MIG manager's on MIG-capable
    # nodes, the DRA driver's while it is enabled; the MPS control daemon's is the device plugin's; the VM
    # operands' on the nodes of their workload).
    assert set(operand_catalog.OPERANDS) == {
        *operand_catalog.EVERY_GPU_NODE,
        operand_catalog.MIG_MANAGER,
        operand_catalog.DRA_DRIVER,
        operand_catalog.MPS_CONTROL_DAEMON,
        operand_catalog.VFIO_MANAGER,
        operand_catalog.SANDBOX_VALIDATOR,
        operand_catalog.SANDBOX_DEVICE_PLUGIN,
        operand_catalog.VGPU_MANAGER,
        operand_catalog.VGPU_DEVICE_MANAGER,
    }
    assert operand_catalog.MPS_CONTROL_DAEMON.deploy_label == operand_catalog.DEVICE_PLUGIN.deploy_label
    # ... and it adds no label of its own: the plugin's appears once among those the labeller writes.
    assert operand_catalog.MPS_CONTROL_DAEMON not in operand_catalog.EVERY_GPU_NODE
    assert operand_catalog.DEPLOY_LABELS.every_gpu_node.count(operand_catalog.DEVICE_PLUGIN.deploy_label) == 1


@all_generic
def test_policy_tolerations_follow_ours_without_duplicates(operand: operand_types.Operand) -> None:
    spec = {
        "daemonsets": {
            "tolerations": [
                GPU_TOLERATION,
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
            ]
        }
    }
    pod = the(render(operand, spec), "DaemonSet")["spec"]["template"]["spec"]
    assert pod["tolerations"] == [
        GPU_TOLERATION,
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    ]


# --- golden files ----------------------------------------------------------------------

FULL_PLUGIN = {
    "devicePlugin": {
        "migStrategy": "mixed",
        "deviceListStrategy": "volume-mounts",
        "deviceIDStrategy": "index",
        "failOnInitError": False,
        "compatWithCPUManager": True,
        "nvidiaDriverRoot": "/",
        "resourceConfig": "gpu:sharedgpu:4,mig-3g.20gb:small:2",
    }
}
GOLDEN: dict[str, tuple[operand_types.Operand, dict[str, Any], bool]] = {
    **{f"{o.name}/openshift": (o, {}, True) for o in operand_catalog.GENERIC},
    **{f"{o.name}/vanilla": (o, {}, False) for o in operand_catalog.GENERIC},
    "device-plugin/every-option": (operand_catalog.DEVICE_PLUGIN, FULL_PLUGIN, False),
    "device-plugin/admin-configmap": (
        operand_catalog.DEVICE_PLUGIN,
        {"devicePlugin": {"config": {"name": "plugin-configs", "default": "a100"}}},
        True,
    ),
    # The sandbox validator on a cluster with vGPU: its vgpu-manager and vgpu-devices checks too.
    "sandbox-validator/vgpu": (
        operand_catalog.SANDBOX_VALIDATOR,
        {
            "vgpuManager": {"enabled": True},
            "vgpuDeviceManager": {"enabled": True},
            "validator": {"vgpuDevices": {"env": [{"name": "WITH_WAIT", "value": "true"}]}},
        },
        True,
    ),
    # vfioManager.driverManager: NVIDIA's init container k8s-driver-manager from it (its image, pull
    # policy, secrets and env), vfioManager's resources on both containers.
    "vfio-manager/driver-manager": (
        operand_catalog.VFIO_MANAGER,
        {
            "vfioManager": {
                "imagePullSecrets": ["vfio-pull", "shared-pull"],
                "resources": {"limits": {"memory": "300Mi"}},
                "driverManager": {
                    "repository": "nvcr.io/nvidia/cloud-native",
                    "image": "k8s-driver-manager",
                    "version": "v0.12.0",
                    "imagePullPolicy": "Always",
                    "imagePullSecrets": ["shared-pull", "manager-pull"],
                    "env": [
                        {"name": "ENABLE_GPU_POD_EVICTION", "value": "true"},
                        {"name": "DRAIN_USE_FORCE", "value": "true"},
                        {"name": "NODE_NAME", "value": "not-the-field"},
                    ],
                },
            }
        },
        True,
    ),
    "vgpu-device-manager/admin-configmap": (
        operand_catalog.VGPU_DEVICE_MANAGER,
        {"vgpuDeviceManager": {"enabled": True, "config": {"name": "my-vgpu-configs", "default": "A10-4Q"}}},
        True,
    ),
    "mig-manager/admin-configmaps": (
        operand_catalog.MIG_MANAGER,
        {
            "migManager": {
                "config": {"name": "my-mig-configs", "default": ""},
                "gpuClientsConfig": {"name": "my-gpu-clients"},
                "env": [{"name": "WITH_REBOOT", "value": "true"}],
            }
        },
        True,
    ),
    # NVIDIA's GPUCluster full-spec golden (internal/state/testdata/golden/gpucluster-dra-driver-full-spec
    # .yaml at v26.7.0) in ClusterPolicy terms: ComputeDomains with extra env and resources.
    "dra-driver/compute-domains": (
        operand_catalog.DRA_DRIVER,
        {
            "draDriver": {
                "enabled": True,
                "featureGates": {"MPSSupport": True},
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
            }
        },
        True,
    ),
    # A driver installed elsewhere (hostPaths.driverInstallDir): the mounts and roots the operands
    # get, and the driver validation's flag (checked against the program by the image contract).
    "operator-validator/driver-elsewhere": (
        operand_catalog.OPERATOR_VALIDATOR,
        {"driver": {"enabled": False}, "hostPaths": {"driverInstallDir": "/home/kubernetes/bin/nvidia"}},
        False,
    ),
    "container-toolkit/driver-elsewhere": (
        operand_catalog.CONTAINER_TOOLKIT,
        {"driver": {"enabled": False}, "hostPaths": {"driverInstallDir": "/home/kubernetes/bin/nvidia"}},
        False,
    ),
    "device-plugin/driver-elsewhere": (
        operand_catalog.DEVICE_PLUGIN,
        {"driver": {"enabled": False}, "hostPaths": {"driverInstallDir": "/home/kubernetes/bin/nvidia"}},
        False,
    ),
    "operator-validator/without-toolkit-and-plugin": (
        operand_catalog.OPERATOR_VALIDATOR,
        {"toolkit": {"enabled": False}, "devicePlugin": {"enabled": False}},
        True,
    ),
    # CDI off (the OCI hook on cri-o) and the NRI plugin: the toolkit's other modes, so the image
    # contract checks their env too (tests/unit/test_image_contracts.py renders every scenario).
    "container-toolkit/openshift-cdi-off": (
        operand_catalog.CONTAINER_TOOLKIT,
        {"cdi": {"enabled": False}},
        True,
    ),
    "container-toolkit/vanilla-nri": (
        operand_catalog.CONTAINER_TOOLKIT,
        {"cdi": {"nriPluginEnabled": True}},
        False,
    ),
    "device-plugin/openshift-cdi-off": (operand_catalog.DEVICE_PLUGIN, {"cdi": {"enabled": False}}, True),
    "mps-control-daemon/admin-configmap": (
        operand_catalog.MPS_CONTROL_DAEMON,
        {
            "devicePlugin": {
                "config": {"name": "plugin-configs", "default": "mps"},
                "mps": {"root": "/var/mps"},
            }
        },
        True,
    ),
    "gpu-feature-discovery/admin-configmap": (
        operand_catalog.GPU_FEATURE_DISCOVERY,
        {"devicePlugin": {"config": {"name": "plugin-configs", "default": "mps"}}},
        True,
    ),
}


@pytest.mark.parametrize("scenario", sorted(GOLDEN))
def test_golden(scenario: str, update_golden: bool, golden_dir: Path) -> None:
    operand, spec, openshift = GOLDEN[scenario]
    rendered = render(operand, spec, openshift)
    name, case = scenario.split("/")
    path = golden_dir / f"state-{name}" / f"{case}.yaml"
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump_all(rendered, sort_keys=False, width=120))
    assert path.exists(), f"{path} missing: run `pytest tests/unit --update-golden`"
    assert rendered == list(yaml.safe_load_all(path.read_text())), f"{scenario} differs from {path}"


def test_golden_prerequisites(update_golden: bool, golden_dir: Path) -> None:
    rendered = operand_rendering.render_prerequisites(policy_parser.parse_policy({}), "gpu")
    path = golden_dir / "state-pre-requisites" / "default.yaml"
    if update_golden:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump_all(rendered, sort_keys=False, width=120))
    assert rendered == list(yaml.safe_load_all(path.read_text()))
    runtime_class = rendered[0]
    assert (runtime_class["kind"], runtime_class["metadata"]["name"], runtime_class["handler"]) == (
        "RuntimeClass",
        "nvidia",
        "nvidia",
    )


# --- the device plugin -----------------------------------------------------------------


def test_every_seed_option_reaches_the_plugin() -> None:
    manifests = render(operand_catalog.DEVICE_PLUGIN, FULL_PLUGIN, openshift=False)
    pod = the(manifests, "DaemonSet")["spec"]["template"]["spec"]
    plugin, manager = pod["containers"]
    assert env_of(plugin) | {"CONFIG_FILE": "x"} == {
        "MIG_STRATEGY": "mixed",
        "FAIL_ON_INIT_ERROR": "false",
        "DEVICE_LIST_STRATEGY": "volume-mounts",
        "DEVICE_ID_STRATEGY": "index",
        "NVIDIA_DRIVER_ROOT": "/",
        "PASS_DEVICE_SPECS": "true",
        "CONFIG_FILE": "x",
        "MPS_ROOT": "/run/nvidia/mps",
        # CDI is on (NVIDIA's default): the hook and the annotation prefix; the seed's
        # deviceListStrategy, written, wins over CDI's strategies.
        "NVIDIA_CDI_HOOK_PATH": "/usr/local/nvidia/toolkit/nvidia-cdi-hook",
        "CDI_ANNOTATION_PREFIX": "cdi.k8s.io/",
    }
    assert plugin["securityContext"] == {"privileged": True}
    assert pod["runtimeClassName"] == "nvidia"
    assert "/var/run/nvidia-container-devices" in [m["mountPath"] for m in plugin["volumeMounts"]]
    config = yaml.safe_load(the(manifests, "ConfigMap")["data"][device_plugin.DEFAULT_CONFIG_KEY])
    assert config["flags"]["migStrategy"] == "mixed"
    sharing = config["sharing"]["timeSlicing"]["resources"]
    assert {"name": "nvidia.com/gpu", "rename": "nvidia.com/sharedgpu", "replicas": 4} in sharing
    assert env_of(manager)["DEFAULT_CONFIG"] == device_plugin.DEFAULT_CONFIG_KEY
    assert env_of(manager)["NODE_LABEL"] == "nvidia.com/device-plugin.config"


def test_a_new_config_rolls_the_plugin_pods() -> None:
    def digest(spec: dict[str, Any]) -> str:
        ds = the(render(operand_catalog.DEVICE_PLUGIN, spec), "DaemonSet")
        return str(ds["spec"]["template"]["metadata"]["annotations"][device_plugin.CONFIG_DIGEST_ANNOTATION])

    assert digest({}) != digest({"devicePlugin": {"resourceConfig": "gpu:sharedgpu:4"}})
    assert digest({}) == digest({"devicePlugin": {"args": []}})


def test_an_admin_configmap_is_mounted_with_its_default() -> None:
    spec = {"devicePlugin": {"config": {"name": "plugin-configs", "default": "a100"}}}
    pod = the(render(operand_catalog.DEVICE_PLUGIN, spec), "DaemonSet")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "available-configs"]
    assert volume["configMap"]["name"] == "plugin-configs"
    assert env_of(pod["containers"][1])["DEFAULT_CONFIG"] == "a100"
    # The plugin is not privileged by default.
    assert pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


# --- CDI: RuntimeClasses, runtimeClassName, NRI annotations (NVIDIA's object_controls.go) -----

# The operands whose pods need the GPUs (NVIDIA's setNRIPluginAnnotation) and their container.
GPU_CONTAINERS = {
    operand_catalog.DEVICE_PLUGIN: "nvidia-device-plugin",
    operand_catalog.GPU_FEATURE_DISCOVERY: "gpu-feature-discovery",
    operand_catalog.DCGM: "nvidia-dcgm-ctr",
    operand_catalog.DCGM_EXPORTER: "nvidia-dcgm-exporter",
    operand_catalog.MIG_MANAGER: "nvidia-mig-manager",
    operand_catalog.OPERATOR_VALIDATOR: "toolkit-validation",
}


@pytest.mark.parametrize(
    ("cdi", "openshift", "runtime_class"),
    [
        # CDI on (the default): every runtime names the RuntimeClass (cri-o gets the handler).
        ({}, True, "nvidia"),
        ({}, False, "nvidia"),
        # CDI off: cri-o's OCI hook injects GPUs into every pod; containerd needs the class.
        ({"enabled": False}, True, None),
        ({"enabled": False}, False, "nvidia"),
        # The NRI plugin injects by annotation: no RuntimeClass anywhere.
        ({"nriPluginEnabled": True}, True, None),
        ({"nriPluginEnabled": True}, False, None),
    ],
)
@pytest.mark.parametrize("operand", list(GPU_CONTAINERS), ids=lambda o: o.name)
def test_runtime_class_and_nri_annotation_follow_cdi(
    operand: operand_catalog.Operand, cdi: dict[str, Any], openshift: bool, runtime_class: str | None
) -> None:
    template = the(render(operand, {"cdi": cdi}, openshift=openshift), "DaemonSet")["spec"]["template"]
    assert template["spec"].get("runtimeClassName") == runtime_class
    annotations = template["metadata"].get("annotations") or {}
    nri = {k: v for k, v in annotations.items() if k.startswith("nvidia.cdi.k8s.io/")}
    if cdi.get("nriPluginEnabled"):
        assert nri == {
            f"nvidia.cdi.k8s.io/container.{GPU_CONTAINERS[operand]}": "management.nvidia.com/gpu=all"
        }
    else:
        assert nri == {}


@pytest.mark.parametrize(
    ("cdi", "expected"),
    [
        ({}, [("nvidia", "nvidia"), ("nvidia-cdi", "nvidia-cdi"), ("nvidia-legacy", "nvidia-legacy")]),
        ({"enabled": False}, [("nvidia", "nvidia")]),
        ({"nriPluginEnabled": True}, []),
    ],
)
def test_runtime_classes_follow_cdi(cdi: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    rendered = operand_rendering.render_prerequisites(policy_parser.parse_policy({"cdi": cdi}), "gpu")
    assert [(m["metadata"]["name"], m["handler"]) for m in rendered] == expected


@pytest.mark.parametrize(
    ("spec", "strategy", "cdi_env"),
    [
        ({}, "cdi-annotations,cdi-cri", True),
        ({"cdi": {"enabled": False}}, "envvar", False),
        ({"devicePlugin": {"deviceListStrategy": "envvar"}}, "envvar", True),
    ],
)
def test_device_plugin_cdi_settings(spec: dict[str, Any], strategy: str, cdi_env: bool) -> None:
    pod = the(render(operand_catalog.DEVICE_PLUGIN, spec), "DaemonSet")["spec"]["template"]["spec"]
    env = env_of(pod["containers"][0])
    assert env["DEVICE_LIST_STRATEGY"] == strategy
    assert ("CDI_ANNOTATION_PREFIX" in env, "NVIDIA_CDI_HOOK_PATH" in env) == (cdi_env, cdi_env)
    # NB: NVIDIA sets CDI_ENABLED here too; the plugin (v0.20.0) reads no such variable.
    assert "CDI_ENABLED" not in env
    volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert volumes["cdi-root"] == "/var/run/cdi"


def test_the_cdi_hook_follows_the_toolkit_install_dir() -> None:
    spec = {"toolkit": {"installDir": "/opt/nvidia"}}
    pod = the(render(operand_catalog.MIG_MANAGER, spec), "DaemonSet")["spec"]["template"]["spec"]
    env = env_of(pod["containers"][0])
    assert env["NVIDIA_CDI_HOOK_PATH"] == "/opt/nvidia/toolkit/nvidia-cdi-hook"
    assert env["CDI_ENABLED"] == "true"
    # Without our toolkit there is no hook of ours to name.
    pod = the(render(operand_catalog.MIG_MANAGER, {"toolkit": {"enabled": False}}), "DaemonSet")
    assert "NVIDIA_CDI_HOOK_PATH" not in env_of(pod["spec"]["template"]["spec"]["containers"][0])


@pytest.mark.parametrize(("cdi", "checks"), [({}, True), ({"enabled": False}, False)])
def test_the_validator_checks_cdi_specs_in_cdi_mode(cdi: dict[str, Any], checks: bool) -> None:
    pod = the(render(operand_catalog.OPERATOR_VALIDATOR, {"cdi": cdi}), "DaemonSet")["spec"]["template"][
        "spec"
    ]
    by_name = {c["name"]: env_of(c) for c in pod["initContainers"]}
    assert ("CDI_ENABLED" in by_name["toolkit-validation"]) is checks
    assert ("CDI_ENABLED" in by_name["plugin-validation"]) is checks
    # The workload pods run under the operands' RuntimeClass ("" for none: cri-o's hook).
    assert by_name["cuda-validation"]["VALIDATOR_RUNTIME_CLASS"] == ("nvidia" if checks else "")


def test_config_problems_name_the_field() -> None:
    problems = policy_checks.validate_policy(
        policy_parser.parse_policy(
            {"devicePlugin": {"config": {"name": "plugin-configs"}, "resourceConfig": "gpu:sharedgpu:4"}}
        ),
        {"DEVICE_PLUGIN_IMAGE": IMAGE},
    )
    fields = {p.field: p.severity for p in problems}
    assert fields["spec.devicePlugin.config.default"] is Severity.ERROR
    assert fields["spec.devicePlugin.resourceConfig"] is Severity.WARNING


# --- the admins' named ConfigMaps (planning/config_maps: the operator checks them first) --

PLUGIN_MAP = {"devicePlugin": {"config": {"name": "plugin-configs", "default": "a100"}}}
METRICS_MAP = {"dcgmExporter": {"config": {"name": "my-metrics"}}}


@pytest.mark.parametrize(
    ("operand", "spec", "keys", "field", "words"),
    [
        # devicePlugin.config.name: absent, or without the key config.default names.
        (
            operand_catalog.DEVICE_PLUGIN,
            PLUGIN_MAP,
            {"plugin-configs": None},
            "spec.devicePlugin.config.name",
            "'plugin-configs' does not exist in namespace 'gpu-operator'",
        ),
        (
            operand_catalog.DEVICE_PLUGIN,
            PLUGIN_MAP,
            {"plugin-configs": ("h100", "l40s")},
            "spec.devicePlugin.config.default",
            "has no key 'a100' (it has: h100, l40s)",
        ),
        # dcgmExporter.config.name: absent, or without NVIDIA's dcgm-metrics.csv.
        (
            operand_catalog.DCGM_EXPORTER,
            METRICS_MAP,
            {"my-metrics": None},
            "spec.dcgmExporter.config.name",
            "'my-metrics' does not exist",
        ),
        (
            operand_catalog.DCGM_EXPORTER,
            METRICS_MAP,
            {"my-metrics": ("metrics.csv",)},
            "spec.dcgmExporter.config.name",
            "has no key 'dcgm-metrics.csv'",
        ),
    ],
)
def test_a_named_config_map_that_cannot_serve_the_operand_is_a_problem_naming_the_field(
    operand: operand_types.Operand, spec: dict[str, Any], keys: dict[str, Any], field: str, words: str
) -> None:
    from ocp_gpu.planning import config_maps

    named, required = operand_rendering.named_config_maps(operand, policy_parser.parse_policy(spec))
    problem = config_maps.missing_config_map_problem(named, keys, "gpu-operator", required)
    assert problem is not None, named
    assert (problem.field, problem.severity) == (field, Severity.ERROR)
    assert words in problem.message
    # The fix names what to change: the ConfigMap, or the field.
    assert field in problem.fix


def test_named_config_maps_that_fit_are_no_problem_and_ours_are_not_checked() -> None:
    from ocp_gpu.planning import config_maps

    for operand, spec, keys in (
        (operand_catalog.DEVICE_PLUGIN, PLUGIN_MAP, {"plugin-configs": ("a100", "h100")}),
        (operand_catalog.DCGM_EXPORTER, METRICS_MAP, {"my-metrics": ("dcgm-metrics.csv",)}),
    ):
        named, required = operand_rendering.named_config_maps(operand, policy_parser.parse_policy(spec))
        assert named and config_maps.missing_config_map_problem(named, keys, "ns", required) is None
        # Without a name the operator's own ConfigMap (or the image's default) is used: nothing to read.
        assert operand_rendering.named_config_maps(operand, policy_parser.parse_policy({})) == ({}, {})
    # The key judged is the file the exporter is pointed at.
    pod = the(render(operand_catalog.DCGM_EXPORTER, METRICS_MAP), "DaemonSet")["spec"]["template"]["spec"]
    collectors = env_of(pod["containers"][0])["DCGM_EXPORTER_COLLECTORS"]
    _, required = operand_rendering.named_config_maps(
        operand_catalog.DCGM_EXPORTER, policy_parser.parse_policy(METRICS_MAP)
    )
    assert collectors.endswith("/" + required["spec.dcgmExporter.config.name"])


def test_offline_the_named_config_maps_are_notes_saying_what_must_exist() -> None:
    from ocp_gpu.planning import config_maps

    named, required = operand_rendering.named_config_maps(
        operand_catalog.DCGM_EXPORTER, policy_parser.parse_policy(METRICS_MAP)
    )
    (note,) = config_maps.unchecked_config_map_notes(named, "gpu-operator", required)
    assert (note.field, note.severity) == ("spec.dcgmExporter.config.name", Severity.WARNING)
    assert (
        "'my-metrics' must exist in namespace 'gpu-operator' with the key 'dcgm-metrics.csv'" in note.message
    )


# --- the validator -----------------------------------------------------------------------


def test_validator_runs_each_validation_in_order() -> None:
    pod = the(render(operand_catalog.OPERATOR_VALIDATOR, {}), "DaemonSet")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == [f"{v}-validation" for v in validator.VALIDATIONS]
    assert [c["command"] for c in pod["initContainers"]] == [
        ["ocp-gpu", "validate", v] for v in validator.VALIDATIONS
    ]
    assert all(c["image"] == IMAGE for c in pod["initContainers"])
    trimmed = the(
        render(
            operand_catalog.OPERATOR_VALIDATOR,
            {"toolkit": {"enabled": False}, "devicePlugin": {"enabled": False}},
        ),
        "DaemonSet",
    )
    assert [c["name"] for c in trimmed["spec"]["template"]["spec"]["initContainers"]] == [
        "driver-validation",
        "cuda-validation",
    ]


def test_validation_env_goes_to_its_container() -> None:
    spec = {"validator": {"cuda": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}}}
    pod = the(render(operand_catalog.OPERATOR_VALIDATOR, spec), "DaemonSet")["spec"]["template"]["spec"]
    by_name = {c["name"]: c for c in pod["initContainers"]}
    assert {"name": "WITH_WORKLOAD", "value": "false"} in by_name["cuda-validation"]["env"]
    assert all(e["name"] != "WITH_WORKLOAD" for e in by_name["driver-validation"]["env"])


# --- hostile strings ----------------------------------------------------------------------


def _spec(text: Any) -> dict[str, Any]:
    """Every new string field the operand templates take from a policy."""
    component = {
        "imagePullSecrets": [text(3)],
        "env": [{"name": text(4), "value": text(5)}],
        "args": [text(6)],
        "resources": {"limits": {text(7): text(8)}},
    }
    return {
        "operator": {"runtimeClass": text(1)},
        "daemonsets": {"labels": {text(9): text(10)}, "priorityClassName": text(2)},
        "devicePlugin": {
            **component,
            "nvidiaDriverRoot": text(11),
            "config": {"name": text(12), "default": text(13)},
        },
        "gfd": component,
        "toolkit": component,
        "dcgm": component,
        "dcgmExporter": {**component, "config": {"name": text(12)}},
        "nodeStatusExporter": {**component, "enabled": True},
        "draDriver": {**component, "enabled": True},
        "sandboxWorkloads": {"enabled": True},
        "vfioManager": component,
        "sandboxDevicePlugin": component,
        "migManager": {**component, "config": {"name": text(18)}, "gpuClientsConfig": {"name": text(19)}},
        "validator": {
            **component,
            "driver": {"env": [{"name": text(14), "value": text(15)}]},
            "cuda": {"env": [{"name": text(16), "value": text(17)}]},
        },
    }


def _without_config(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifests minus the plugin's config text and its digest (checked on their own below)."""
    loaded: list[dict[str, Any]] = yaml.safe_load(yaml.safe_dump(manifests))
    for manifest in loaded:
        if manifest["kind"] == "DaemonSet":
            manifest["spec"]["template"]["metadata"]["annotations"].pop(
                device_plugin.CONFIG_DIGEST_ANNOTATION, None
            )
        if manifest["kind"] == "ConfigMap":
            manifest["data"] = {}
    return loaded


@all_generic
def test_hostile_strings_render_verbatim_as_values(operand: operand_types.Operand) -> None:
    benign = render(operand, _spec(token), openshift=False, image=token(18), ns=token(19))
    attacked = render(operand, _spec(hostile), openshift=False, image=hostile(18), ns=hostile(19))
    mapping = {hostile(i): token(i) for i in range(19, 0, -1)}  # longest index first
    seen: set[str] = set()
    assert swapped(_without_config(attacked), mapping, seen) == _without_config(benign)
    expected = {hostile(1), hostile(2), hostile(9), hostile(18), hostile(19)}
    if operand is operand_catalog.DRA_DRIVER or operand.for_vms:
        # NVIDIA's DRA kubelet plugin runs without the nvidia RuntimeClass (NVIDIA_VISIBLE_DEVICES=void),
        # and so do its VM operands (their GPUs are bound to vfio-pci, not the NVIDIA driver).
        expected.discard(hostile(1))
    assert expected <= seen


def test_hostile_strings_in_the_plugin_config_load_back() -> None:
    configmap = the(render(operand_catalog.DEVICE_PLUGIN, _spec(hostile), openshift=False), "ConfigMap")
    config = yaml.safe_load(configmap["data"][device_plugin.DEFAULT_CONFIG_KEY])
    assert config["flags"]["nvidiaDriverRoot"] == hostile(11)


def test_hostile_runtime_class_renders_verbatim() -> None:
    for text in (token, hostile):
        runtime_class, *_ = operand_rendering.render_prerequisites(
            policy_parser.parse_policy({"operator": {"runtimeClass": text(1)}}), text(2)
        )
        assert runtime_class["metadata"]["name"] == text(1)


# --- readiness per node ---------------------------------------------------------------------


def gpu(deploy: dict[str, str] | None = None) -> dict[str, str]:
    return {
        labels.NFD_NVIDIA_PCI: "true",
        **{o.deploy_label: "true" for o in operand_catalog.EVERY_GPU_NODE},
        **(deploy or {}),
    }


def test_unready_nodes_per_operand() -> None:
    nodes = {
        "gpu-a": gpu(),
        "gpu-b": gpu(),
        "gpu-off": gpu({labels.deploy_label("device-plugin"): "false"}),
        "cpu": {"kubernetes.io/os": "linux"},
    }
    app = operand_catalog.DEVICE_PLUGIN.app
    pods = [
        operand_types.OperandPod("p-a", app, "gpu-a", ready=True),
        operand_types.OperandPod("p-b", app, "gpu-b", ready=False),
        operand_types.OperandPod("t-b", operand_catalog.CONTAINER_TOOLKIT.app, "gpu-b", ready=True),
    ]
    # gpu-b's plugin pod is not Ready; gpu-off opted out; the CPU node never counts.
    assert operand_planning.unready_nodes(operand_catalog.DEVICE_PLUGIN, nodes, pods) == ["gpu-b"]
    # A node without any pod of the operand (not scheduled: a taint, a missing key) is not ready.
    assert operand_planning.unready_nodes(operand_catalog.CONTAINER_TOOLKIT, nodes, pods) == [
        "gpu-a",
        "gpu-off",
    ]
    assert operand_planning.unready_nodes(
        operand_catalog.CONTAINER_TOOLKIT,
        nodes,
        [*pods, operand_types.OperandPod("t-a", pods[2].app, "gpu-a", True)],
    ) == ["gpu-off"]


_NODE_NAMES = st.sampled_from([f"n{i}" for i in range(6)])
_APPS = st.sampled_from([operand.app for operand in operand_catalog.OPERANDS])
_LABEL_VALUES = st.sampled_from(["true", "false", None])


@st.composite
def _node_labels(draw: st.DrawFn) -> dict[str, str]:
    keys = [labels.NFD_NVIDIA_PCI, *(operand.deploy_label for operand in operand_catalog.OPERANDS)]
    found = {key: draw(_LABEL_VALUES) for key in keys}
    return {key: value for key, value in found.items() if value is not None}


@hypothesis.given(
    nodes=st.dictionaries(_NODE_NAMES, _node_labels(), max_size=6),
    pods=st.lists(
        st.builds(operand_types.OperandPod, st.text(max_size=3), _APPS, _NODE_NAMES, st.booleans()),
        max_size=12,
    ),
    enabled=st.lists(st.sampled_from(operand_catalog.OPERANDS), unique=True),
)
def test_unready_by_operand_is_unready_nodes_of_each(
    nodes: dict[str, dict[str, str]],
    pods: list[operand_types.OperandPod],
    enabled: list[operand_types.Operand],
) -> None:
    # The status judges every operand in one walk (planning/operands.unready_by_operand): the
    # same answer as each operand's own unready_nodes, operands ready everywhere left out.
    expected = {
        operand.name: unready
        for operand in enabled
        if (unready := operand_planning.unready_nodes(operand, nodes, pods))
    }
    found = operand_planning.unready_by_operand(enabled, nodes.items(), pods)
    assert found == expected
    assert list(found) == list(expected)


def _plugin_daemonset(
    generation: int, observed: int, updated: int, written: str
) -> driver_snapshot.DriverDaemonSet:
    return driver_snapshot.DriverDaemonSet(
        name=operand_catalog.DEVICE_PLUGIN.daemonset,
        annotations={labels.APPLIED_HASH: written},
        generation=generation,
        observed_generation=observed,
        desired_number_scheduled=2,
        current_number_scheduled=2,
        updated_number_scheduled=updated,
    )


@pytest.mark.parametrize(
    ("seen", "written", "oldest_counted"),
    [
        # Rolled out: every Ready pod counts.
        (_plugin_daemonset(3, 3, 2, "h3"), "h3", None),
        # The DaemonSet controller has not seen generation 3 yet: its pods are all older.
        (_plugin_daemonset(3, 2, 2, "h3"), "h3", 3),
        # Seen, one node still runs a pod of generation 2.
        (_plugin_daemonset(3, 3, 1, "h3"), "h3", 3),
        # Applied this pass (h4), the watch still shows generation 3 as rolled out.
        (_plugin_daemonset(3, 3, 2, "h3"), "h4", 4),
    ],
)
def test_a_daemonset_rolling_out_counts_only_pods_of_its_new_template(
    seen: driver_snapshot.DriverDaemonSet, written: str, oldest_counted: int | None
) -> None:
    # Issue 30: right after a spec change the old device plugin pods are still Ready; "ready"
    # then was read by a test that saw the plugin roll and the node's GPUs go afterwards.
    plugin = operand_catalog.DEVICE_PLUGIN
    rolling = operand_planning.rolling_generations([plugin], {seen.name: seen}, {seen.name: written})
    assert rolling.get(plugin.app) == oldest_counted
    gpu_node = {labels.NFD_NVIDIA_PCI: "true", plugin.deploy_label: "true"}
    pods = [
        operand_types.OperandPod("old", plugin.app, "a", ready=True, template_generation=2),
        operand_types.OperandPod("new", plugin.app, "b", ready=True, template_generation=3),
    ]
    found = operand_planning.unready_by_operand(
        [plugin], {"a": gpu_node, "b": gpu_node}.items(), pods, rolling
    )
    expected = {None: [], 3: ["a"], 4: ["a", "b"]}[oldest_counted]
    assert found == ({plugin.name: expected} if expected else {})


def test_the_driver_daemonsets_are_left_to_the_upgrade_controller() -> None:
    driver = operand_catalog.DRIVER
    outdated = dataclasses.replace(_plugin_daemonset(3, 3, 1, "h3"), name=driver.daemonset)
    assert operand_planning.rolling_generations([driver], {driver.daemonset: outdated}, {}) == {}


def test_every_object_of_an_operand_carries_its_component_so_unrendered_ones_are_found() -> None:
    # The operand mechanism deletes owned objects of an operand's component that it no longer
    # renders (planning/operands.unrendered_owned): an object without the label would linger.
    spec = {"dcgmExporter": {"serviceMonitor": {"enabled": True}}, "nodeStatusExporter": {"enabled": True}}
    for operand in operand_catalog.GENERIC:
        inputs = operand_common.OperandRenderInputs("gpu-operator", True, IMAGE, monitoring_api=True)
        rendered = operand_rendering.render_operand(operand, policy_parser.parse_policy(spec), inputs)
        component = operand_rendering.component(operand)
        assert rendered and component
        for manifest in rendered:
            assert manifest["metadata"]["labels"][labels.COMPONENT] == component, (
                operand.name,
                manifest["kind"],
            )


def test_only_our_unrendered_objects_of_the_operand_and_policy_are_deleted() -> None:
    ours = ("ConfigMap", "ns", "default-mig-parted-config")
    owned = [
        (ours, "nvidia-mig-manager", "uid-1"),
        (("DaemonSet", "ns", "nvidia-mig-manager"), "nvidia-mig-manager", "uid-1"),  # rendered: kept
        (("ConfigMap", "ns", "plugin-config"), "nvidia-device-plugin", "uid-1"),  # another operand's
        (("ConfigMap", "ns", "old-policy"), "nvidia-mig-manager", "uid-0"),  # another policy's
        (("ConfigMap", "ns", "admins"), "", ""),  # no component, no owner: never ours to delete
    ]
    rendered = [("DaemonSet", "ns", "nvidia-mig-manager")]
    assert operand_planning.unrendered_owned(owned, "nvidia-mig-manager", "uid-1", rendered) == [ours]
    # Everything rendered (steady state): nothing to delete.
    assert operand_planning.unrendered_owned(owned, "nvidia-mig-manager", "uid-1", [*rendered, ours]) == []
    # No owner known yet: nothing is deleted.
    assert operand_planning.unrendered_owned(owned, "nvidia-mig-manager", "", rendered) == []


# --- hostPaths.driverInstallDir ----------------------------------------------------------


ELSEWHERE = {"driver": {"enabled": False}, "hostPaths": {"driverInstallDir": "/home/kubernetes/bin/nvidia"}}


def _host_paths(pod: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}


def _mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}


def test_a_driver_installed_elsewhere_is_where_the_operands_look() -> None:
    # As NVIDIA's transformForDriverInstallDir: the driver-install-dir volumes, and the driver
    # validation mounted at the same path and told so; the roots the operands are given.
    where = "/home/kubernetes/bin/nvidia"
    validator = the(render(operand_catalog.OPERATOR_VALIDATOR, ELSEWHERE), "DaemonSet")["spec"]["template"][
        "spec"
    ]
    assert _host_paths(validator)["driver-install-dir"] == where
    driver_validation = validator["initContainers"][0]
    assert driver_validation["name"] == "driver-validation"
    assert driver_validation["args"] == ["--driver-root", where]
    assert _mounts(driver_validation)["driver-install-dir"] == where
    assert "args" not in validator["initContainers"][1]
    toolkit = the(render(operand_catalog.CONTAINER_TOOLKIT, ELSEWHERE), "DaemonSet")["spec"]["template"][
        "spec"
    ]
    assert env_of(toolkit["containers"][0])["NVIDIA_DRIVER_ROOT"] == where
    assert _host_paths(toolkit)["driver-install-dir"] == where
    assert _mounts(toolkit["containers"][0])["driver-install-dir"] == where
    plugin = the(render(operand_catalog.DEVICE_PLUGIN, ELSEWHERE), "DaemonSet")["spec"]["template"]["spec"]
    assert env_of(plugin["containers"][0])["NVIDIA_DRIVER_ROOT"] == where
    assert _mounts(plugin["containers"][0])["driver-install-dir"] == where
    mig = the(render(operand_catalog.MIG_MANAGER, ELSEWHERE), "DaemonSet")["spec"]["template"]["spec"]
    assert _host_paths(mig)["driver-install-dir"] == where


@pytest.mark.parametrize(
    ("spec", "root"),
    [
        # The operator's driver: its root, nothing mounted besides /run/nvidia.
        ({}, "/run/nvidia/driver"),
        # No driver of ours, none named elsewhere: the host's.
        ({"driver": {"enabled": False}}, "/"),
        ({"driver": {"enabled": False}, "hostPaths": {"driverInstallDir": "/"}}, "/"),
    ],
)
def test_the_default_driver_roots_mount_nothing_more(spec: dict[str, Any], root: str) -> None:
    for operand in (operand_catalog.CONTAINER_TOOLKIT, operand_catalog.DEVICE_PLUGIN):
        pod = the(render(operand, spec), "DaemonSet")["spec"]["template"]["spec"]
        assert env_of(pod["containers"][0])["NVIDIA_DRIVER_ROOT"] == root, operand.name
        assert "driver-install-dir" not in _host_paths(pod), operand.name
    validator = the(render(operand_catalog.OPERATOR_VALIDATOR, spec), "DaemonSet")["spec"]["template"]["spec"]
    assert _host_paths(validator)["driver-install-dir"] == "/run/nvidia/driver"
    assert "args" not in validator["initContainers"][0]


def test_a_driver_install_dir_beside_the_operators_driver_is_an_error() -> None:
    policy = policy_parser.parse_policy({"hostPaths": {"driverInstallDir": "/opt/nvidia"}})
    (problem,) = [p for p in policy_checks.validate_policy(policy, {}) if "driverInstallDir" in p.field]
    assert problem.field == "spec.hostPaths.driverInstallDir"
    assert problem.severity is Severity.ERROR
    assert "/run/nvidia/driver" in problem.message and "driver.enabled: false" in problem.fix
    assert not [
        p
        for p in policy_checks.validate_policy(policy_parser.parse_policy(ELSEWHERE), {})
        if "driverInstallDir" in p.field
    ]


def test_the_vfio_managers_driver_manager_image_defaults_to_the_drivers_and_names_its_field() -> None:
    env = releases.with_release_defaults({})
    vfio = operand_catalog.VFIO_MANAGER
    # Unset: DRIVER_MANAGER_IMAGE, the driver's k8s-driver-manager (NVIDIA's default).
    default = operand_rendering.driver_manager_image(vfio, policy_parser.parse_policy({}), env)
    assert default == env["DRIVER_MANAGER_IMAGE"]
    custom = policy_parser.parse_policy(
        {"vfioManager": {"driverManager": {"repository": "r.example.com/nv", "image": "dm", "version": "v1"}}}
    )
    assert operand_rendering.driver_manager_image(vfio, custom, env) == "r.example.com/nv/dm:v1"
    # A bad one is a problem naming the field: the operator applies nothing of the operand then.
    bad = policy_parser.parse_policy(
        {"vfioManager": {"driverManager": {"repository": "r.example.com", "image": "dm:1"}}}
    )
    problem = operand_rendering.driver_manager_image(vfio, bad, env)
    assert isinstance(problem, PolicyProblem)
    assert problem.field == "spec.vfioManager.driverManager.image"
    # Without the release's default nor a version: the problem too, not the VFIO manager's own image.
    assert isinstance(
        operand_rendering.driver_manager_image(vfio, policy_parser.parse_policy({}), {}), PolicyProblem
    )
    # An operand without its own k8s-driver-manager: none.
    plugin = operand_catalog.DEVICE_PLUGIN
    assert operand_rendering.driver_manager_image(plugin, custom, env) is None

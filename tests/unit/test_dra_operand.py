"""We test these aspects of the DRA driver operand (rendering/operands/dra_driver.py), no API:

- node ownership (planning/operands/node_labels.py): enabled, every GPU node gets
  `nvidia.com/gpu.deploy.dra-driver=true` and loses (never gets) the device plugin's "true";
  an admin's dra-driver "false" keeps a node on the device plugin; disabled, our "true" goes and
  the device plugin comes back in the same patch; an admin's device-plugin "false" stays either
  way; no valid policy (enabled unknown) touches neither; an opted-out node loses ours; never
  both plugins' labels "true" on one node (property);
- its objects as NVIDIA's state-dra-driver renders them: ServiceAccount, ClusterRole and
  binding, the three DeviceClasses with NVIDIA's CEL, the slice policy bound to the plugin's
  ServiceAccount, the DaemonSet on the dra-driver label with NVIDIA's names, env and ports, its
  init container waiting for the toolkit marker, the feature gates as the plugin's flag, the
  privileged SCC binding on OpenShift only;
- the policy section: off by default, on with featureGates parsed;
- ComputeDomains only with `computeDomains.enabled`: the controller Deployment (labelled with the
  operand's component, so switching them off deletes it), its and the daemon's RBAC, the two
  DeviceClasses, the plugin's compute-domains container; NVIDIA's MPS Role with MPSSupport;
- the plugin validation has nothing to check on a node the DRA driver owns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.planning.operands import gpu_handover, node_labels, validation
from ocp_gpu.rendering.operands import operand_catalog, operand_common, operand_rendering

DEPLOY = operand_catalog.DEPLOY_LABELS
DRA = operand_catalog.DRA_DRIVER.deploy_label
PLUGIN = operand_catalog.DEVICE_PLUGIN.deploy_label
GPU = {labels.NFD_NVIDIA_PCI: "true", labels.GPU_PRESENT: "true"}
EVERY = {operand.deploy_label: "true" for operand in operand_catalog.EVERY_GPU_NODE}
ON = frozenset({DRA})
OFF: frozenset[str] = frozenset()


def after(node: Mapping[str, str], enabled: frozenset[str] | None) -> dict[str, str]:
    """The node's labels once the patch is applied."""
    # No GPU pod on the node: nothing holds a switch (tests/unit/test_gpu_handover.py).
    patch = node_labels.plan_node_labels(node, DEPLOY, None, enabled, gpu_pods=gpu_handover.IDLE) or {}
    result = dict(node)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def test_the_deploy_labels() -> None:
    assert DRA == "nvidia.com/gpu.deploy.dra-driver"
    assert DRA not in DEPLOY.every_gpu_node and DEPLOY.while_enabled == (DRA,)
    assert DEPLOY.exclusive == ((DRA, PLUGIN),)


@pytest.mark.parametrize(
    ("node", "enabled", "dra", "plugin"),
    [
        # a new GPU node, DRA on: DRA's, and no device plugin
        (GPU, ON, "true", None),
        # a labelled node, DRA switched on: the device plugin's goes
        ({**GPU, **EVERY}, ON, "true", None),
        # the admin keeps this node on the device plugin
        ({**GPU, **EVERY, DRA: "false"}, ON, "false", "true"),
        ({**GPU, DRA: "false"}, ON, "false", "true"),
        # DRA switched off: its label goes, the device plugin comes back
        ({**GPU, **EVERY, DRA: "true"}, OFF, None, "true"),
        ({**GPU, DRA: "true"}, OFF, None, "true"),
        # an admin's "false" on the device plugin stays, on or off
        ({**GPU, PLUGIN: "false"}, ON, "true", "false"),
        ({**GPU, PLUGIN: "false", DRA: "true"}, OFF, None, "false"),
        # no valid policy: the switch is unknown, nothing moves
        ({**GPU, **EVERY, DRA: "true"}, None, "true", None),
        ({**GPU, **EVERY}, None, None, "true"),
        # DRA off and never on: nothing of DRA's
        ({**GPU, **EVERY}, OFF, None, "true"),
    ],
)
def test_which_plugin_owns_a_node(
    node: dict[str, str], enabled: frozenset[str] | None, dra: str | None, plugin: str | None
) -> None:
    labelled = after(node, enabled)
    assert (labelled.get(DRA), labelled.get(PLUGIN)) == (dra, plugin)
    # steady: a second pass changes nothing
    assert node_labels.plan_node_labels(labelled, DEPLOY, None, enabled) is None


def test_an_opted_out_or_cpu_node_loses_ours() -> None:
    opted = after({**GPU, DRA: "true", labels.GPU_DEPLOY_OPERANDS: "false"}, ON)
    assert DRA not in opted
    gone = after({labels.GPU_PRESENT: "true", DRA: "true"}, ON)
    assert DRA not in gone and labels.GPU_PRESENT not in gone
    assert node_labels.plan_node_labels({"kubernetes.io/os": "linux"}, DEPLOY, None, ON) is None


_VALUES = st.sampled_from([None, "true", "false"])


@given(dra=_VALUES, plugin=_VALUES, enabled=st.sampled_from([ON, OFF]))
def test_never_both_plugins(dra: str | None, plugin: str | None, enabled: frozenset[str]) -> None:
    node = {**GPU, **({DRA: dra} if dra else {}), **({PLUGIN: plugin} if plugin else {})}
    labelled = after(node, enabled)
    assert not (labelled.get(DRA) == "true" and labelled.get(PLUGIN) == "true")


def render(spec: Mapping[str, Any], openshift: bool = True) -> list[dict[str, Any]]:
    policy = policy_parser.parse_policy(dict(spec))
    inputs = operand_common.OperandRenderInputs(
        namespace="nvidia-gpu-operator",
        openshift=openshift,
        image="nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0",  # type: ignore[arg-type]
        wait_image="quay.io/ocp-gpu/ocp-gpu:v0.1.0",  # type: ignore[arg-type]
    )
    return operand_rendering.render_operand(operand_catalog.DRA_DRIVER, policy, inputs)


def test_the_section() -> None:
    assert policy_parser.parse_policy({}).dra_driver.enabled is False
    spec = policy_parser.parse_policy({"draDriver": {"enabled": True, "featureGates": {"MPSSupport": True}}})
    assert spec.dra_driver.enabled and spec.dra_driver.feature_gates == {"MPSSupport": True}


def test_its_objects_as_nvidia_renders_them() -> None:
    objects = render({"draDriver": {"enabled": True}})
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ServiceAccount", "nvidia-dra-driver-kubeletplugin"),
        ("ClusterRole", "nvidia-dra-driver-kubeletplugin"),
        ("ClusterRoleBinding", "nvidia-dra-driver-kubeletplugin"),
        ("DeviceClass", "gpu.nvidia.com"),
        ("DeviceClass", "mig.nvidia.com"),
        ("DeviceClass", "vfio.gpu.nvidia.com"),
        ("RoleBinding", "nvidia-dra-driver-kubeletplugin-privileged-scc"),
        ("ValidatingAdmissionPolicy", "resourceslices-policy-nvidia-dra-driver"),
        ("ValidatingAdmissionPolicyBinding", "resourceslices-policy-nvidia-dra-driver"),
        ("DaemonSet", "nvidia-dra-driver-kubelet-plugin"),
    ]
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    gpu_class = by_name[("DeviceClass", "gpu.nvidia.com")]
    assert gpu_class["spec"]["selectors"] == [
        {
            "cel": {
                "expression": "device.driver == 'gpu.nvidia.com' && "
                "device.attributes['gpu.nvidia.com'].type == 'gpu'"
            }
        }
    ]
    policy = by_name[("ValidatingAdmissionPolicy", "resourceslices-policy-nvidia-dra-driver")]
    assert policy["spec"]["matchConditions"][0]["expression"] == (
        'request.userInfo.username == "system:serviceaccount:'
        'nvidia-gpu-operator:nvidia-dra-driver-kubeletplugin"'
    )
    daemonset = by_name[("DaemonSet", "nvidia-dra-driver-kubelet-plugin")]
    assert daemonset["spec"]["selector"]["matchLabels"] == {"app": "nvidia-dra-driver-kubelet-plugin"}
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {DRA: "true"}
    assert pod["serviceAccountName"] == "nvidia-dra-driver-kubeletplugin"
    (init,) = pod["initContainers"]
    assert "toolkit-ready" in init["args"][0]
    (gpus,) = pod["containers"]
    assert (gpus["name"], gpus["command"], gpus["args"]) == ("gpus", ["gpu-kubelet-plugin"], [])
    env = {e["name"]: e.get("value") for e in gpus["env"]}
    assert env["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver" and env["DRIVER_ROOT_CTR_PATH"] == "/driver-root"
    assert env["HEALTHCHECK_PORT"] == "51516" and gpus["livenessProbe"]["grpc"]["port"] == 51516
    assert env["KUBELET_PLUGINS_DIRECTORY_PATH"] == "/var/lib/kubelet/plugins"
    assert {"NODE_NAME", "NAMESPACE"} <= set(env)


def test_feature_gates_and_a_host_driver() -> None:
    objects = render(
        {
            "draDriver": {
                "enabled": True,
                "featureGates": {"MPSSupport": True, "IMEXDaemonsWithDNSNames": False},
            },
            "driver": {"enabled": False},
        },
        openshift=False,
    )
    # No SCC binding off OpenShift; with MPS, NVIDIA's Role for the MPS control daemons.
    bindings = [o["metadata"]["name"] for o in objects if o["kind"] == "RoleBinding"]
    assert bindings == ["nvidia-dra-driver-kubeletplugin-mps"]
    (role,) = [o for o in objects if o["kind"] == "Role"]
    assert role["rules"] == [
        {
            "apiGroups": ["apps"],
            "resources": ["deployments"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        }
    ]
    (gpus,) = objects[-1]["spec"]["template"]["spec"]["containers"]
    assert gpus["args"] == ["--feature-gates=IMEXDaemonsWithDNSNames=false,MPSSupport=true"]
    env = {e["name"]: e.get("value") for e in gpus["env"]}
    assert env["NVIDIA_DRIVER_ROOT"] == "/"


def test_plugin_validation_on_a_dra_node() -> None:
    assert validation.plugin_not_on_node({DRA: "true"}) is not None
    assert validation.plugin_not_on_node({DRA: "false"}) is None
    assert validation.plugin_not_on_node({}) is None


def test_compute_domains_only_when_enabled() -> None:
    plain = render({"draDriver": {"enabled": True}}, openshift=False)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in plain]
    assert not [k for k in kinds if k[0] in ("Deployment", "Role")]
    assert not [k for k in kinds if "compute-domain" in k[1]]
    rules = next(o for o in plain if o["kind"] == "ClusterRole")["rules"]
    assert "resource.nvidia.com" not in [group for rule in rules for group in rule["apiGroups"]]
    domains = render({"draDriver": {"enabled": True, "computeDomains": {"enabled": True}}}, openshift=False)
    names = {(o["kind"], o["metadata"]["name"]) for o in domains}
    assert {
        ("Deployment", "nvidia-dra-driver-controller"),
        ("ServiceAccount", "nvidia-dra-driver-controller"),
        ("ServiceAccount", "compute-domain-daemon-service-account"),
        ("ClusterRole", "compute-domain-daemon"),
        ("Role", "nvidia-dra-driver-kubeletplugin"),
        ("DeviceClass", "compute-domain-daemon.nvidia.com"),
        ("DeviceClass", "compute-domain-default-channel.nvidia.com"),
    } <= names
    plugin = next(o for o in domains if o["kind"] == "DaemonSet")
    gpus, compute = plugin["spec"]["template"]["spec"]["containers"]
    assert (gpus["name"], compute["name"], compute["command"]) == (
        "gpus",
        "compute-domains",
        ["compute-domain-kubelet-plugin"],
    )
    env = {e["name"]: e.get("value") for e in compute["env"]}
    assert (env["HTTP_ENDPOINT"], env["HEALTHCHECK_PORT"], env["GPU_CLIQUE_LABEL_ENABLED"]) == (
        ":8081",
        "51515",
        "true",
    )
    # The Deployment carries the operand's component: switching ComputeDomains off deletes it.
    controller = next(o for o in domains if o["kind"] == "Deployment")
    assert (
        controller["metadata"]["labels"]["app.kubernetes.io/component"] == "nvidia-dra-driver-kubelet-plugin"
    )
    assert controller["spec"]["template"]["metadata"]["labels"]["app"] == "nvidia-dra-driver-controller"

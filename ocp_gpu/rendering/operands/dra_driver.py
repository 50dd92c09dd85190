"""The DRA driver operand: NVIDIA's DRA kubelet plugin, its DeviceClasses, RBAC and slice policy.

NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu, image
`dra-driver-nvidia-gpu`) announces each node's GPUs as ResourceSlices of driver
`gpu.nvidia.com` and prepares the devices of the claims the scheduler allocates.  Its
objects are NVIDIA's `manifests/state-dra-driver` at v26.7.0 (GPUCluster's stack): the
kubelet plugin DaemonSet `nvidia-dra-driver-kubelet-plugin` (pods `app=` the same),
its ServiceAccount and ClusterRole, the DeviceClasses `gpu.nvidia.com`, `mig.nvidia.com`
and `vfio.gpu.nvidia.com`, and the ValidatingAdmissionPolicy that lets the plugin write
only its own node's slices.  On a node either the device plugin or this plugin owns the
GPUs (planning/operands/node_labels.py: `nvidia.com/gpu.deploy.dra-driver`).  Its pods
start once the toolkit's validation marker exists, as the device plugin's do.  NB: NVIDIA's
ComputeDomains (a second container, a controller Deployment and the resource.nvidia.com CRDs)
are not rendered.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import operand_types, resource_claims
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "dra-driver",
    "draDriver",
    "nvidia-dra-driver-kubelet-plugin",
    images=("draDriver", "validator"),
    deploy_on=operand_types.DeployOn.WHILE_ENABLED,
    kinds=(
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "DeviceClass",
        "RoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "DaemonSet",
    ),
)
DAEMONSET: Final = OPERAND.daemonset
# NVIDIA's names (its ServiceAccount's is what its slice policy names).
IDENTITY: Final = operand_common.Identity(
    component="nvidia-dra-driver-kubelet-plugin",
    service_account="nvidia-dra-driver-kubeletplugin",
    container="gpus",
    owned_env=frozenset(
        {
            "NODE_NAME",
            "NAMESPACE",
            "NVIDIA_DRIVER_ROOT",
            "DRIVER_ROOT_CTR_PATH",
            "KUBELET_REGISTRAR_DIRECTORY_PATH",
            "KUBELET_PLUGINS_DIRECTORY_PATH",
            "HEALTHCHECK_PORT",
            "IMAGE_NAME",
        }
    ),
)
CLUSTER_ROLE: Final = "nvidia-dra-driver-kubeletplugin"
SLICES_POLICY: Final = "resourceslices-policy-nvidia-dra-driver"
# The toolkit's validation marker (DESIGN §4): after the driver's, as for the device plugin.
TOOLKIT_READY_MARKER: Final = "toolkit-ready"
# The kubelet's plugin directories (NVIDIA's default kubeletRootDir /var/lib/kubelet).
REGISTRY_DIR: Final = "/var/lib/kubelet/plugins_registry"
PLUGINS_DIR: Final = "/var/lib/kubelet/plugins"
# NVIDIA's health-check port of the gpus container (GPUCluster draDriver.gpus.kubeletPlugin.healthcheck.port).
GPUS_HEALTHCHECK_PORT: Final = 51516
# NVIDIA's DeviceClasses, by name: the CEL that picks the devices of each.
DEVICE_CLASSES: Final = (
    (
        "gpu.nvidia.com",
        f"device.driver == '{resource_claims.GPU_DRIVER}' && "
        f"device.attributes['{resource_claims.GPU_DRIVER}'].type == 'gpu'",
    ),
    (
        "mig.nvidia.com",
        f"device.driver == '{resource_claims.GPU_DRIVER}' && "
        f"device.attributes['{resource_claims.GPU_DRIVER}'].type == 'mig'",
    ),
    (
        "vfio.gpu.nvidia.com",
        f"device.driver == '{resource_claims.GPU_DRIVER}' && "
        f"device.attributes['{resource_claims.GPU_DRIVER}'].type == 'vfio'",
    ),
)


def _common_env(spec: policy_spec.DraDriverSpec, driver_root: str, image: str) -> dict[str, str]:
    env = {
        "METRICS_PATH": "/metrics",
        "NVIDIA_VISIBLE_DEVICES": "void",
        "CDI_ROOT": "/var/run/cdi",
        "HOST_ROOT": "/host",
        "NVIDIA_MIG_CONFIG_DEVICES": "all",
        "NVIDIA_DRIVER_ROOT": driver_root,
        "DRIVER_ROOT_CTR_PATH": "/driver-root",
        "IMAGE_NAME": image,
        "KUBELET_REGISTRAR_DIRECTORY_PATH": REGISTRY_DIR,
        "KUBELET_PLUGINS_DIRECTORY_PATH": PLUGINS_DIR,
    }
    return env


def feature_gates_args(spec: policy_spec.DraDriverSpec) -> list[str]:
    """featureGates as the plugin's --feature-gates flag (`Name=true,Other=false`, sorted, as NVIDIA
    renders its FEATURE_GATES).  NB: the flag, not NVIDIA's env: the env name is computed from the
    flag's at run time, so model/image_contracts.py (read from source) knows only the flag."""
    if not spec.feature_gates:
        return []
    gates = ",".join(f"{name}={str(on).lower()}" for name, on in sorted(spec.feature_gates.items()))
    return [f"--feature-gates={gates}"]


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    spec = policy.dra_driver
    # The driver root on the host: the driver container's, or the host's own driver.
    driver_root = policy_spec.DRIVER_ROOT_CONTAINERIZED if policy.driver.enabled else "/"
    common = _common_env(spec, driver_root, str(inputs.image))
    own = [
        {"name": item.name, "value": item.value} for item in spec.env if item.name not in IDENTITY.owned_env
    ]
    plugins = [
        {
            "container": IDENTITY.container,
            "command": "gpu-kubelet-plugin",
            "args": [*feature_gates_args(spec), *spec.args],
            "env": [
                {"name": name, "value": value}
                for name, value in {
                    **common,
                    "HTTP_ENDPOINT": ":8080",
                    "HEALTHCHECK_PORT": str(GPUS_HEALTHCHECK_PORT),
                }.items()
            ]
            + own,
            "resources": spec.resources.as_wire(),
            "healthcheck_port": GPUS_HEALTHCHECK_PORT,
            "liveness_period": 30,
        }
    ]
    return {
        "cluster_role": CLUSTER_ROLE,
        "slices_policy": SLICES_POLICY,
        "device_classes": [list(pair) for pair in DEVICE_CLASSES],
        "wait_for_toolkit": operand_common.marker_wait(TOOLKIT_READY_MARKER, "the toolkit validation"),
        "registry_dir": REGISTRY_DIR,
        "plugins_dir": PLUGINS_DIR,
        "driver_root": driver_root,
        "plugins": plugins,
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)

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
start once the toolkit's validation marker exists, as the device plugin's do.

With `draDriver.computeDomains.enabled` (NVIDIA's multi-node NVLink ComputeDomains), as NVIDIA
renders them: the kubelet plugin's second container `compute-domains`
(compute-domain-kubelet-plugin, driver compute-domain.nvidia.com), the controller Deployment
`nvidia-dra-driver-controller` (compute-domain-controller), the DeviceClasses
`compute-domain-daemon.nvidia.com` and `compute-domain-default-channel.nvidia.com`, the RBAC of
the controller, of the compute-domain daemon and the plugin's read of ComputeDomains and
cliques.  NB: the resource.nvidia.com CRDs (ComputeDomain, ComputeDomainClique) are not
rendered: the bundle and the chart ship them (ocp_gpu/crds/), as NVIDIA's do.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels, operand_types, resource_claims
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
        "Role",
        "DeviceClass",
        "RoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "DaemonSet",
        "Deployment",
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
# ComputeDomains (NVIDIA's names): the kubelet plugin's second container, its driver and health
# port, the controller Deployment (and its ServiceAccount and roles), the daemon's ServiceAccount
# and ClusterRole (the controller's IMEX DaemonSets run as it).
COMPUTE_DOMAINS_CONTAINER: Final = "compute-domains"
COMPUTE_DOMAIN_DRIVER: Final = "compute-domain.nvidia.com"
COMPUTE_DOMAINS_HEALTHCHECK_PORT: Final = 51515
CONTROLLER: Final = "nvidia-dra-driver-controller"
# The kubelet plugin's Role with featureGates.MPSSupport (NVIDIA's name).
MPS_ROLE: Final = "nvidia-dra-driver-kubeletplugin-mps"
DAEMON_ROLE: Final = "compute-domain-daemon"
DAEMON_SERVICE_ACCOUNT: Final = "compute-domain-daemon-service-account"
# The controller's own tolerations (NVIDIA's: it prefers control-plane nodes), before daemonsets.tolerations.
CONTROLLER_TOLERATIONS: Final = (
    {"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
    {"effect": "NoSchedule", "key": "node-role.kubernetes.io/master", "operator": "Exists"},
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
)
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
# With ComputeDomains: a domain's daemon, and a pod's IMEX channel 0.
COMPUTE_DOMAIN_CLASSES: Final = (
    (
        "compute-domain-daemon.nvidia.com",
        f"device.driver == '{COMPUTE_DOMAIN_DRIVER}' && "
        f"device.attributes['{COMPUTE_DOMAIN_DRIVER}'].type == 'daemon'",
    ),
    (
        "compute-domain-default-channel.nvidia.com",
        f"device.driver == '{COMPUTE_DOMAIN_DRIVER}' && "
        f"device.attributes['{COMPUTE_DOMAIN_DRIVER}'].type == 'channel' && "
        f"device.attributes['{COMPUTE_DOMAIN_DRIVER}'].id == 0",
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
    domains = spec.compute_domains
    classes = [*DEVICE_CLASSES, *(COMPUTE_DOMAIN_CLASSES if domains.enabled else ())]
    if domains.enabled:
        plugins.append(
            {
                "container": COMPUTE_DOMAINS_CONTAINER,
                "command": "compute-domain-kubelet-plugin",
                "args": feature_gates_args(spec),
                "env": [
                    {"name": name, "value": value}
                    for name, value in {
                        **{k: v for k, v in common.items() if k not in ("HOST_ROOT", "IMAGE_NAME")},
                        "HTTP_ENDPOINT": ":8081",
                        "HEALTHCHECK_PORT": str(COMPUTE_DOMAINS_HEALTHCHECK_PORT),
                        "GPU_CLIQUE_LABEL_ENABLED": "true",
                    }.items()
                ]
                + _own_env(domains.kubelet_plugin.env),
                "resources": domains.kubelet_plugin.resources.as_wire(),
                "healthcheck_port": COMPUTE_DOMAINS_HEALTHCHECK_PORT,
                "liveness_period": 10,
            }
        )
    return {
        "cluster_role": CLUSTER_ROLE,
        "slices_policy": SLICES_POLICY,
        "device_classes": [list(pair) for pair in classes],
        "compute_domains": _compute_domains(policy, inputs) if domains.enabled else None,
        # NVIDIA's: with MPS the kubelet plugin runs each claim's MPS control daemon as a Deployment.
        "mps_role": MPS_ROLE if spec.feature_gates.get("MPSSupport") else None,
        "wait_for_toolkit": operand_common.marker_wait(TOOLKIT_READY_MARKER, "the toolkit validation"),
        "registry_dir": REGISTRY_DIR,
        "plugins_dir": PLUGINS_DIR,
        "driver_root": driver_root,
        "plugins": plugins,
    }


def _own_env(env: tuple[policy_spec.EnvVar, ...]) -> list[dict[str, str]]:
    """The admin's env of a ComputeDomain container, but for the names the operator sets."""
    return [{"name": item.name, "value": item.value} for item in env if item.name not in IDENTITY.owned_env]


def _compute_domains(
    policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs
) -> dict[str, Any]:
    """The controller Deployment's and the ComputeDomain RBAC's context (NVIDIA's
    0600_controller-deployment.yaml: its labels, tolerations, env)."""
    controller = policy.dra_driver.compute_domains.controller
    identity = {
        "app.kubernetes.io/name": "nvidia-dra-driver",
        "app.kubernetes.io/component": CONTROLLER,
        "app": CONTROLLER,
    }
    # NB: the Deployment itself carries the operand's component (NVIDIA's: the controller's), so
    # that switching ComputeDomains off finds and deletes it with the operand's other objects
    # (planning/operands/operand_planning.unrendered_owned); its pods keep NVIDIA's labels.
    own = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE}
    component = {labels.COMPONENT: IDENTITY.component}
    tolerations: list[dict[str, object]] = [dict(item) for item in CONTROLLER_TOLERATIONS]
    for toleration in policy.daemonsets.tolerations:
        if (wire := toleration.as_wire()) not in tolerations:
            tolerations.append(wire)
    env = {
        "HTTP_ENDPOINT": ":8080",
        "METRICS_PATH": "/metrics",
        "PPROF_PATH": "",
        "LOG_VERBOSITY_CD_DAEMON": "4",
        "IMAGE_NAME": str(inputs.image),
        "NVIDIA_VISIBLE_DEVICES": "void",
        "LEADER_ELECTION_ENABLED": "false",
        "LEADER_ELECTION_LEASE_LOCK_NAME": CONTROLLER,
        "LEADER_ELECTION_LEASE_LOCK_NAMESPACE": inputs.namespace,
        "LEADER_ELECTION_LEASE_DURATION": "15s",
        "LEADER_ELECTION_RENEW_DEADLINE": "10s",
        "LEADER_ELECTION_RETRY_PERIOD": "2s",
    }
    return {
        "controller": CONTROLLER,
        "daemon": DAEMON_ROLE,
        "daemon_service_account": DAEMON_SERVICE_ACCOUNT,
        # NB: the policy's daemonsets.labels first: ours (the selector's app) win.
        "labels": {**policy.daemonsets.labels, **identity, **own, **component},
        "pod_labels": {**policy.daemonsets.labels, **identity, **own},
        "tolerations": tolerations,
        "args": feature_gates_args(policy.dra_driver),
        "env": [{"name": name, "value": value} for name, value in env.items()]
        + [item for item in _own_env(controller.env) if item["name"] not in env],
        "resources": controller.resources.as_wire(),
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)

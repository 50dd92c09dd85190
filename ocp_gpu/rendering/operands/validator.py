"""The operator-validation operand's own context: one init container per validation.

The validator pod (`nvidia-operator-validator`, label app=nvidia-operator-validator,
which the upgrade controller's validation step waits for) runs our own program,
`ocp-gpu validate driver|toolkit|cuda|plugin`, from VALIDATOR_IMAGE (the operator's
image), as init containers in that order; each writes its marker in
/run/nvidia/validations (driver-ready, toolkit-ready, cuda-ready, plugin-ready) that the
other operands' init containers wait for.  The toolkit and plugin validations are
left out when their operand is disabled.  Pure.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels, operand_types
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.rendering.operands import operand_common

# The operand, declared (model/operand_types.Operand says what each field means).
OPERAND: Final = operand_types.Operand(
    "operator-validator",
    "validator",
    labels.VALIDATOR_APP,
    reads=("toolkit", "devicePlugin"),
    images=("validator",),
    kinds=(*operand_types.BASE_KINDS, "Role", *operand_types.CLUSTER_RBAC),
    nvidia_selector_extra=((labels.PART_OF, "gpu-operator"),),
)
DAEMONSET: Final = OPERAND.daemonset
IDENTITY: Final = operand_common.Identity(
    component="nvidia-operator-validator",
    service_account="nvidia-operator-validator",
    container="nvidia-operator-validator",
    owned_env=frozenset({"NODE_NAME", "OPERATOR_NAMESPACE"}),
)
# The cluster-scoped read of nodes the plugin validation needs.
CLUSTER_ROLE: Final = "ocp-gpu-nvidia-operator-validator"
# The validations, in order; each is an init container `<name>-validation`.
VALIDATIONS: Final = ("driver", "toolkit", "cuda", "plugin")


def _own_env(policy: policy_spec.Policy, name: str, openshift: bool) -> dict[str, str]:
    """What `ocp-gpu validate <name>` needs to know of the policy (commands/validate.py)."""
    plugin = policy.device_plugin
    cdi_strategies = {policy_spec.DeviceListStrategy.CDI_ANNOTATIONS, policy_spec.DeviceListStrategy.CDI_CRI}
    if name == "toolkit" and policy.cdi.enabled:
        # Check the toolkit's management CDI spec too.
        return {"CDI_ENABLED": "true"}
    if name == "plugin" and cdi_strategies & set(plugin.device_list_strategies):
        # The plugin writes its own CDI spec with a CDI strategy.
        return {"CDI_ENABLED": "true", **_workload_runtime(policy, openshift)}
    if name in ("cuda", "plugin"):
        return _workload_runtime(policy, openshift)
    return {}


def _workload_runtime(policy: policy_spec.Policy, openshift: bool) -> dict[str, str]:
    # The workload pods' RuntimeClass: the operands' ("" for none: cri-o's hook, the NRI plugin).
    return {"VALIDATOR_RUNTIME_CLASS": operand_common.runtime_class_name(policy, openshift) or ""}


def _validation_env(policy: policy_spec.Policy, name: str, openshift: bool) -> list[dict[str, str]]:
    """The program's env from the policy, then validator.<name>.env as written (which may override it)."""
    env = _own_env(policy, name, openshift)
    written: tuple[policy_spec.EnvVar, ...] = getattr(policy.validator, f"{name}_env")
    env.update({item.name: item.value for item in written if item.name not in IDENTITY.owned_env})
    return [{"name": key, "value": value} for key, value in env.items()]


def extra_context(policy: policy_spec.Policy, inputs: operand_common.OperandRenderInputs) -> dict[str, Any]:
    enabled = {
        "driver": True,
        # Without our toolkit (preinstalled on the hosts) there is nothing of ours to validate.
        "toolkit": policy.toolkit.enabled,
        "cuda": True,
        # The plugin validation requests a GPU: only meaningful with our device plugin.
        "plugin": policy.device_plugin.enabled,
    }
    # NB: "/" (the host's root) is where the driver validation looks first anyway.
    install_dir = policy_spec.elsewhere(policy.host_paths.driver_install_dir)
    return {
        "default_env": {},
        "driver_install_dir": install_dir or policy_spec.DRIVER_ROOT_CONTAINERIZED,
        "validations": [
            {
                "name": name,
                "container": f"{name}-validation",
                "env": _validation_env(policy, name, inputs.openshift),
                # hostPaths.driverInstallDir elsewhere: the driver validation looks there, mounted
                # at the same path (as NVIDIA's transformForDriverInstallDir).
                "args": ["--driver-root", install_dir] if name == "driver" and install_dir else [],
            }
            for name in VALIDATIONS
            if enabled[name]
        ],
        "cluster_role": CLUSTER_ROLE,
        # The toolkit validation runs nvidia-smi: with the NRI plugin it is given the GPUs by annotation.
        "pod_annotations": operand_common.nri_annotations(
            policy, "toolkit-validation" if enabled["toolkit"] else ""
        ),
    }


RENDERING: Final = operand_common.OwnRendering(IDENTITY, extra_context)

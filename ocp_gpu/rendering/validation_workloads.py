"""The workload pods of `ocp-gpu validate cuda|plugin` (templates/validation-workload).

Input: which validation, the node, the namespace, the image settings the validator
was given, and (optionally) the validator's own pod as owner, so a workload pod goes
when its validator pod goes.  Output: one Pod manifest.  Every string reaches the YAML
through `templating.yaml_value` only.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ocp_gpu.model import labels
from ocp_gpu.planning.operands.validation import Component
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands import operand_common

TEMPLATES: Final = "validation-workload"
# The container name of each workload (NVIDIA's, so `kubectl logs -c` habits keep working).
CONTAINERS: Final = {Component.CUDA: "cuda-validation", Component.PLUGIN: "plugin-validation"}
# The annotation naming the node a workload pod validates (its name only carries a hash).
NODE_ANNOTATION: Final = "nvidia.com/validation-node"
# The pod label `app` of each workload pod (NVIDIA's values, so their runbooks' selectors work).
WORKLOAD_APPS: Final = {
    Component.CUDA: "nvidia-cuda-validator",
    Component.PLUGIN: "nvidia-device-plugin-validator",
}


def nri_annotations(component: Component) -> dict[str, str]:
    """The annotation that has the toolkit's NRI plugin (`cdi.nriPluginEnabled`) inject every GPU
    into the cuda workload's container: under NRI it runs without a RuntimeClass and before the
    device plugin, so nothing else would give it a GPU.  Always set, as NVIDIA's
    validator/manifests/cuda-workload-validation.yaml (v26.7.0) sets it: only the NRI plugin reads
    it (the `nvidia` runtime's CDI annotation prefix is cdi.k8s.io/).  The plugin workload gets its
    GPU from the device plugin, in every mode: none."""
    if component is not Component.CUDA:
        return {}
    return {
        f"{operand_common.NRI_ANNOTATION_DOMAIN}/container.{CONTAINERS[component]}": (
            operand_common.MANAGEMENT_CDI_DEVICE
        )
    }


def workload_pod_name(component: Component, node: str) -> str:
    """One workload pod per node and component, found again by name on the next run.

    NB: a node name may be 253 characters, as long as a pod name may be: a short hash
    of it keeps the name valid and the pod one per node.
    """
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    return f"{WORKLOAD_APPS[component]}-{digest}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkloadInputs:
    component: Component
    node: str
    namespace: str
    image: str
    pull_policy: str = "IfNotPresent"
    pull_secrets: Sequence[str] = ()
    # "" leaves the cluster's default runtime (the plugin workload gets its GPU from the plugin).
    runtime_class: str = ""
    # The plugin workload's request, e.g. nvidia.com/gpu; unused for cuda.
    resource: str = ""
    # The validator's own pod ({"name": ..., "uid": ...}); None: no owner.
    owner_pod: Mapping[str, str] | None = None
    # Extra annotations for the pod (e.g. to opt out of a service mesh's sidecar injection).
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)


def render_workload_pod(inputs: WorkloadInputs) -> dict[str, Any]:
    """The workload pod manifest for `inputs.component` (cuda or plugin) on `inputs.node`."""
    if inputs.component not in CONTAINERS:
        raise ValueError(f"{inputs.component} has no workload pod")
    (pod,) = templating.render_state(TEMPLATES, workload_context(inputs))
    return pod


def workload_context(inputs: WorkloadInputs) -> dict[str, Any]:
    cuda = inputs.component is Component.CUDA
    owner = (
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": inputs.owner_pod["name"],
                "uid": inputs.owner_pod["uid"],
                # NB: no blockOwnerDeletion: that needs delete rights on the owner pod's finalizers.
            }
        ]
        if inputs.owner_pod
        else []
    )
    return {
        "name": workload_pod_name(inputs.component, inputs.node),
        "namespace": inputs.namespace,
        "labels": {
            "app": WORKLOAD_APPS[inputs.component],
            labels.MANAGED_BY: labels.MANAGED_BY_VALUE,
        },
        "annotations": {
            **nri_annotations(inputs.component),
            **inputs.annotations,
            NODE_ANNOTATION: inputs.node,
        },
        "owner_references": owner,
        # cuda runs before the device plugin: placed by name.  plugin: the scheduler must find the GPU.
        "node_name": inputs.node if cuda else "",
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [inputs.node]}]}
                    ]
                }
            }
        },
        "runtime_class": inputs.runtime_class,
        # GPU pools are often tainted (seed 003); the pod is meant for this one node whatever its taints.
        "tolerations": [{"operator": "Exists"}],
        "image_pull_secrets": [{"name": secret} for secret in dict.fromkeys(inputs.pull_secrets)],
        "container": CONTAINERS[inputs.component],
        "image": inputs.image,
        "pull_policy": inputs.pull_policy,
        # cuda: every GPU through the runtime (no device plugin yet); plugin: what the plugin allocates.
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}] if cuda else [],
        "resources": {} if cuda else {"limits": {inputs.resource: 1}, "requests": {inputs.resource: 1}},
    }

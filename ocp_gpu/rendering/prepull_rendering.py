"""The pre-pull DaemonSet of an OpenShift upgrade (planning/upgrades/upgrade_preflight.PrePull).

One DaemonSet per RHEL stream with target builds: on the GPU nodes still on a build the upgrade
replaces (node affinity on their `OSTREE_VERSION`), one init container per target image (the
Driver Toolkit's, then the driver's) that exits at once, so the kubelet pulls the image and
nothing runs; then a container that sleeps in the last image, so that the pod stays (a
DaemonSet pod that exits is restarted).  No priority class (priority 0, below every operand's),
`maxUnavailable` 100 % (a changed build list re-rolls every pod at once: the images are there),
nothing mounted, no privileges, tiny requests.  Pure: manifests only.
"""

from __future__ import annotations

from typing import Any, Final

from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning.upgrades import upgrade_preflight
from ocp_gpu.rendering.operands import operand_common

COMPONENT: Final = labels.PREPULL_COMPONENT
NAME_PREFIX: Final = "nvidia-driver-prepull-"
# Their pods' apps, for the pod watch (a pull that fails is the preflight's to say): RHCOS 9's, 10's.
POD_APPS: Final = (NAME_PREFIX + "rhel9", NAME_PREFIX + "rhel10")
# The requests of each container: the kubelet pulls, nothing works.
_REQUESTS: Final = {"cpu": "1m", "memory": "8Mi"}


def prepull_name(pull: upgrade_preflight.PrePull) -> str:
    return NAME_PREFIX + pull.stream


def render_prepull(
    pull: upgrade_preflight.PrePull, policy: policy_spec.Policy, namespace: str
) -> dict[str, Any]:
    """The DaemonSet that pulls ``pull.images`` on the GPU nodes of ``pull.builds``."""
    name = prepull_name(pull)
    identity = {"app": name, labels.COMPONENT: COMPONENT}
    no_privileges = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    secrets = dict.fromkeys(policy.driver.image.pull_secrets)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(identity)},
        "spec": {
            "selector": {"matchLabels": dict(identity)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {"labels": dict(identity)},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": labels.NFD_NVIDIA_PCI,
                                                "operator": "In",
                                                "values": ["true"],
                                            },
                                            {
                                                "key": labels.OSTREE_VERSION,
                                                "operator": "In",
                                                "values": list(pull.builds),
                                            },
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "tolerations": operand_common.tolerations(policy),
                    **({"imagePullSecrets": [{"name": s} for s in secrets]} if secrets else {}),
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                    "initContainers": [
                        {
                            "name": f"pull-{index}",
                            "image": image,
                            # NB: both images are UBI-based and carry a shell
                            "command": ["sh", "-c", "exit 0"],
                            "resources": {"requests": dict(_REQUESTS)},
                            "securityContext": dict(no_privileges),
                        }
                        for index, image in enumerate(pull.images)
                    ],
                    "containers": [
                        {
                            "name": "hold",
                            "image": pull.images[-1],
                            "command": ["sleep", "infinity"],
                            "resources": {"requests": dict(_REQUESTS)},
                            "securityContext": dict(no_privileges),
                        }
                    ],
                },
            },
        },
    }

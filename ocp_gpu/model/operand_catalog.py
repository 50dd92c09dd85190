"""Every operand, declared once as data: what the generic operand mechanism needs to know.

An operand is a node agent the operator deploys as one DaemonSet (the driver as one
per key).  Its declaration says where its templates are (`templates/state-<name>/`),
which ClusterPolicy section switches it (`<section>.enabled`), which node label it
selects on (`nvidia.com/gpu.deploy.<name>`), where its default image comes from (the
section's entry in `images.DEFAULT_IMAGE_ENV`), how its readiness is judged and its
place in the order (DESIGN §4: the order of `OPERANDS`).  Adding an operand is a
template folder plus a row here (and, if its templates need more than the common
context, a context function in `rendering/operands/operand_rendering.py`).

Pure data: no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Final

from ocp_gpu.model import images, labels


class Readiness(enum.StrEnum):
    """How an operand's readiness is judged."""

    # A Ready pod (label app=<app>) on every GPU node labelled nvidia.com/gpu.deploy.<name>=true.
    POD_ON_EVERY_NODE = "pod-on-every-node"


@dataclasses.dataclass(frozen=True)
class Operand:
    # The deploy label suffix and template folder (state-<name>), e.g. "device-plugin".
    name: str
    # Its field under `spec`, e.g. "devicePlugin" (its `enabled` switches it).
    section: str
    # The DaemonSet's name; its pods carry app=<daemonset>.
    daemonset: str
    readiness: Readiness = Readiness.POD_ON_EVERY_NODE
    # False for the driver: it plans its own DaemonSets (one per key, planning/drivers/driver_plan.py).
    generic: bool = True
    # Pod labels NVIDIA's DaemonSet selects on besides app=<app> (its assets/*/0500_daemonset.yaml
    # at the release we pin): the selector is immutable, so an equal one updates NVIDIA's in place.
    nvidia_selector_extra: tuple[tuple[str, str], ...] = ()

    @property
    def component(self) -> str:
        """The template folder."""
        return f"state-{self.name}"

    @property
    def app(self) -> str:
        """The `app` label of its pods."""
        return labels.DRIVER_APP if self.name == "driver" else self.daemonset

    @property
    def selector(self) -> dict[str, str]:
        """The DaemonSet's pod selector: NVIDIA's for the same DaemonSet (DESIGN §4)."""
        return {labels.APP: self.app, **dict(self.nvidia_selector_extra)}

    @property
    def deploy_label(self) -> str:
        return labels.deploy_label(self.name)

    @property
    def image_env(self) -> str:
        """The operator's environment variable holding its default image."""
        return images.DEFAULT_IMAGE_ENV[self.section]


DRIVER: Final = Operand("driver", "driver", "nvidia-driver-daemonset", generic=False)
CONTAINER_TOOLKIT: Final = Operand("container-toolkit", "toolkit", "nvidia-container-toolkit-daemonset")
OPERATOR_VALIDATOR: Final = Operand(
    "operator-validator",
    "validator",
    "nvidia-operator-validator",
    nvidia_selector_extra=((labels.PART_OF, "gpu-operator"),),
)
DEVICE_PLUGIN: Final = Operand("device-plugin", "devicePlugin", "nvidia-device-plugin-daemonset")
GPU_FEATURE_DISCOVERY: Final = Operand(
    "gpu-feature-discovery",
    "gfd",
    "gpu-feature-discovery",
    nvidia_selector_extra=((labels.PART_OF, "nvidia-gpu"),),
)
DCGM: Final = Operand("dcgm", "dcgm", "nvidia-dcgm")
DCGM_EXPORTER: Final = Operand("dcgm-exporter", "dcgmExporter", "nvidia-dcgm-exporter")
MIG_MANAGER: Final = Operand("mig-manager", "migManager", "nvidia-mig-manager")
NODE_STATUS_EXPORTER: Final = Operand(
    "node-status-exporter", "nodeStatusExporter", "nvidia-node-status-exporter"
)

# The driver pods' containers: the driver image's (`kubectl logs`/`exec` pick it by default)
# and the Driver Toolkit sidecar's, which builds the driver on DTK keys.
DRIVER_CONTAINER: Final = "nvidia-driver-ctr"
DTK_CONTAINER: Final = "openshift-driver-toolkit-ctr"

# Deploy order (DESIGN §4).  NB: order decides apply order only; a not-ready operand never
# stops a later one from being applied (on each node, marker files order the pods).
OPERANDS: Final = (
    DRIVER,
    CONTAINER_TOOLKIT,
    OPERATOR_VALIDATOR,
    DEVICE_PLUGIN,
    DCGM,
    DCGM_EXPORTER,
    GPU_FEATURE_DISCOVERY,
    MIG_MANAGER,
    NODE_STATUS_EXPORTER,
)
# The operands whose `nvidia.com/gpu.deploy.<name>` label every GPU node gets
# (planning/operands/node_labels.py).
# NB: not the MIG manager's: only MIG-capable GPU nodes get that one.
EVERY_GPU_NODE: Final = tuple(operand for operand in OPERANDS if operand is not MIG_MANAGER)
# The operands rendered by the generic mechanism from templates/state-<name>/.
GENERIC: Final = tuple(operand for operand in OPERANDS if operand.generic)
# The `app` label values of every operand pod (a DTK driver pod's is its DaemonSet's name: `pod_app`).
POD_APPS: Final = tuple(operand.app for operand in OPERANDS)
# A label selector that every operand pod matches, for the pod watches: NB not `app in (POD_APPS)`,
# since a DTK driver pod's app is its DaemonSet's name (NVIDIA's selector); `pod_app` sorts them.
OPERAND_POD_SELECTOR: Final = labels.APP


def pod_app(pod_labels: Mapping[str, str]) -> str:
    """The operand app of a pod's labels: DRIVER_APP for every driver pod (app.kubernetes.io/
    component=nvidia-driver, whatever its app), else its `app` label ("" without one)."""
    if pod_labels.get(labels.COMPONENT) == labels.DRIVER_COMPONENT:
        return labels.DRIVER_APP
    return str(pod_labels.get(labels.APP, ""))


def by_name(name: str) -> Operand:
    """The operand declared with this name; KeyError names the known ones."""
    for operand in OPERANDS:
        if operand.name == name:
            return operand
    raise KeyError(f"no operand {name!r}; known: {', '.join(o.name for o in OPERANDS)}")


@dataclasses.dataclass(frozen=True, slots=True)
class OperandPod:
    """One operand pod as the status needs it: whose it is, where, and whether it is Ready."""

    name: str
    # Its `app` label (Operand.app).
    app: str
    node: str
    ready: bool = False

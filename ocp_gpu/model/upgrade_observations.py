"""What the driver upgrade controller observes: node states, driver pods, workload pods, validators.

The `kube/upgrading` adapter fills these records once per pass; `planning/upgrade`
decides on them and never sees a client object.  Everything is frozen and holds only
what an upgrade decision needs (no full Node or Pod objects: memory stays flat).

Also the upgrade controller's wire strings: the state label values (seed 000), the
node annotations it keeps its memory in, the event reason and message.  NVIDIA's names
(k8s-operator-libs `pkg/upgrade/consts.go`) are reused where they exist; the few
annotations that are ours follow the same `nvidia.com/gpu-driver-upgrade` family so
`kubectl get node -o yaml | grep gpu-driver-upgrade` shows all of them.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ocp_gpu.model import driver_snapshot, labels
from ocp_gpu.model.driver_install import DriverInstall
from ocp_gpu.model.nodes import NodeFacts, NodeName
from ocp_gpu.model.resource_claims import ClaimHold

# --- the state label ---------------------------------------------------------------


class UpgradeState(enum.StrEnum):
    """The values of the node label `nvidia.com/gpu-driver-upgrade-state`, verbatim (seed 000)."""

    # The controller is off, or has not processed the node yet.
    UNKNOWN = ""
    # The driver pod is outdated; nothing is done until an upgrade slot is free.
    UPGRADE_REQUIRED = "upgrade-required"
    # The node is about to be cordoned.
    CORDON_REQUIRED = "cordon-required"
    # Waiting for the pods of waitForCompletion.podSelector to finish.
    WAIT_FOR_JOBS_REQUIRED = "wait-for-jobs-required"
    # Pods using GPUs are being deleted.
    POD_DELETION_REQUIRED = "pod-deletion-required"
    # GPU pod deletion failed and drain is enabled: the node is being drained.
    DRAIN_REQUIRED = "drain-required"
    # The outdated driver pod is deleted; waiting for its current, Ready successor.
    POD_RESTART_REQUIRED = "pod-restart-required"
    # Waiting for the validator pods on the node.
    VALIDATION_REQUIRED = "validation-required"
    # The node is made schedulable again (unless it was cordoned before the upgrade).
    UNCORDON_REQUIRED = "uncordon-required"
    # The driver pod is current.
    UPGRADE_DONE = "upgrade-done"
    # Something failed; an admin relabels `upgrade-required` to retry.
    UPGRADE_FAILED = "upgrade-failed"


def parse_state(value: str | None) -> UpgradeState:
    """The state a label value names; absent, empty or unrecognised values are UNKNOWN.

    NB: an unrecognised value (a typo by hand) is treated as "not processed yet",
    so the controller relabels the node instead of ignoring it forever.
    """
    # NB: a dict lookup, not UpgradeState(value): planning a 1,000-node pass parses about
    # 12,000 labels, and the Enum call was a quarter of its CPU.
    return _STATES_BY_VALUE.get(value or "", UpgradeState.UNKNOWN)


# Every state by its label value (parse_state's table).
_STATES_BY_VALUE: Final[Mapping[str, UpgradeState]] = {state.value: state for state in UpgradeState}


# --- node annotations: the controller's memory ---------------------------------------

# NVIDIA's: the node was unschedulable before the upgrade cordoned it, so it is never uncordoned.
INITIAL_UNSCHEDULABLE: Final = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
# Ours: this upgrade cordoned the node (set in the same patch as the cordon itself), so it
# may lift that cordon; without it a cordon is someone else's and stays.
CORDONED_BY_UPGRADE: Final = "nvidia.com/gpu-driver-upgrade.cordoned-by-upgrade"
# NVIDIA's: when the node started waiting for waitForCompletion pods (unix seconds).
WAIT_FOR_COMPLETION_START: Final = "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time"
# Ours, in NVIDIA's pattern: when GPU pod deletion started (unix seconds).
POD_DELETION_START: Final = "nvidia.com/gpu-driver-upgrade-pod-deletion-start-time"
# Ours, in NVIDIA's pattern: when the drain started (unix seconds).
DRAIN_START: Final = "nvidia.com/gpu-driver-upgrade-drain-start-time"
# NVIDIA's: when validation started (unix seconds).
VALIDATION_START: Final = "nvidia.com/gpu-driver-upgrade-validation-start-time"
# Ours, in NVIDIA's pattern: when the node started waiting for a current, Ready driver pod.
POD_RESTART_START: Final = "nvidia.com/gpu-driver-upgrade-pod-restart-start-time"
# Every start-time annotation; the transition table says which state uses which.
TIMER_ANNOTATIONS: Final = (
    WAIT_FOR_COMPLETION_START,
    POD_DELETION_START,
    DRAIN_START,
    POD_RESTART_START,
    VALIDATION_START,
)

# --- other wire strings ---------------------------------------------------------------

# The DaemonSet controller's pod label naming the ControllerRevision a pod was made from.
POD_REVISION_LABEL: Final = "controller-revision-hash"
# The validator pods that gate validation-required (NVIDIA's operator-validator).
VALIDATOR_SELECTOR: Final = f"{labels.APP}={labels.VALIDATOR_APP}"
# The driver pods of the ClusterPolicy's own driver DaemonSets: NB not `app=nvidia-driver-daemonset`,
# which a DTK driver pod lacks (its app is its DaemonSet's name, as NVIDIA's selector needs), nor an
# NVIDIADriver pool's (labelled with its NVIDIADriver).
DRIVER_APP_SELECTOR: Final = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT},!{labels.NVIDIA_DRIVER}"
# The driver pods of NVIDIADriver pools: NVIDIA's upgrade controller selects them on the component.
DRIVER_COMPONENT_SELECTOR: Final = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
# The driver pod labels a selector above reads: all a DriverPod keeps of its labels.
DRIVER_SELECTOR_KEYS: Final = (labels.APP, labels.COMPONENT, labels.NVIDIA_DRIVER)
# NVIDIA appends this to every drain selector so pods can opt out of drains (the operator's own).
DRAIN_SKIP_SELECTOR: Final = "nvidia.com/gpu-driver-upgrade-drain.skip!=true"
# Extended resources that mean "this pod uses a GPU": nvidia.com/gpu*, nvidia.com/mig-*.
GPU_RESOURCE_PREFIXES: Final = ("nvidia.com/gpu", "nvidia.com/mig-")
# What every resource the sandbox device plugin (kubevirt-gpu-device-plugin) advertises starts with.
VM_GPU_RESOURCE_PREFIX: Final = "nvidia.com/"
# The Event reason of every state change (seed 000).
EVENT_REASON: Final = "GPUDriverUpgrade"
# The value of the skip label that skips a node.
SKIP_VALUE: Final = "true"


def event_message(state: UpgradeState) -> str:
    """The Event message of a state change, exactly as seed 000 shows it."""
    return f"Successfully updated node state label to [{state.value}]"


def is_gpu_resource(name: str) -> bool:
    """A resource name that allocates an NVIDIA GPU or MIG slice."""
    return name.startswith(GPU_RESOURCE_PREFIXES)


def is_vm_gpu_resource(name: str) -> bool:
    """A resource name that allocates a VM's GPU: any other `nvidia.com/` resource, since on a VM node
    only the sandbox device plugin advertises them (a passthrough model such as
    `nvidia.com/GA102GL_A10`, or a vGPU type)."""
    return name.startswith(VM_GPU_RESOURCE_PREFIX) and not is_gpu_resource(name)


def format_timestamp(moment: datetime.datetime) -> str:
    """A start-time annotation value: unix seconds, as NVIDIA writes them."""
    return str(int(moment.timestamp()))


def parse_timestamp(value: str | None) -> datetime.datetime | None:
    """The moment a start-time annotation names; None when absent or not a number."""
    if not value:
        return None
    try:
        return datetime.datetime.fromtimestamp(int(value.strip()), datetime.UTC)
    except (ValueError, OverflowError, OSError):
        return None


# --- the records ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class PodRef:
    """Enough to delete or evict one pod, and not its same-named successor (uid precondition)."""

    namespace: str
    name: str
    uid: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, kw_only=True, slots=True)
class DriverPod:
    """A driver pod (`app.kubernetes.io/component=nvidia-driver`) on one node."""

    ref: PodRef
    node: NodeName
    # The DaemonSet that controls the pod; None for an orphan.
    daemonset: str | None
    # Its `controller-revision-hash` label; None when missing.
    revision_hash: str | None
    # Running with every container ready.
    ready: bool = False
    # A deletionTimestamp is set: the pod is going away.
    terminating: bool = False
    # The highest restart count among containers (init included) that are not ready.
    restart_count: int = 0
    # Why a container waits (CrashLoopBackOff, ImagePullBackOff, ...); "" when none does.
    waiting_reason: str = ""
    # Its DRIVER_SELECTOR_KEYS labels, sorted (key, value) pairs: which driver selector picks it.
    selector_labels: tuple[tuple[str, str], ...] = ()
    # What it installs (planning/driver_currency; shared between pods alike); None: unknown.
    install: DriverInstall | None = None


@dataclass(frozen=True, kw_only=True)
class DriverRevision:
    """A driver DaemonSet as the upgrade sees it: its current revision and whether it is whole."""

    daemonset: str
    # The hash of its newest ControllerRevision (highest `.revision`); None when none was found.
    current_hash: str | None
    # Nodes it should run on but has no pod on (desired - current scheduled); 0 when whole.
    unscheduled: int = 0
    # What its current template installs: a pod of an older template installing the same is current.
    install: DriverInstall | None = None


@dataclass(frozen=True, kw_only=True)
class UpgradeNode:
    """A GPU node, reduced to what its upgrade state depends on."""

    name: NodeName
    # The raw value of the state label ("" when absent), as found.
    state_label: str = ""
    unschedulable: bool = False
    # The node's Ready condition; NotReady nodes count as unavailable.
    ready: bool = True
    # `nvidia.com/gpu-driver-upgrade.skip=true`.
    skip: bool = False
    # `nvidia.com/gpu-driver-upgrade-enabled=true` is set.
    upgrade_enabled: bool = False
    # INITIAL_UNSCHEDULABLE is set: the admin's cordon, never lifted.
    initially_unschedulable: bool = False
    # CORDONED_BY_UPGRADE is set: the cordon is the upgrade's own.
    cordoned_by_upgrade: bool = False
    # The parsed start-time annotations present (keys from TIMER_ANNOTATIONS).
    timers: Mapping[str, datetime.datetime] = field(default_factory=dict)
    # The driver pods on the node: normally one; during a hand-over also a terminating one.
    driver_pods: tuple[DriverPod, ...] = ()
    # The admin opted the node out of the driver (`nvidia.com/gpu.deploy.driver=false`, or
    # `nvidia.com/gpu.deploy.operands=false`): no driver DaemonSet selects it.
    driver_opted_out: bool = False
    # The NVIDIADriver pool that owns the node (`nvidia.com/gpu-operator.driver.owner`; "" none):
    # its upgradePolicy rules the node (planning/upgrades/pool_upgrades.py).
    pool: str = ""
    # `state_label` parsed once (planning reads a node's state about a dozen times a pass).
    _state: UpgradeState = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_state", parse_state(self.state_label))

    @property
    def state(self) -> UpgradeState:
        return self._state

    @property
    def driver_pod(self) -> DriverPod | None:
        """The pod that counts: a live one before a terminating one, then by name (stable)."""
        if not self.driver_pods:
            return None
        return min(self.driver_pods, key=lambda pod: (pod.terminating, pod.ref.name))


@dataclass(frozen=True, kw_only=True)
class WorkloadPod:
    """A pod on a node being upgraded, reduced to what wait, deletion and drain look at."""

    ref: PodRef
    node: NodeName
    labels: Mapping[str, str] = field(default_factory=dict)
    # Pending, Running, Succeeded, Failed, Unknown.
    phase: str = "Running"
    # A container requests or limits nvidia.com/gpu* or nvidia.com/mig-*.
    requests_gpu: bool = False
    # A container requests or limits a VM's GPU (is_vm_gpu_resource: KubeVirt's virt-launcher of a
    # VM with a passed-through GPU or a vGPU).
    requests_vm_gpu: bool = False
    # The names of the ResourceClaims it holds, in its own namespace (spec.resourceClaims, or
    # for a claim made from a template the name status.resourceClaimStatuses gives); a claim
    # not created yet is left out (nothing can be allocated to it).
    claims: tuple[str, ...] = ()
    # The kind of the controlling ownerReference (ReplicaSet, Job, DaemonSet, ...); None without one.
    controller_kind: str | None = None
    # The pod has an emptyDir volume (its data is lost on deletion).
    uses_empty_dir: bool = False
    terminating: bool = False
    # A static pod's API mirror: deleting or evicting it does nothing.
    mirror: bool = False

    @property
    def has_controller(self) -> bool:
        return self.controller_kind is not None

    @property
    def active(self) -> bool:
        """Pending or Running: it holds (or will hold) its resources."""
        return self.phase in ("Pending", "Running")


@dataclass(frozen=True, kw_only=True, slots=True)
class ValidatorPod:
    """A validator pod (`app=nvidia-operator-validator`) on one node."""

    ref: PodRef
    node: NodeName
    ready: bool = False


@dataclass(frozen=True, kw_only=True)
class UpgradeSnapshot:
    """Everything one upgrade pass decides on, read once.

    `pods` holds the pods of only the nodes `planning.upgrades.upgrade_plan.nodes_needing_pods`
    names (those waiting for jobs, deleting GPU pods or draining); a node missing
    from it was not read, and that node alone waits.
    """

    nodes: tuple[UpgradeNode, ...]
    # Driver DaemonSets by name.
    daemonsets: Mapping[str, DriverRevision] = field(default_factory=dict)
    pods: Mapping[NodeName, tuple[WorkloadPod, ...]] = field(default_factory=dict)
    # The validator component is deployed (its DaemonSet exists); otherwise validation is skipped.
    validator_deployed: bool = False
    # Validator pods by node (nodes without any are absent).
    validator_pods: Mapping[NodeName, tuple[ValidatorPod, ...]] = field(default_factory=dict)
    # What each ResourceClaim holds, by resource_claims.claim_key; None when the claims are not
    # known (the API does not serve resource.k8s.io/v1): then every claim of a pod counts as a GPU.
    claims: Mapping[str, ClaimHold] | None = None


def upgrade_node(facts: NodeFacts, driver_pods: tuple[DriverPod, ...] = ()) -> UpgradeNode:
    """The UpgradeNode of a node as the watch keeps it (NodeFacts), with its driver pods."""
    annotations = facts.annotations
    timers = {
        key: moment
        for key in TIMER_ANNOTATIONS
        if (moment := parse_timestamp(annotations.get(key))) is not None
    }
    return UpgradeNode(
        name=facts.name,
        state_label=facts.labels.get(labels.UPGRADE_STATE, ""),
        unschedulable=facts.unschedulable,
        ready=facts.ready,
        skip=facts.labels.get(labels.UPGRADE_SKIP) == SKIP_VALUE,
        upgrade_enabled=annotations.get(labels.UPGRADE_ENABLED_ANNOTATION) == "true",
        # NB: NVIDIA tests presence, not value.
        initially_unschedulable=INITIAL_UNSCHEDULABLE in annotations,
        cordoned_by_upgrade=CORDONED_BY_UPGRADE in annotations,
        timers=timers,
        driver_pods=driver_pods,
        driver_opted_out=facts.labels.get(labels.deploy_label("driver")) == "false"
        or facts.labels.get(labels.GPU_DEPLOY_OPERANDS) == "false"
        or labels.runs_vm_stack(facts.labels),
        pool=facts.labels.get(labels.NVIDIA_DRIVER_OWNER, ""),
    )


# --- the upgrade snapshot, from the watches' view or from LISTs: one builder ------------------------


def driver_revision(daemonset: driver_snapshot.DriverDaemonSet, current_hash: str | None) -> DriverRevision:
    """The DriverRevision of a driver DaemonSet and its current revision hash.

    NB: the one "unscheduled" rule: nodes the DaemonSet wants but has no pod on, counted only
    once its controller has seen the latest spec (before that the counters describe the old one).
    """
    missing = daemonset.desired_number_scheduled - daemonset.current_number_scheduled
    return DriverRevision(
        daemonset=daemonset.name,
        current_hash=current_hash,
        unscheduled=max(0, missing) if daemonset.status_is_current else 0,
        install=daemonset.install,
    )


def upgrade_nodes(
    node_facts: Iterable[NodeFacts], driver_pods: Iterable[DriverPod]
) -> tuple[UpgradeNode, ...]:
    """Every GPU node as the upgrade sees it, each with the driver pods bound to it."""
    by_node: dict[str, list[DriverPod]] = {}
    for pod in driver_pods:
        by_node.setdefault(pod.node, []).append(pod)
    return tuple(
        upgrade_node(facts, tuple(by_node.get(facts.name, ()))) for facts in node_facts if facts.is_gpu_node
    )


def upgrade_snapshot(
    nodes: tuple[UpgradeNode, ...],
    daemonsets: Iterable[driver_snapshot.DriverDaemonSet],
    revision_hashes: Mapping[str, str],
    pods: Mapping[NodeName, tuple[WorkloadPod, ...]],
    validator_pods: Iterable[ValidatorPod],
    validator_deployed: bool,
    claims: Mapping[str, ClaimHold] | None = None,
) -> UpgradeSnapshot:
    """The snapshot one upgrade pass plans on (the watches' view and `ocp-gpu status` both build it here)."""
    by_node: dict[NodeName, list[ValidatorPod]] = {}
    for validator in validator_pods:
        by_node.setdefault(validator.node, []).append(validator)
    return UpgradeSnapshot(
        nodes=nodes,
        daemonsets={ds.name: driver_revision(ds, revision_hashes.get(ds.name)) for ds in daemonsets},
        pods=pods,
        validator_deployed=validator_deployed,
        validator_pods={name: tuple(group) for name, group in by_node.items()},
        claims=claims,
    )

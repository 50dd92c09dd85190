"""Which pods an upgrade waits for, deletes or drains, and the label selectors that pick them.

The pure half of apimachinery's labels.Selector (`selector_matches`), the drain selector with
NVIDIA's opt-out, which pods hold a GPU (by an `nvidia.com/gpu*` resource or through a
ResourceClaim of NVIDIA's DRA driver, as NVIDIA's pod-deletion filter decides), and why
gpuPodDeletion or a drain may not touch a pod.  Never lists or deletes pods: the reconciler
does, from the upgrade plan.

NB: as in NVIDIA's upgrade library, only gpuPodDeletion asks whether a pod holds a GPU;
waitForCompletion and drain pick pods by their selectors, so a claim-holding pod is waited
for or evicted exactly when its labels match, like any other.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from ocp_gpu.model import resource_claims, upgrade_observations
from ocp_gpu.model.policy import selectors
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.model.upgrade_observations import WorkloadPod

# --- label selectors (the pure half of apimachinery's labels.Selector) --------------------


def _requirement_matches(requirement: selectors.SelectorRequirement, pod_labels: Mapping[str, str]) -> bool:
    value = pod_labels.get(requirement.key)
    operator = requirement.operator
    if operator == "exists":
        return value is not None
    if operator == "!":
        return value is None
    if operator in ("=", "in"):
        return value is not None and value in requirement.values
    if operator in ("!=", "notin"):
        # NB: as in Kubernetes, a pod without the label matches `key!=v`.
        return value is None or value not in requirement.values
    # ">" and "<": the label must hold an integer.
    if value is None or not value.lstrip("-").isdigit():
        return False
    bound = int(requirement.values[0])
    return int(value) > bound if operator == ">" else int(value) < bound


@functools.lru_cache(maxsize=64)
def _parsed(selector: str) -> tuple[selectors.SelectorRequirement, ...]:
    # NB: the few selectors in use (the driver pods', a drain's) are asked about on every pod
    # event: parsed once each (frozen requirements; a selector that does not parse raises,
    # and is not cached).
    return selectors.parse_label_selector(selector)


def selector_matches(selector: str, pod_labels: Mapping[str, str]) -> bool:
    """Whether labels match a selector in kubectl `-l` syntax; raises ValueError if it does not parse."""
    return all(_requirement_matches(r, pod_labels) for r in _parsed(selector))


def driver_pod_selector(nvidia_driver_mode: bool) -> str:
    """The label selector of the driver pods (and DaemonSets) the driver upgrade manages.

    With `driver.useNvidiaDriverCRD` the NVIDIADriver pools' pods, selected as NVIDIA's upgrade
    controller does, on app.kubernetes.io/component=nvidia-driver; otherwise the ClusterPolicy's,
    on the same label without a pool's (a DTK driver pod's app is its DaemonSet's name).
    """
    return (
        upgrade_observations.DRIVER_COMPONENT_SELECTOR
        if nvidia_driver_mode
        else upgrade_observations.DRIVER_APP_SELECTOR
    )


def selector_labels(pod_labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The labels either driver selector reads, as sorted pairs (what a DriverPod keeps)."""
    return tuple(
        sorted((k, v) for k, v in pod_labels.items() if k in upgrade_observations.DRIVER_SELECTOR_KEYS)
    )


def is_driver_pod(pod_labels: Mapping[str, str], nvidia_driver_mode: bool) -> bool:
    """Whether the driver upgrade in this mode manages a pod with these labels."""
    return selector_matches(driver_pod_selector(nvidia_driver_mode), pod_labels)


def is_any_driver_pod(pod_labels: Mapping[str, str]) -> bool:
    """A driver pod in either mode: what the pod watch keeps, so a mode switch needs no re-list."""
    return is_driver_pod(pod_labels, True) or is_driver_pod(pod_labels, False)


def drain_selector(policy: UpgradePolicy) -> str:
    """drain.podSelector with NVIDIA's opt-out appended (pods labelled drain.skip=true stay)."""
    own = policy.drain.pod_selector.strip()
    return (
        f"{own},{upgrade_observations.DRAIN_SKIP_SELECTOR}"
        if own
        else upgrade_observations.DRAIN_SKIP_SELECTOR
    )


# --- which pods wait, deletion and drain touch ----------------------------------------------


def holds_gpu_claim(
    pod: WorkloadPod, claims: Mapping[str, ClaimHold] | None, *, admin_access: bool = False
) -> bool:
    """Whether one of the pod's ResourceClaims holds a device of NVIDIA's DRA driver.

    `claims`: what each claim holds, by resource_claims.claim_key; None when unknown.
    `admin_access`: devices allocated with adminAccess count too (NVIDIA's includeAdminAccess:
    for the DRA kubelet plugin's teardown order, not for pod deletion).
    """
    for name in pod.claims:
        hold = claims.get(resource_claims.claim_key(pod.ref.namespace, name)) if claims is not None else None
        if hold is None:
            # A claim we cannot read counts as a GPU, as in NVIDIA's PodHasNVIDIAGPUClaim: waiting
            # for (or deleting) one pod too many is recoverable, a driver restarted under a
            # running GPU job is not.
            return True
        if hold is ClaimHold.GPU or (admin_access and hold is ClaimHold.GPU_ADMIN_ACCESS):
            return True
    return False


def uses_gpu(pod: WorkloadPod, claims: Mapping[str, ClaimHold] | None) -> bool:
    """Whether a pod holds a GPU: an nvidia.com/gpu* or mig-* resource, or a gpu.nvidia.com claim."""
    # NB: the resources first: most GPU pods ask for nvidia.com/gpu and no claim is looked up.
    return pod.requests_gpu or holds_gpu_claim(pod, claims)


def gpu_pods(pods: Iterable[WorkloadPod], claims: Mapping[str, ClaimHold] | None) -> tuple[WorkloadPod, ...]:
    """Pending or Running pods that use a GPU: what gpuPodDeletion must remove."""
    return tuple(pod for pod in pods if pod.active and uses_gpu(pod, claims))


def why_not_deletable(pod: WorkloadPod, policy: UpgradePolicy) -> str | None:
    """Why gpuPodDeletion may not delete this GPU pod, or None if it may."""
    deletion = policy.gpu_pod_deletion
    if pod.controller_kind == "DaemonSet" or pod.mirror:
        # Its controller would put it straight back (DaemonSet pods tolerate cordons), as kubectl drain says.
        return "is a DaemonSet or static pod"
    if not pod.has_controller and not deletion.force:
        return "has no controller and gpuPodDeletion.force is false"
    if pod.uses_empty_dir and not deletion.delete_empty_dir:
        return "uses an emptyDir and gpuPodDeletion.deleteEmptyDir is false"
    return None


def drain_pods(pods: Iterable[WorkloadPod], policy: UpgradePolicy) -> tuple[WorkloadPod, ...]:
    """The pods a drain evicts: those matching the drain selector, except DaemonSet and static pods.

    Raises ValueError when drain.podSelector does not parse.
    """
    selector = drain_selector(policy)
    return tuple(
        pod
        for pod in pods
        if pod.controller_kind != "DaemonSet" and not pod.mirror and selector_matches(selector, pod.labels)
    )


def why_not_drainable(pod: WorkloadPod, policy: UpgradePolicy) -> str | None:
    """Why a drain may not evict this pod, or None if it may (finished pods always may, as in kubectl)."""
    drain = policy.drain
    if not pod.active:
        return None
    if not pod.has_controller and not drain.force:
        return "has no controller and drain.force is false"
    if pod.uses_empty_dir and not drain.delete_empty_dir:
        return "uses an emptyDir and drain.deleteEmptyDir is false"
    return None

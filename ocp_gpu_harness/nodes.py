"""Fake nodes for the local control plane, an MCO-style OS update, and pod fates.

Builders (`gpu_node`, `vanilla_gpu_node`, `cpu_node`) return plain Node manifests with
the labels Node Feature Discovery would have written and the status a kubelet would
report; kwok (see `cluster`) then keeps them Ready. The other functions talk to the
API server.

NB: a Node is the one built-in kind whose status the apiserver keeps on create (a
kubelet registers that way), so a node is created with its capacity and nodeInfo in
one request; kwok's node-initialize stage keeps what is set and fills in the rest.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import kubernetes.client
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from ocp_gpu.model import labels
from ocp_gpu_harness import stages

DEFAULT_RHCOS: Final = "416.94.202407030122-0"
DEFAULT_RHCOS_KERNEL: Final = "5.14.0-427.22.1.el9_4.x86_64"
DEFAULT_UBUNTU_KERNEL: Final = "5.15.0-105-generic"

# kwokctl's convention for "this node is fake"; harmless with --manage-all-nodes.
KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
# Not NFD's: OpenShift's kubelet labels every node with its OS.
OPENSHIFT_OS_ID: Final = "node.openshift.io/os_id"
WORKER_ROLE: Final = "node-role.kubernetes.io/worker"
GPU_RESOURCE: Final = "nvidia.com/gpu"
# SIMULATION (harness/node_agent.py): node annotation with the number of physical GPUs; on such a
# node the agent, not the builder, sets nvidia.com/* resources (when the device plugin is Ready).
SIMULATED_GPUS: Final = "ocp-gpu.harness/gpus"
# SIMULATION: node annotation with the GPU model GFD would report (nvidia.com/gpu.product); without
# it the agent simulates an L40S, which MIG cannot partition (so no MIG manager runs there).
SIMULATED_PRODUCT: Final = "ocp-gpu.harness/gpu-product"

# The Machine Config Daemon's node annotations, which tools watch during an update.
MCO_STATE: Final = "machineconfiguration.openshift.io/state"
MCO_CURRENT_CONFIG: Final = "machineconfiguration.openshift.io/currentConfig"
MCO_DESIRED_CONFIG: Final = "machineconfiguration.openshift.io/desiredConfig"

# The phases `simulate_mco_update` reports through ``on_step``, in order.
PHASE_CORDON: Final = "cordon"
PHASE_DRAIN: Final = "drain"
PHASE_UPDATE: Final = "update"  # the reboot into the new RHCOS
PHASE_UNCORDON: Final = "uncordon"
PHASE_DONE: Final = "done"

# A pod's owner kind that drains leave alone (`oc adm drain --ignore-daemonsets`).
_DAEMONSET: Final = "DaemonSet"
# Static pods' API mirrors: evicting them does nothing, drains skip them.
_MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"


class DrainError(RuntimeError):
    """A drain did not finish in time (e.g. a PodDisruptionBudget kept refusing)."""


# --- what an OS version implies ------------------------------------------------------------

_RHCOS_LEGACY = re.compile(r"^4(\d+)\.(\d)(\d+)\.")  # 416.94.202407030122-0: OCP 4.16 on RHEL 9.4
_RHCOS_RHEL = re.compile(r"^(\d+)\.(\d+)\.\d{8}")  # 9.6.20250909-0 (OCP >= 4.19): RHEL 9.6


def rhel_version(rhcos: str) -> str | None:
    """The RHEL release an RHCOS build is based on ("416.94..." -> "9.4")."""
    if m := _RHCOS_LEGACY.match(rhcos):
        return f"{m.group(2)}.{m.group(3)}"
    if m := _RHCOS_RHEL.match(rhcos):
        return f"{m.group(1)}.{m.group(2)}"
    return None


def openshift_version(rhcos: str) -> str | None:
    """The OpenShift minor an old-style RHCOS build belongs to ("416.94..." -> "4.16");
    None for the RHEL-numbered builds of OCP >= 4.19, which do not encode it."""
    m = _RHCOS_LEGACY.match(rhcos)
    return f"4.{m.group(1)}" if m else None


def _os_image(os_id: str, os_version: str, rhcos: str | None) -> str:
    if os_id == "rhcos":
        return f"Red Hat Enterprise Linux CoreOS {rhcos} (Plow)"
    if os_id == "ubuntu":
        return {
            "22.04": "Ubuntu 22.04.4 LTS",
            "24.04": "Ubuntu 24.04.1 LTS",
            "20.04": "Ubuntu 20.04.6 LTS",
        }.get(os_version, f"Ubuntu {os_version} LTS")
    if os_id == "rhel":
        return f"Red Hat Enterprise Linux {os_version} (Plow)"
    return f"{os_id} {os_version}"


def _nfd_os(os_id: str, os_version: str, rhcos: str | None) -> tuple[str, str]:
    """The os-release ID and VERSION_ID NFD reports: RHCOS builds of the RHEL-numbered scheme
    (OCP >= 4.19: `9.6.<date>-0`, RHCOS 10's `10.1.<date>-0`) say ID=rhel, VERSION_ID=<RHEL>,
    the older ones (`416.94.<date>-0`) ID=rhcos, VERSION_ID=<OpenShift>."""
    if os_id == "rhcos" and rhcos and openshift_version(rhcos) is None and (rhel := rhel_version(rhcos)):
        return "rhel", rhel
    return os_id, os_version


def _os_labels(os_id: str, os_version: str, rhcos: str | None, kernel: str) -> dict[str, str]:
    """The NFD system-os_release and kernel labels for this OS."""
    rhcos_node = os_id == "rhcos"
    os_id, os_version = _nfd_os(os_id, os_version, rhcos)
    result = {
        labels.OS_ID: os_id,
        labels.OS_VERSION_ID: os_version,
        f"{labels.OS_VERSION_ID}.major": os_version.split(".")[0],
        labels.KERNEL_VERSION_FULL: kernel,
    }
    if "." in os_version:
        result[f"{labels.OS_VERSION_ID}.minor"] = os_version.split(".")[1]
    if rhcos_node and rhcos:
        result[labels.OSTREE_VERSION] = rhcos
        if os_id == "rhcos":
            # the old scheme's VERSION_ID is the OpenShift release (a RHEL-numbered build's is RHEL's)
            result[labels.OS_OPENSHIFT_VERSION] = os_version
        if rhel := rhel_version(rhcos):
            result[labels.OS_RHEL_VERSION] = rhel
        result[OPENSHIFT_OS_ID] = "rhcos"
    return result


# --- builders --------------------------------------------------------------------------------


def gpu_node(
    name: str,
    rhcos: str | None = DEFAULT_RHCOS,
    unschedulable: bool = False,
    gpus: int = 1,
    os_id: str = "rhcos",
    os_version: str = "4.16",
    kernel: str = DEFAULT_RHCOS_KERNEL,
    extra_labels: Mapping[str, str] | None = None,
    simulated: bool = False,
    product: str | None = None,
) -> dict[str, Any]:
    """A worker with ``gpus`` NVIDIA GPUs, labelled as NFD labels it.

    With ``gpus=0`` it is still a GPU node to NFD (the PCI device is there) but
    advertises no ``nvidia.com/gpu``, like a node whose device plugin is not up yet.
    ``simulated``: the node starts without ``nvidia.com/gpu``; the node agent
    simulation advertises its GPUs once a device plugin pod is Ready on it.
    ``product``: the GPU model the simulated GFD reports (e.g. NVIDIA-A100-SXM4-80GB, which
    MIG can partition).
    """
    node = _node(name, unschedulable, os_id, os_version, rhcos, kernel, extra_labels)
    node["metadata"]["labels"][labels.NFD_NVIDIA_PCI] = "true"
    if product:
        node["metadata"]["annotations"][SIMULATED_PRODUCT] = product
    if simulated:
        node["metadata"]["annotations"][SIMULATED_GPUS] = str(gpus)
        return node
    for key in ("capacity", "allocatable"):
        node["status"][key][GPU_RESOURCE] = str(gpus)
    return node


def vanilla_gpu_node(
    name: str,
    os_id: str = "ubuntu",
    os_version: str = "22.04",
    kernel: str = DEFAULT_UBUNTU_KERNEL,
    unschedulable: bool = False,
    gpus: int = 1,
    extra_labels: Mapping[str, str] | None = None,
    simulated: bool = False,
    product: str | None = None,
) -> dict[str, Any]:
    """A GPU node of a non-OpenShift cluster (no OSTREE_VERSION)."""
    return gpu_node(
        name,
        rhcos=None,
        unschedulable=unschedulable,
        gpus=gpus,
        os_id=os_id,
        os_version=os_version,
        kernel=kernel,
        extra_labels=extra_labels,
        simulated=simulated,
        product=product,
    )


def cpu_node(
    name: str,
    rhcos: str | None = DEFAULT_RHCOS,
    unschedulable: bool = False,
    os_id: str = "rhcos",
    os_version: str = "4.16",
    kernel: str = DEFAULT_RHCOS_KERNEL,
    extra_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A worker without GPUs: NFD's OS labels but no pci-10de label."""
    return _node(name, unschedulable, os_id, os_version, rhcos, kernel, extra_labels)


def _node(
    name: str,
    unschedulable: bool,
    os_id: str,
    os_version: str,
    rhcos: str | None,
    kernel: str,
    extra_labels: Mapping[str, str] | None,
) -> dict[str, Any]:
    if os_id == "rhcos" and not rhcos:
        raise ValueError("an RHCOS node needs an rhcos (OSTREE_VERSION) build")
    openshift = os_id == "rhcos"
    node_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        WORKER_ROLE: "",
        **_os_labels(os_id, os_version, rhcos if openshift else None, kernel),
        **(extra_labels or {}),
    }
    resources = {"cpu": "16", "memory": "64Gi", "pods": "250", "ephemeral-storage": "200Gi"}
    # A kubelet version of the node's OpenShift release (4.16 ships Kubernetes 1.29).
    kubelet = f"v1.{int(os_version.split('.')[1]) + 13}.6" if openshift and "." in os_version else "v1.29.6"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": node_labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
        },
        "spec": {"unschedulable": unschedulable},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": _os_image(os_id, os_version, rhcos),
                "kernelVersion": kernel,
                "kubeletVersion": kubelet,
                "kubeProxyVersion": "",
                "containerRuntimeVersion": "cri-o://1.29.6" if openshift else "containerd://1.7.18",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
        },
    }


# --- creating and deleting -----------------------------------------------------------------


def create_nodes(
    api_client: ApiClient,
    nodes: Iterable[Mapping[str, Any]],
    *,
    wait_ready: bool = True,
    timeout: float = 120.0,
    workers: int = 16,
) -> None:
    """Create the nodes concurrently; by default wait until kwok made each Ready."""
    core = kubernetes.client.CoreV1Api(api_client)
    nodes = list(nodes)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # list(): surface the first exception here, not silently in a future.
        list(pool.map(core.create_node, nodes))
    if wait_ready:
        wait_nodes_ready(api_client, [n["metadata"]["name"] for n in nodes], timeout=timeout)


# Taints the node-lifecycle controller puts on a node that is not Ready (yet).
_NOT_READY_TAINTS: Final = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


def _is_ready(node: Any) -> bool:
    """Ready, and the node-lifecycle controller has caught up.

    NB: a new node gets a not-ready NoSchedule taint until the controller sees the
    Ready condition; until then the scheduler skips it (DaemonSet pods tolerate it)."""
    ready = any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
    return ready and not any(t.key in _NOT_READY_TAINTS for t in (node.spec.taints or []))


def wait_nodes_ready(api_client: ApiClient, names: Iterable[str], *, timeout: float = 120.0) -> None:
    """Wait until every named node reports Ready=True and carries no not-ready taint."""
    core = kubernetes.client.CoreV1Api(api_client)
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending:
        # One list, not one get per node: cheap for hundreds of nodes.
        ready = {n.metadata.name for n in core.list_node().items if _is_ready(n)}
        pending -= ready
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes not Ready after {timeout:.0f}s: {sorted(pending)[:10]}")
        time.sleep(0.2)


def delete_nodes(
    api_client: ApiClient,
    names: Iterable[str],
    *,
    wait: bool = True,
    timeout: float = 60.0,
    workers: int = 16,
) -> None:
    """Delete the named nodes (missing ones are fine); by default wait until gone.

    Their pods are deleted by the pod garbage collector (in kube-controller-manager),
    not here, as in a real cluster."""
    core = kubernetes.client.CoreV1Api(api_client)
    names = list(names)

    def delete(name: str) -> None:
        try:
            core.delete_node(name)
        except ApiException as e:
            if e.status != 404:
                raise

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(delete, names))
    if not wait:
        return
    deadline = time.monotonic() + timeout
    while {n.metadata.name for n in core.list_node().items} & set(names):
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes still present after {timeout:.0f}s")
        time.sleep(0.2)


# --- the Machine Config Operator's way of updating a pool -------------------------------------


def cordon(api_client: ApiClient, name: str, unschedulable: bool = True) -> None:
    """Mark the node (un)schedulable, as ``oc adm cordon``/``uncordon`` does."""
    kubernetes.client.CoreV1Api(api_client).patch_node(name, {"spec": {"unschedulable": unschedulable}})


def _drainable(pod: Any) -> bool:
    """What ``oc adm drain --ignore-daemonsets --force --delete-emptydir-data`` evicts
    (the MCO drains with those settings): everything but DaemonSet and mirror pods."""
    if any(ref.kind == _DAEMONSET and ref.controller for ref in (pod.metadata.owner_references or [])):
        return False
    return _MIRROR_ANNOTATION not in (pod.metadata.annotations or {})


def drain(api_client: ApiClient, name: str, *, timeout: float = 120.0, retry_interval: float = 1.0) -> None:
    """Evict every drainable pod of the node through the eviction API, then wait until
    they are gone.

    An eviction a PodDisruptionBudget refuses (HTTP 429) is retried every
    ``retry_interval`` until ``timeout``, never forced: a drain that cannot finish
    raises `DrainError`, as ``oc adm drain --timeout`` fails.
    """
    core = kubernetes.client.CoreV1Api(api_client)
    deadline = time.monotonic() + timeout
    pods = [
        p
        for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
        if _drainable(p)
    ]
    waiting = {(p.metadata.namespace, p.metadata.name): p.metadata.uid for p in pods}
    to_evict = dict(waiting)
    while to_evict:
        for (ns, pod_name), uid in list(to_evict.items()):
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": pod_name, "namespace": ns},
                # NB: without the UID precondition a pod recreated under the same name
                # (StatefulSet) would be evicted in its predecessor's place.
                "deleteOptions": {"preconditions": {"uid": uid}},
            }
            try:
                core.create_namespaced_pod_eviction(pod_name, ns, body)
                del to_evict[(ns, pod_name)]
            except ApiException as e:
                if e.status in (404, 409):  # gone already, or a newer pod took the name
                    del to_evict[(ns, pod_name)]
                    waiting.pop((ns, pod_name), None)
                elif e.status != 429:  # 429: a PodDisruptionBudget says not now
                    raise
        if to_evict:
            if time.monotonic() > deadline:
                raise DrainError(
                    f"drain of {name} timed out after {timeout:.0f}s: eviction refused for "
                    f"{sorted(f'{ns}/{n}' for ns, n in to_evict)} (PodDisruptionBudget?)"
                )
            time.sleep(retry_interval)
    # Eviction sets a deletionTimestamp; kwok's pod-delete stage then removes the pod.
    while waiting:
        for (ns, pod_name), uid in list(waiting.items()):
            try:
                if core.read_namespaced_pod(pod_name, ns).metadata.uid != uid:
                    del waiting[(ns, pod_name)]
            except ApiException as e:
                if e.status != 404:
                    raise
                del waiting[(ns, pod_name)]
        if waiting:
            if time.monotonic() > deadline:
                raise DrainError(
                    f"evicted pods of {name} still present after {timeout:.0f}s: {sorted(waiting)}"
                )
            time.sleep(0.1)


def _rendered_config(rhcos: str) -> str:
    return "rendered-worker-" + hashlib.sha256(rhcos.encode()).hexdigest()[:32]


def _update_os(api_client: ApiClient, name: str, new_rhcos: str, new_kernel: str | None) -> None:
    """What the node looks like after rebooting into ``new_rhcos``: NFD relabels it and
    the kubelet reports the new osImage."""
    core = kubernetes.client.CoreV1Api(api_client)
    new_labels = {labels.OSTREE_VERSION: new_rhcos}
    if ocp := openshift_version(new_rhcos):
        new_labels[labels.OS_ID] = "rhcos"
        new_labels[labels.OS_VERSION_ID] = ocp
        new_labels[labels.OS_OPENSHIFT_VERSION] = ocp
        new_labels[f"{labels.OS_VERSION_ID}.major"] = ocp.split(".")[0]
        new_labels[f"{labels.OS_VERSION_ID}.minor"] = ocp.split(".")[1]
    elif rhel := rhel_version(new_rhcos):
        # a RHEL-numbered build (OCP >= 4.19, RHCOS 9.6 or 10.1): os-release says ID=rhel
        new_labels[labels.OS_ID] = "rhel"
        new_labels[labels.OS_VERSION_ID] = rhel
        new_labels[f"{labels.OS_VERSION_ID}.major"] = rhel.split(".")[0]
        new_labels[f"{labels.OS_VERSION_ID}.minor"] = rhel.split(".")[1]
    if rhel := rhel_version(new_rhcos):
        new_labels[labels.OS_RHEL_VERSION] = rhel
    if new_kernel:
        new_labels[labels.KERNEL_VERSION_FULL] = new_kernel
    core.patch_node(name, {"metadata": {"labels": new_labels}})
    node_info: dict[str, str] = {"osImage": _os_image("rhcos", "", new_rhcos)}
    if new_kernel:
        node_info["kernelVersion"] = new_kernel
    core.patch_node_status(name, {"status": {"nodeInfo": node_info}})


def simulate_mco_update(
    api_client: ApiClient,
    node_names: Sequence[str],
    new_rhcos: str,
    max_unavailable: int = 1,
    on_step: Callable[[str, str], None] | None = None,
    *,
    new_kernel: str | None = None,
    drain_timeout: float = 120.0,
) -> None:
    """Update the nodes to RHCOS ``new_rhcos`` the way the Machine Config Operator
    rolls a pool: ``max_unavailable`` nodes at a time, each cordoned, drained
    through the eviction API (DaemonSet and mirror pods stay), rebooted into the new
    OS (OSTREE_VERSION and related labels, osImage, optionally the kernel),
    uncordoned. The MCD's state annotation goes Working -> Done.

    ``on_step(node, phase)`` is called as each phase (`PHASE_CORDON` ... `PHASE_DONE`)
    begins, e.g. to narrate a demo. Raises `DrainError` if a drain cannot finish.
    """
    if max_unavailable < 1:
        raise ValueError("max_unavailable must be at least 1")
    core = kubernetes.client.CoreV1Api(api_client)
    step = on_step or (lambda node, phase: None)
    rendered = _rendered_config(new_rhcos)

    def update(name: str) -> None:
        step(name, PHASE_CORDON)
        core.patch_node(
            name,
            {"metadata": {"annotations": {MCO_DESIRED_CONFIG: rendered, MCO_STATE: "Working"}}},
        )
        cordon(api_client, name)
        step(name, PHASE_DRAIN)
        drain(api_client, name, timeout=drain_timeout)
        step(name, PHASE_UPDATE)
        _update_os(api_client, name, new_rhcos, new_kernel)
        step(name, PHASE_UNCORDON)
        cordon(api_client, name, unschedulable=False)
        core.patch_node(
            name, {"metadata": {"annotations": {MCO_CURRENT_CONFIG: rendered, MCO_STATE: "Done"}}}
        )
        step(name, PHASE_DONE)

    for start in range(0, len(node_names), max_unavailable):
        batch = node_names[start : start + max_unavailable]
        with ThreadPoolExecutor(max_workers=len(batch)) as pool:
            list(pool.map(update, batch))


# --- pod fates ---------------------------------------------------------------------------------


def _fate_reached(pod: Any, fate: str) -> bool:
    statuses = pod.status.container_statuses or []
    if fate in (stages.FATE_SUCCEEDED, stages.FATE_FAILED):
        return bool(pod.status.phase == ("Succeeded" if fate == stages.FATE_SUCCEEDED else "Failed"))
    if fate == stages.FATE_READY:
        return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
    reason = "CrashLoopBackOff" if fate == stages.FATE_CRASH_LOOPING else "ImagePullBackOff"
    return bool(statuses) and all(s.state.waiting and s.state.waiting.reason == reason for s in statuses)


def set_pod_fate(
    api_client: ApiClient,
    namespace: str,
    pod_name: str,
    fate: str,
    *,
    wait: bool = True,
    timeout: float = 30.0,
) -> None:
    """Make a scheduled pod "ready", "crash-looping", "image-pull-failing", "succeeded" or "failed".

    Sets the pod's `stages.FATE_ANNOTATION`; kwok's pod-fate stages then write the
    status a kubelet would (see `stages`). A pod template carrying the annotation
    gets its fate from the start. ``wait``: until the status shows the fate.
    """
    if fate not in stages.FATES:
        raise ValueError(f"unknown fate {fate!r}; one of {stages.FATES}")
    core = kubernetes.client.CoreV1Api(api_client)
    core.patch_namespaced_pod(
        pod_name, namespace, {"metadata": {"annotations": {stages.FATE_ANNOTATION: fate}}}
    )
    if not wait:
        return
    deadline = time.monotonic() + timeout
    while not _fate_reached(core.read_namespaced_pod(pod_name, namespace), fate):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"pod {namespace}/{pod_name} not {fate} after {timeout:.0f}s (is it scheduled?)"
            )
        time.sleep(0.1)


def pod_fate_annotations(fate: str) -> dict[str, str]:
    """Annotations to put in a pod template so its pods get ``fate`` from the start."""
    if fate not in stages.FATES:
        raise ValueError(f"unknown fate {fate!r}; one of {stages.FATES}")
    return {stages.FATE_ANNOTATION: fate}

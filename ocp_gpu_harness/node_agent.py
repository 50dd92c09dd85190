"""SIMULATION: what a kubelet and the NVIDIA stack would do on each GPU node, done through the API.

kwok runs no containers, so nothing writes the validation markers, nothing registers
GPUs with a kubelet and GFD labels nothing.  This agent (a process the local control
plane starts beside kwok; test and demo infrastructure, never imported by the
operator) plays those parts, reading only what a node would see:

- **Markers order the operand pods.**  kwok's pod-ready stage leaves the pods of
  `GATED_APPS` alone (stages.py); the agent gives such a pod the fate "ready" (kwok
  then writes a kubelet's Ready status) once what its init container waits for would
  exist on its node:
    container toolkit <- driver-ready (a Ready driver pod on the node);
    device plugin, GFD, DCGM, DCGM exporter, MIG manager <- toolkit-ready (a Ready toolkit pod);
    validator <- driver-ready, then what its own init containers validate: toolkit-ready
    and plugin-ready (a Ready plugin pod: the plugin validation requests a GPU).
  An operand that is not to run on the node (its deploy label is not "true") counts as
  present on the host; so does one whose DaemonSet does not exist in that namespace
  (e.g. `driver.enabled: false`: a preinstalled driver) once no new DaemonSet came to the
  namespace for DAEMONSETS_SETTLE_S (the operator applies a pass's DaemonSets side by side),
  except for the validator, whose init containers say which operands are enabled.  NB: the
  agent mirrors only ocp-gpu's DaemonSets (managed-by): NVIDIA's operator's pods (benches,
  takeover fixtures) count every other operand as on the host, and are ordered by NVIDIA's
  state machine, which creates an operand's DaemonSet once the previous one is ready.  A pod given
  another fate by a test (`nodes.set_pod_fate`) is left alone.
- **GPUs become allocatable when the device plugin is Ready.**  For nodes that carry
  `SIMULATED_GPUS` (the number of physical GPUs, set by `nodes.gpu_node(...,
  simulated=True)`), the agent sets the node's `nvidia.com/*` capacity and allocatable
  to what the plugin would advertise: the config the operator rendered (the ConfigMap
  mounted as the pod's `available-configs` volume, the key named by the node's
  `nvidia.com/device-plugin.config` label or the config-manager's DEFAULT_CONFIG),
  through `rendering.operands.plugin_config.advertised_resources`.  No Ready plugin pod: none.
- **MPS.**  With a plugin config that shares GPUs with MPS (`sharing.mps`), a plugin run (its
  pod and config) advertises GPUs x replicas only once it has seen the node's MPS control daemon
  pod Ready, and from then on until it restarts (`mps_started`: the real plugin asserts the
  daemon's health at start, retries every 30 s, and never checks again); a new plugin pod, or a
  new config, waits for the daemon again.  The record is the node annotation `MPS_STARTED`.  The
  daemon pod (NVIDIA's DaemonSet selects `nvidia.com/mps.capable=true`, which the simulated GFD
  writes) is gated on toolkit-ready like the plugin's; with no readiness probe in NVIDIA's
  DaemonSet, Ready stands in for `mps-control-daemon` having started `nvidia-cuda-mps-control`.
  Not simulated: the daemons themselves (pipes, shared memory, the GPUs' compute mode), nor the
  plugin's 30 s retry delay (here the next pass).
- **GFD labels.**  A Ready GFD pod on such a node: `nvidia.com/gpu.product`,
  `.count`, `.memory`, `nvidia.com/cuda.driver.major/minor/rev`, `nvidia.com/mig.capable`
  (the product is in model/mig.FAMILIES) and `nvidia.com/mig.strategy` (the pod's
  MIG_STRATEGY); with MIG devices, under `single` the product is suffixed
  `-MIG-<profile>` and `.count`/`.memory` describe the MIG devices, under `mixed`
  `nvidia.com/mig-<profile>.count` is added; with the plugin config mounted in the GFD
  pod, the sharing labels of full GPUs (`gfd_sharing_labels`: `nvidia.com/gpu.replicas`,
  `.sharing-strategy`, a `-SHARED` product, `nvidia.com/mps.capable`), but for a config
  NVIDIA's parser refuses (replicas < 2, MPS with mixed MIG) the labels stay as they were: an
  edit of the ConfigMap does not reach the running GFD (below), which keeps its features file;
  NOT simulated: GFD restarted on it (a label switch, a new pod) removes its file at the
  restart and then exits on the config, so its labels go; with MPS sharing on MIG-enabled GPUs GFD's
  sharing labeler fails and its labels go; all removed when it goes.  NB: the agent reads the
  admin's ConfigMap at every pass, so an edit of a config a node already uses applies at once;
  the real plugin and GFD read it at their next start (their config-manager signals them only
  when the node's `nvidia.com/device-plugin.config` label changes).
- **vGPU devices** (vgpu_devices.py): on a vm-vgpu node, the vGPU device manager's pod waits
  for a Ready vGPU manager pod (its vgpu-manager-ready); Ready, it "creates" the vGPU devices of
  the node's config (annotation, `nvidia.com/vgpu.config.state`); the sandbox validator there
  waits for them, and a Ready sandbox device plugin advertises them as `nvidia.com/NVIDIA_<type>`.
- **ResourceSlices when the DRA kubelet plugin is Ready** (dra_slices.py).  For a node with
  `SIMULATED_GPUS` and a Ready `nvidia-dra-driver-kubelet-plugin` pod, the agent publishes
  the node's one ResourceSlice of driver `gpu.nvidia.com` as NVIDIA's plugin would: a device
  per GPU, or per MIG device once the simulated MIG manager made some, with the driver
  version of the Ready driver pod's image tag; it is updated when they change and deleted
  when the pod goes.  The plugin pod itself waits for toolkit-ready, as the device plugin's
  (its toolkit-validation init container).  The real kube-scheduler allocates claims from
  these slices.  With ComputeDomains on (the pod's `compute-domains` container), also the
  node's slice of `compute-domain.nvidia.com` as NVIDIA's compute-domain kubelet plugin
  publishes it at start: IMEX channel 0 and the compute-domain daemon (dra_slices.py); the
  IMEX daemons and the controller's per-ComputeDomain work do not run.
- **The MIG manager's protocol, through labels** (NVIDIA's mig-parted
  `reconfigure`), on a node with a Ready `nvidia-mig-manager` pod whose
  `nvidia.com/mig.config` names a config it has not acted on yet: the config is read
  from the pod's `mig-parted-config` ConfigMap (key named by its CONFIG_FILE); a
  missing config fails at once (`nvidia.com/mig.config.state=failed`, nothing
  paused); a config whose MIG devices the GPUs already have succeeds at once;
  otherwise state `pending`, the deploy labels of the device plugin, GFD, DCGM
  exporter and DCGM (NVIDIA's list and order) become `paused-for-mig-change` (an
  admin's `false` stays), and once none of their pods is left on the node the
  geometry is "applied" (annotation `MIG_DEVICES`: what `planning.operands.mig_planning.mig_devices`
  says the config makes), the labels go back to `true` (or `false`), the
  validator pod on the node is deleted (NVIDIA restarts it) and the state becomes
  `success`.  A node annotated `MIG_FAIL=true` fails at the apply step: state
  `failed`, operands restored, geometry unchanged.  The agent's progress lives in
  node annotations (`MIG_*`), so a restarted agent carries on.

- **The VM passthrough stack** (vfio_devices.py).  A Ready `nvidia-vfio-manager` pod on a
  node with `SIMULATED_GPUS` binds its GPUs to vfio-pci: the agent writes the node annotation
  `vfio_devices.VFIO_BOUND` (removed when the pod goes: its preStop unbinds them).  The sandbox
  validator is Ready once the GPUs are bound (its vfio-pci check), the sandbox device plugin once
  the validator is (its init containers wait for the markers).  A Ready sandbox device plugin on
  a bound node advertises `nvidia.com/<PCI device name>` (e.g. nvidia.com/GA102GL_A10), one per
  GPU, as NVIDIA's kubevirt-gpu-device-plugin names it; GPUs bound to vfio-pci are never
  advertised as `nvidia.com/gpu` (the NVIDIA driver no longer has them).

- **An overdue deletion is finished** (a kubelet kills a terminating pod's containers at the
  end of its grace period, then deletes it with its UID as precondition until it is gone).  kwok
  confirms a deletion at once, on the pod's event, and never again, so a pod still stored past
  its deletionTimestamp is one it missed: kube-apiserver killed in the middle of a grace-0
  deletion (two steps: store deletionGracePeriodSeconds 0, then remove the pod; killed between
  them, the pod stays with no further event, and kwok's pod-delete stage skips grace 0:
  `stages.patched_pod_delete`), or kwok's own delete cut by that kill (kwok v0.8.0 retries a
  failed stage only on a refused connection, a timeout, 429 or 503, not on "connection reset by
  peer").  A mirrored pod on a kwok node overdue for `OVERDUE_S` seconds is deleted so (the
  apiserver removes a stored grace-0 pod on the next delete: `rest.BeforeDelete`).  Issue 30:
  test_chaos.py's apiserver restart left driver pods terminating for good, their nodes in
  pod-restart-required.

It polls rather than watching: simple, and cheap at the node counts tests use.  Between
passes it waits `--interval` seconds, or twice the CPU time the pass used, never more
than `MAX_PASS_WAIT` (`pass_wait`); every request has a timeout (`REQUEST_TIMEOUT`), so
no pass can hang on the apiserver.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import functools
import hashlib
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import kubernetes
import yaml
from kubernetes.client import ApiClient

from ocp_gpu.model import labels, mig_catalog, operand_types
from ocp_gpu.planning import config_maps
from ocp_gpu.planning.operands import mig_planning
from ocp_gpu.rendering.operands import dra_driver, operand_catalog, plugin_config
from ocp_gpu_harness import dra_slices, real_node, stages, vfio_devices, vgpu_devices
from ocp_gpu_harness import nodes as nodes_mod
from ocp_gpu_harness.mirror import Mirror

logger = logging.getLogger("ocp_gpu_harness.node_agent")

SIMULATED_GPUS: Final = nodes_mod.SIMULATED_GPUS
SIMULATED_PRODUCT: Final = nodes_mod.SIMULATED_PRODUCT
DEFAULT_PRODUCT: Final = "NVIDIA-L40S"
# Pods made Ready at once (each a patch; the apiserver, not the agent, is then the limit).
GATE_WORKERS: Final = 8
# Seconds: the longest wait between passes, however costly the last pass was.
MAX_PASS_WAIT: Final = 5.0
# Seconds: a pass at least this often, even when no watch event came (a safety net, not the pace).
RESYNC: Final = MAX_PASS_WAIT
# Seconds an object we wrote is left alone while the watch has not brought our write back.
WRITE_SEEN_TIMEOUT: Final = 5.0
# Seconds: a pass this long is logged even when it changed nothing.
SLOW_PASS: Final = 10.0
# (connect, read) seconds for every request: a request the apiserver never answers fails the
# pass (logged, retried by the next one) instead of blocking the agent for good. The read
# timeout is generous: the LIST of every operand pod at 1,000 nodes is tens of megabytes.
REQUEST_TIMEOUT: Final = (10.0, 120.0)
# Seconds after the agent last saw a new operand DaemonSet in a namespace before an operand with
# no DaemonSet there counts as on the host (`NodeAgent.run_once`, `present`): the operator
# applies a pass's DaemonSets side by side, so the toolkit's can come before the driver's, and a
# pass between the two took the driver for a preinstalled one (the toolkit Ready before the
# driver: tests/e2e/test_stack.py, stress run 2026-11-28).  A real toolkit waits for the
# driver-ready marker, which no host without a driver has.  A pass runs at least every RESYNC s.
DAEMONSETS_SETTLE_S: Final = 3.0
# Seconds a pod may stay stored past its deletionTimestamp before the agent deletes it
# (`deletion_overdue`): kwok confirms within milliseconds, kube-apiserver removes a grace-0 pod
# within milliseconds of storing it; a loaded machine stretches both to a few seconds at most.
OVERDUE_S: Final = 5.0
# GPU memory (MiB) GFD reports per product; others get an 80 GB figure.
PRODUCT_MEMORY: Final = {
    "NVIDIA-L40S": "46068",
    "NVIDIA-A100-SXM4-80GB": "81920",
    "NVIDIA-A100-SXM4-40GB": "40960",
    "NVIDIA-H100-80GB-HBM3": "81559",
    "NVIDIA-A30": "24576",
}
# GFD labels the agent writes, with the values a driver 550.54.15 would give.
GFD_LABELS: Final = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
    labels.MIG_CAPABLE,
    labels.MIG_STRATEGY,
)
# GFD's sharing labels, written when GFD reads the plugin config (gfd_sharing_labels).
GFD_SHARING_LABELS: Final = (labels.GPU_REPLICAS, labels.GPU_SHARING_STRATEGY, labels.MPS_CAPABLE)
# GFD's per-profile label under the mixed strategy: nvidia.com/mig-<profile>.count.
_MIG_COUNT_PREFIX: Final = "nvidia.com/mig-"
_MIG_COUNT_SUFFIX: Final = ".count"

# SIMULATION of the device plugin's MPS start: the plugin instance ("<pod uid>/<config digest>")
# that found the node's MPS control daemon healthy when it started, and so serves (`mps_started`).
MPS_STARTED: Final = "ocp-gpu.harness/mps-plugin-started"
# SIMULATION of the MIG manager: node annotations holding its progress and the GPUs' MIG state.
# The MIG devices the node's GPUs have (JSON profile -> count); absent: MIG mode off.
MIG_DEVICES: Final = "ocp-gpu.harness/mig-devices"
# The nvidia.com/mig.config value the simulated manager last finished with (success or failure).
MIG_DONE: Final = "ocp-gpu.harness/mig-config-done"
# Set while the GPU clients are paused; the deploy label values found before (JSON).
MIG_PAUSED: Final = "ocp-gpu.harness/mig-paused-deploy-labels"
# A test's knob: "true" makes the apply step fail (as a GPU in use or a driver error would).
MIG_FAIL: Final = "ocp-gpu.harness/mig-fail"
# The GPU clients the MIG manager pauses, in its order (mig-parted's getK8sGPUClients).
MIG_PAUSED_OPERANDS: Final = (
    operand_catalog.DEVICE_PLUGIN,
    operand_catalog.GPU_FEATURE_DISCOVERY,
    operand_catalog.DCGM_EXPORTER,
    operand_catalog.DCGM,
)
RESOURCE_PREFIX: Final = "nvidia.com/"
# The pods of NVIDIA's DRA kubelet plugin (its DaemonSet nvidia-dra-driver-kubelet-plugin).
DRA_PLUGIN_APP: Final = stages.DRA_PLUGIN_APP
# Its second container, there while ComputeDomains are on.
COMPUTE_DOMAINS_CONTAINER: Final = dra_driver.COMPUTE_DOMAINS_CONTAINER
PLUGIN_CONFIG_LABEL: Final = "nvidia.com/device-plugin.config"
# The operand pods whose readiness waits for a marker (their init containers would).
GATED_APPS: Final = stages.GATED_APPS
# The validator's init containers that wait for another operand's marker (rendering/operands/validator.py).
VALIDATED_CONTAINERS: Final = {
    "toolkit-validation": operand_catalog.CONTAINER_TOOLKIT,
    "plugin-validation": operand_catalog.DEVICE_PLUGIN,
}
# (namespace, node, operand) -> whether the operand's marker exists on the node.
_MarkerCheck = Callable[[str, str, operand_types.Operand], bool]
_APPS_SELECTOR: Final = operand_types.OPERAND_POD_SELECTOR


def _ready(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def deletion_overdue(pod: Mapping[str, Any], now: float) -> bool:
    """A pod on a kwok node still stored at ``now`` (epoch seconds) past the end of its grace period
    (its deletionTimestamp), with no finalizer left to wait for: kwok missed its deletion (see the
    module docstring).

    NB: not a pod on the real node (its own kubelet confirms it) nor an unbound one (kube-
    controller-manager's pod garbage collector removes a terminating pod without a node)."""
    metadata = pod.get("metadata") or {}
    stamp = str(metadata.get("deletionTimestamp") or "")
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    return (
        bool(stamp)
        and datetime.datetime.fromisoformat(stamp).timestamp() <= now
        and not metadata.get("finalizers")
        and bool(node)
        and node != real_node.NODE_NAME
    )


def validated_operands(pod: Mapping[str, Any]) -> tuple[operand_types.Operand, ...]:
    """The operands (toolkit, device plugin) whose markers a validator pod's init containers wait
    for: the operator leaves a validation out when its operand is disabled."""
    containers = {str(c.get("name")) for c in (pod.get("spec") or {}).get("initContainers") or ()}
    return tuple(operand for container, operand in VALIDATED_CONTAINERS.items() if container in containers)


def _app(obj: Mapping[str, Any]) -> str:
    return operand_types.pod_app((obj.get("metadata") or {}).get("labels") or {})


class NodeAgent:
    """One pass reads the mirrored operand pods, DaemonSets and GPU nodes, then writes what differs."""

    def __init__(self, api_client: ApiClient, stop: threading.Event | None = None) -> None:
        self.api = api_client
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.apps = kubernetes.client.AppsV1Api(api_client)
        self.resource = kubernetes.client.ResourceV1Api(api_client)
        self.stop = stop or threading.Event()
        # Set by every watch event: the loop runs a pass when something changed.
        self.changed = threading.Event()
        self.pods = Mirror(
            "pods",
            self.core.list_pod_for_all_namespaces,
            _trim_pod,
            self.changed,
            self.stop,
            label_selector=_APPS_SELECTOR,
        )
        self.daemonsets = Mirror(
            "daemonsets",
            self.apps.list_daemon_set_for_all_namespaces,
            _trim_daemonset,
            self.changed,
            self.stop,
            label_selector=f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}",
        )
        self.nodes = Mirror(
            "nodes",
            self.core.list_node,
            _trim_node,
            self.changed,
            self.stop,
            label_selector=f"{labels.NFD_NVIDIA_PCI}=true",
        )
        self.config_maps = Mirror(
            "configmaps",
            self.core.list_config_map_for_all_namespaces,
            _trim_config_map,
            self.changed,
            self.stop,
        )
        # SIMULATION of NVIDIA's DRA kubelet plugin: the slices of its driver (dra_slices.py).
        self.slices = Mirror(
            "resourceslices",
            self.resource.list_resource_slice,
            _trim_slice,
            self.changed,
            self.stop,
            field_selector=f"spec.driver={dra_slices.DRIVER}",
        )
        # SIMULATION of its compute-domain kubelet plugin: the slices of compute-domain.nvidia.com.
        self.domain_slices = Mirror(
            "resourceslices",
            self.resource.list_resource_slice,
            _trim_slice,
            self.changed,
            self.stop,
            field_selector=f"spec.driver={dra_slices.COMPUTE_DOMAIN_DRIVER}",
        )
        self._mirrors = (
            self.pods,
            self.daemonsets,
            self.nodes,
            self.config_maps,
            self.slices,
            self.domain_slices,
        )
        # ("pod", uid) or ("node", name) -> (its resourceVersion when we wrote it, monotonic time):
        # written, and not yet seen back through the watch; left alone until then (`_unseen`).
        self._written: dict[tuple[str, str], tuple[str, float]] = {}
        # Writes to nodes so far (node passes run in this thread only).
        self._node_writes = 0
        # pod uid -> monotonic time the agent first saw its deletion overdue (`deletion_overdue`).
        self._overdue_since: dict[str, float] = {}
        # (namespace, name) -> a ConfigMap's data read by a GET this pass, when the mirror did not
        # have it yet (None: absent).
        self._config_maps: dict[tuple[str, str], dict[str, str] | None] = {}
        # (namespace, operand app) of an operand DaemonSet -> monotonic time the agent first saw it.
        self._daemonsets_seen: dict[tuple[str, str], float] = {}

    def start(self, timeout: float = 120.0) -> None:
        """Start the mirrors and wait for their first LIST (a pass on half a view would gate wrongly)."""
        for mirror in self._mirrors:
            mirror.start()
        deadline = time.monotonic() + timeout
        for mirror in self._mirrors:
            if not mirror.synced.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"node agent: no LIST of {mirror.name} in {timeout:.0f} s")

    def _write(self, call: Any, *args: Any, **kwargs: Any) -> None:
        """A write with the timeout, its answer read as bytes and dropped: it is unused, and the
        client's model deserialisation of thousands of pods cost much of a pass's CPU. NB: the
        body must be read, or the connection never goes back to the pool."""
        call(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs).data  # noqa: B018
        if call in (self.core.patch_node, self.core.patch_node_status, self.core.delete_namespaced_pod):
            self._node_writes += 1

    def _unseen(self, kind: str, key: str, version: str) -> bool:
        """We wrote this object and the watch has not brought the write back yet (at most
        `WRITE_SEEN_TIMEOUT` s): acting again on the old copy would write twice (a second
        validator deletion after a MIG change, say)."""
        written = self._written.get((kind, key))
        if written is None:
            return False
        if written[0] == version and time.monotonic() - written[1] < WRITE_SEEN_TIMEOUT:
            return True
        del self._written[(kind, key)]
        return False

    def run_once(self) -> tuple[int, int]:
        """One pass; returns (operand pods seen, pods made Ready)."""
        pods = self.pods.items()
        deployed = {(str(d["metadata"]["namespace"]), _daemonset_app(d)) for d in self.daemonsets.items()}
        now = time.monotonic()
        self._daemonsets_seen = {key: self._daemonsets_seen.get(key, now) for key in deployed}
        newest_daemonset: dict[str, float] = {}
        for (namespace, _), seen in self._daemonsets_seen.items():
            newest_daemonset[namespace] = max(seen, newest_daemonset.get(namespace, seen))
        nodes = {str(n["metadata"]["name"]): n for n in self.nodes.items()}
        ready: set[tuple[str, str, str]] = set()  # (namespace, node, app)
        for pod in pods:
            if _ready(pod):
                ready.add(
                    (str(pod["metadata"]["namespace"]), str(pod["spec"].get("nodeName", "")), _app(pod))
                )

        def ready_on(namespace: str, node: str, operand: operand_types.Operand) -> bool:
            """The operand's marker exists on the node: its pod is Ready there, or the node is not
            labelled to run it (an admin's "false", the MIG manager's pause): the host has it."""
            node_labels = ((nodes.get(node) or {}).get("metadata") or {}).get("labels") or {}
            return (namespace, node, operand.app) in ready or node_labels.get(operand.deploy_label) != "true"

        def present(namespace: str, node: str, operand: operand_types.Operand) -> bool:
            """As `ready_on`, or the operand's DaemonSet does not exist: the host has it; but not
            while the operator may still be applying the namespace's DaemonSets (a new one seen
            less than DAEMONSETS_SETTLE_S ago)."""
            if (namespace, operand.app) in deployed:
                return ready_on(namespace, node, operand)
            settled = now - newest_daemonset.get(namespace, -DAEMONSETS_SETTLE_S) >= DAEMONSETS_SETTLE_S
            return settled or ready_on(namespace, node, operand)

        self._finish_overdue_deletions(pods)
        # The decisions in this thread (cheap, in memory); only the writes go to the workers.
        to_open = [
            pod
            for pod in pods
            if self._gate(pod, present, ready_on)
            and not self._unseen("pod", str(pod["metadata"].get("uid", "")), _version(pod))
        ]
        # NB: kubelets start pods in parallel, one per node; one at a time, the 4,000 operand pods
        # of 500 nodes took minutes per pass and paced every upgrade benchmark.
        if to_open:
            with concurrent.futures.ThreadPoolExecutor(GATE_WORKERS) as gates:
                for done in [gates.submit(self._open, pod) for pod in to_open]:
                    done.result()
        # NB: one index per pass: at 500 nodes, scanning every pod per node made a pass take minutes.
        pods_by_node: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            pods_by_node.setdefault(str(pod["spec"].get("nodeName", "")), []).append(pod)
        self._config_maps = {}
        slices_by_node: dict[str, list[dict[str, Any]]] = {}
        for found in self.slices.items():
            slices_by_node.setdefault(str(found["spec"].get("nodeName", "")), []).append(found)
        domain_slices_by_node: dict[str, list[dict[str, Any]]] = {}
        for found in self.domain_slices.items():
            domain_slices_by_node.setdefault(str(found["spec"].get("nodeName", "")), []).append(found)
        for name, node in nodes.items():
            if SIMULATED_GPUS in (node["metadata"].get("annotations") or {}) and not self._unseen(
                "node", name, _version(node)
            ):
                writes = self._node_writes
                self._node(name, node, pods_by_node.get(name, []))
                self._mig(name, node, pods_by_node.get(name, []))
                self._dra(name, node, pods_by_node.get(name, []), slices_by_node.get(name, []))
                self._compute_domains(
                    name, node, pods_by_node.get(name, []), domain_slices_by_node.get(name, [])
                )
                if self._node_writes != writes:
                    self._written[("node", name)] = (_version(node), time.monotonic())
        return len(pods), len(to_open)

    def _finish_overdue_deletions(
        self, pods: list[dict[str, Any]], now: float | None = None, wall: float | None = None
    ) -> None:
        """Delete, as its kubelet would, every pod whose deletion is overdue for `OVERDUE_S` s
        (``now``: monotonic seconds, ``wall``: epoch seconds)."""
        now = time.monotonic() if now is None else now
        wall = time.time() if wall is None else wall
        found = {str(p["metadata"].get("uid", "")): p for p in pods if deletion_overdue(p, wall)}
        for uid in set(self._overdue_since) - set(found):
            del self._overdue_since[uid]
        for uid, pod in found.items():
            since = self._overdue_since.setdefault(uid, now)
            if now - since < OVERDUE_S or self._unseen("pod", uid, _version(pod)):
                continue
            metadata = pod["metadata"]
            try:
                # The UID precondition: never a newer pod of the same name (stages.patched_pod_delete).
                self._write(
                    self.core.delete_namespaced_pod,
                    metadata["name"],
                    metadata["namespace"],
                    body={"gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
                )
            except kubernetes.client.ApiException as error:
                if error.status not in (404, 409):  # gone already; another pod of that name
                    raise
            self._written[("pod", uid)] = (_version(pod), time.monotonic())
            logger.info(
                "%s/%s on %s: still stored %.0f s past its deletionTimestamp %s (grace %s): deleted as "
                "its kubelet would",
                metadata["namespace"],
                metadata["name"],
                pod["spec"].get("nodeName", ""),
                now - since,
                metadata.get("deletionTimestamp"),
                metadata.get("deletionGracePeriodSeconds"),
            )

    def _gate(self, pod: Mapping[str, Any], present: _MarkerCheck, ready_on: _MarkerCheck) -> bool:
        """The pod is to be given the fate "ready": its markers exist."""
        metadata = pod["metadata"]
        app, node = _app(pod), str(pod["spec"].get("nodeName", ""))
        if app not in GATED_APPS or not node or metadata.get("deletionTimestamp"):
            return False
        if stages.FATE_ANNOTATION in (metadata.get("annotations") or {}):
            # Ready already, or a test chose its fate.
            return False
        namespace = str(metadata["namespace"])
        driver_ready = present(namespace, node, operand_catalog.DRIVER)
        toolkit_ready = driver_ready and present(namespace, node, operand_catalog.CONTAINER_TOOLKIT)
        if app == operand_catalog.SANDBOX_VALIDATOR.app and self._vgpu_node(node):
            # vm-vgpu: its vgpu-manager check passes once the vGPU manager runs, its vgpu-devices
            # check once the device manager made vGPU devices (which needs the vGPU manager).
            return self._vgpu_made(node)
        if app == operand_catalog.SANDBOX_VALIDATOR.app:
            # Its vfio-pci check passes once the VFIO manager bound the node's GPUs.
            return self._vfio_bound(node)
        if app == operand_catalog.VGPU_DEVICE_MANAGER.app:
            # Its init container waits for vgpu-manager-ready: the vGPU manager runs there.
            return ready_on(namespace, node, operand_catalog.VGPU_MANAGER)
        if app == operand_catalog.SANDBOX_DEVICE_PLUGIN.app:
            # Its init containers wait for the sandbox validator's markers.
            return ready_on(namespace, node, operand_catalog.SANDBOX_VALIDATOR)
        if app == operand_catalog.CONTAINER_TOOLKIT.app:
            return driver_ready
        if app == operand_catalog.OPERATOR_VALIDATOR.app:
            # NB: what the validator waits for is read from its own init containers, not from
            # which DaemonSets exist: its DaemonSet is applied before the device plugin's, and a
            # pass between the two took the plugin for one the host has (CI: the validator Ready
            # before the plugin).
            return driver_ready and all(ready_on(namespace, node, o) for o in validated_operands(pod))
        return toolkit_ready

    def _vgpu_node(self, node: str) -> bool:
        """The operator labelled the node for the vGPU stack (its vGPU manager's deploy label)."""
        found = self.nodes.get("", node) or {}
        node_labels = (found.get("metadata") or {}).get("labels") or {}
        return node_labels.get(operand_catalog.VGPU_MANAGER.deploy_label) == "true"

    def _vgpu_made(self, node: str) -> bool:
        """The simulated vGPU device manager made vGPU devices on the node (its annotation)."""
        found = self.nodes.get("", node) or {}
        return bool(vgpu_devices.created((found.get("metadata") or {}).get("annotations") or {}))

    def _vgpu(
        self, name: str, node: Mapping[str, Any], on_node: list[dict[str, Any]]
    ) -> dict[str, int] | None:
        """SIMULATION of the vGPU device manager on this node (vgpu_devices.py); `on_node`: its Ready
        operand pods.  The vGPU devices there after this step (None: none)."""
        metadata = node["metadata"]
        annotations = metadata.get("annotations") or {}
        node_labels = metadata.get("labels") or {}
        have = vgpu_devices.created(annotations)
        host_driver = any(_app(p) == operand_catalog.VGPU_MANAGER.app for p in on_node)
        manager = next((p for p in on_node if _app(p) == operand_catalog.VGPU_DEVICE_MANAGER.app), None)
        patch: dict[str, Any] = {}
        devices = have
        if not host_driver:
            # The vGPU host driver is gone: so are its mediated devices.
            devices = None
        elif manager is not None:
            wanted = node_labels.get(labels.VGPU_CONFIG) or _env_of(manager, "DEFAULT_VGPU_CONFIG")
            config_map = _volume_config_map(manager, "vgpu-config")
            key = (_env_of(manager, "CONFIG_FILE") or "config.yaml").rsplit("/", 1)[-1]
            document = self._config_file(manager, config_map, key) if config_map else None
            product = str(annotations.get(SIMULATED_PRODUCT, DEFAULT_PRODUCT))
            made = vgpu_devices.devices_for(
                document, wanted, product, int(annotations.get(SIMULATED_GPUS, "0"))
            )
            state = "failed" if made is None else "success"
            devices = have if made is None else made
            if node_labels.get(labels.VGPU_CONFIG_STATE) != state:
                patch["labels"] = {labels.VGPU_CONFIG_STATE: state}
        if devices != have:
            patch["annotations"] = {
                vgpu_devices.VGPU_DEVICES: json.dumps(devices, sort_keys=True) if devices else None
            }
        if patch:
            self._write(self.core.patch_node, name, {"metadata": patch})
            logger.info("node %s: vGPU devices %s (%s)", name, devices or "none", patch.get("labels", {}))
        return devices or None

    def _vfio_bound(self, node: str) -> bool:
        """The simulated VFIO manager bound the node's GPUs to vfio-pci (its annotation)."""
        found = self.nodes.get("", node) or {}
        return vfio_devices.VFIO_BOUND in ((found.get("metadata") or {}).get("annotations") or {})

    def _open(self, pod: Mapping[str, Any]) -> None:
        """Give the pod the fate "ready" (kwok then writes a kubelet's Ready status)."""
        metadata = pod["metadata"]
        self._write(
            self.core.patch_namespaced_pod,
            metadata["name"],
            metadata["namespace"],
            {"metadata": {"annotations": {stages.FATE_ANNOTATION: stages.FATE_READY}}},
        )
        self._written[("pod", str(metadata.get("uid", "")))] = (_version(pod), time.monotonic())
        logger.info(
            "%s/%s on %s: its markers exist, Ready",
            metadata["namespace"],
            metadata["name"],
            pod["spec"].get("nodeName", ""),
        )

    def _node(self, name: str, node: Mapping[str, Any], pods: list[dict[str, Any]]) -> None:
        """`pods`: the operand pods on this node."""
        metadata = node["metadata"]
        annotations = metadata.get("annotations") or {}
        gpus = int(annotations.get(SIMULATED_GPUS, "0"))
        mig_devices = _mig_devices(annotations)
        # In MIG mode a GPU is advertised only through its MIG devices.
        whole = 0 if mig_devices is not None else gpus
        on_node = [p for p in pods if p["spec"].get("nodeName") == name and _ready(p)]
        plugin = next((p for p in on_node if _app(p) == operand_catalog.DEVICE_PLUGIN.app), None)
        mps_daemon = any(_app(p) == operand_catalog.MPS_CONTROL_DAEMON.app for p in on_node)
        vfio_manager = any(_app(p) == operand_catalog.VFIO_MANAGER.app for p in on_node)
        bound = vfio_devices.VFIO_BOUND in annotations
        if vfio_manager != bound:
            # SIMULATION of the VFIO manager: `vfio-manage bind --all`, and its preStop's unbind.
            value = str(gpus) if vfio_manager else None
            body = {"metadata": {"annotations": {vfio_devices.VFIO_BOUND: value}}}
            self._write(self.core.patch_node, name, body)
            logger.info("node %s: GPUs %s vfio-pci", name, "bound to" if vfio_manager else "unbound from")
            bound = vfio_manager
        sandbox_plugin = any(_app(p) == operand_catalog.SANDBOX_DEVICE_PLUGIN.app for p in on_node)
        made = self._vgpu(name, node, on_node)
        wanted: dict[str, int] = {}
        if made:
            # vGPU devices: only the sandbox device plugin advertises them, by vGPU type.
            if sandbox_plugin:
                wanted = {vgpu_devices.resource_name(vgpu_type): count for vgpu_type, count in made.items()}
        elif bound:
            # GPUs on vfio-pci: only the sandbox device plugin advertises them, by model.
            product = str(annotations.get(SIMULATED_PRODUCT, DEFAULT_PRODUCT))
            if sandbox_plugin and gpus:
                wanted = {vfio_devices.resource_name(product): gpus}
        # The plugin instance (pod, config) that serves with MPS, recorded on the node (`mps_started`).
        started: str | None = None
        if plugin is not None and not bound:
            config = self._plugin_config(plugin, metadata.get("labels") or {})
            mps = config is not None and sharing_strategy(config) == "mps"
            instance = plugin_instance(plugin, config) if config is not None and mps else None
            started = mps_started(annotations.get(MPS_STARTED), instance, mps_daemon)
            if config is not None and (not mps or started is not None):
                wanted = plugin_config.advertised_resources(config, whole, mig_devices or {})
        if started != annotations.get(MPS_STARTED):
            self._write(self.core.patch_node, name, {"metadata": {"annotations": {MPS_STARTED: started}}})
            logger.info("node %s: device plugin serving with MPS: %s", name, started or "no")
        status = node.get("status") or {}
        current = {
            key: str(value)
            for key, value in (status.get("allocatable") or {}).items()
            if key.startswith(RESOURCE_PREFIX)
        }
        if current != {key: str(value) for key, value in wanted.items()}:
            resources: dict[str, str | None] = dict.fromkeys(current)
            resources.update({key: str(value) for key, value in wanted.items()})
            body = {"status": {"capacity": resources, "allocatable": resources}}
            self._write(self.core.patch_node_status, name, body)
            logger.info("node %s: device plugin advertises %s", name, wanted or "nothing")
        gfd = next((p for p in on_node if _app(p) == operand_catalog.GPU_FEATURE_DISCOVERY.app), None)
        node_labels = metadata.get("labels") or {}
        product = str(annotations.get(SIMULATED_PRODUCT, DEFAULT_PRODUCT))
        wanted_labels = _gfd_labels(product, gpus, mig_devices, _env_of(gfd, "MIG_STRATEGY")) if gfd else {}
        if gfd is not None and _volume_config_map(gfd, "available-configs"):
            # GFD reads the plugin config (as the operator mounts it): the sharing labels.
            gfd_config = self._plugin_config(gfd, node_labels)
            if gfd_config is not None and _refused(gfd_config, _env_of(gfd, "MIG_STRATEGY")):
                # NB: the running GFD never reads an edited config (its config-manager signals it only
                # on a label change): it keeps its features file, the node its labels (module docstring).
                wanted_labels = {key: value for key, value in node_labels.items() if _is_gfd_label(key)}
            elif gfd_config is not None and mig_devices is not None and sharing_strategy(gfd_config) == "mps":
                # NB: MPS sharing on MIG-enabled GPUs: GFD's sharing labeler fails (k8s-device-plugin
                # v0.20.0 internal/lm/nvml.go isMPSCapable: errMPSSharingNotSupported), GFD exits from
                # its run loop, whose deferred cleanup removes its features file: NFD drops its labels.
                wanted_labels = {}
            elif gfd_config is not None and mig_devices is None:
                wanted_labels.update(gfd_sharing_labels(gfd_config, product, mig_enabled=False))
            elif gfd_config is not None:
                # NB: MIG devices: only mps.capable (false: MPS does not share MIG devices).
                wanted_labels[labels.MPS_CAPABLE] = "false"
        have = {key: value for key, value in node_labels.items() if _is_gfd_label(key)}
        if have != wanted_labels:
            patch: dict[str, str | None] = dict.fromkeys(have)
            patch.update(wanted_labels)
            self._write(self.core.patch_node, name, {"metadata": {"labels": patch}})
            logger.info("node %s: GFD labels %s", name, wanted_labels or "removed")

    def _dra(
        self, name: str, node: Mapping[str, Any], pods: list[dict[str, Any]], slices: list[dict[str, Any]]
    ) -> None:
        """SIMULATION of NVIDIA's DRA kubelet plugin on this node (module docstring; dra_slices.py);
        `pods`: the operand pods on this node, `slices`: its gpu.nvidia.com ResourceSlices."""
        metadata = node["metadata"]
        annotations = metadata.get("annotations") or {}
        on_node = [p for p in pods if p["spec"].get("nodeName") == name and _ready(p)]
        plugin = any(_app(p) == DRA_PLUGIN_APP for p in on_node)
        if not plugin:
            # No plugin (any more): a kubelet removes the slices of a driver that unregistered.
            for gone in slices:
                self._write(self.resource.delete_resource_slice, gone["metadata"]["name"])
                logger.info(
                    "node %s: DRA kubelet plugin gone, ResourceSlice %s deleted",
                    name,
                    gone["metadata"]["name"],
                )
            return
        driver = next((p for p in on_node if _app(p) == labels.DRIVER_APP), None)
        version = next(
            (
                v
                for c in (driver or {}).get("spec", {}).get("containers") or ()
                if (v := dra_slices.driver_version_of(str(c.get("image", ""))))
            ),
            dra_slices.DEFAULT_DRIVER_VERSION,
        )
        wanted = dra_slices.devices(
            name,
            str(annotations.get(SIMULATED_PRODUCT, DEFAULT_PRODUCT)),
            int(annotations.get(SIMULATED_GPUS, "0")),
            _mig_devices(annotations),
            version,
        )
        if self._publish(name, str(metadata.get("uid", "")), slices, wanted, dra_slices.DRIVER):
            logger.info(
                "node %s: DRA kubelet plugin publishes %d device(s), driver %s", name, len(wanted), version
            )

    def _compute_domains(
        self, name: str, node: Mapping[str, Any], pods: list[dict[str, Any]], slices: list[dict[str, Any]]
    ) -> None:
        """SIMULATION of NVIDIA's compute-domain kubelet plugin on this node (dra_slices.py): while
        a Ready DRA kubelet plugin pod has its `compute-domains` container, the node's one slice of
        compute-domain.nvidia.com (IMEX channel 0, the daemon); deleted when it goes."""
        running = any(
            _app(p) == DRA_PLUGIN_APP
            and p["spec"].get("nodeName") == name
            and _ready(p)
            and any(c.get("name") == COMPUTE_DOMAINS_CONTAINER for c in p["spec"].get("containers") or ())
            for p in pods
        )
        if not running:
            for gone in slices:
                self._write(self.resource.delete_resource_slice, gone["metadata"]["name"])
                logger.info(
                    "node %s: compute-domain plugin gone, ResourceSlice %s deleted",
                    name,
                    gone["metadata"]["name"],
                )
            return
        wanted = dra_slices.compute_domain_devices()
        uid = str(node["metadata"].get("uid", ""))
        if self._publish(name, uid, slices, wanted, dra_slices.COMPUTE_DOMAIN_DRIVER):
            logger.info("node %s: compute-domain plugin publishes %d device(s)", name, len(wanted))

    def _publish(
        self,
        name: str,
        node_uid: str,
        slices: list[dict[str, Any]],
        wanted: list[dict[str, Any]],
        driver: str,
    ) -> bool:
        """The node's one slice of `driver` holds `wanted`; whether it was written."""
        if len(slices) == 1 and slices[0]["spec"].get("devices") == wanted:
            return False
        generation = 1 + max(
            (int((s["spec"].get("pool") or {}).get("generation", 0)) for s in slices), default=0
        )
        if len(slices) == 1:
            # NB: as the plugin's slice controller: the devices replaced, the pool's generation bumped.
            body = {
                "spec": {
                    "devices": wanted,
                    "pool": {"name": name, "generation": generation, "resourceSliceCount": 1},
                }
            }
            self._write(self.resource.patch_resource_slice, slices[0]["metadata"]["name"], body)
        else:
            for extra in slices:
                self._write(self.resource.delete_resource_slice, extra["metadata"]["name"])
            body = dra_slices.resource_slice(name, node_uid, wanted, generation, driver)
            self._write(self.resource.create_resource_slice, body)
        return True

    def _mig(self, name: str, node: Mapping[str, Any], pods: list[dict[str, Any]]) -> None:
        """SIMULATION: one step of the MIG manager's protocol on this node (module docstring);
        `pods`: the operand pods on this node."""
        metadata = node["metadata"]
        node_labels = metadata.get("labels") or {}
        annotations = metadata.get("annotations") or {}
        wanted = node_labels.get(labels.MIG_CONFIG, "")
        manager = next(
            (
                p
                for p in pods
                if p["spec"].get("nodeName") == name
                and _app(p) == operand_catalog.MIG_MANAGER.app
                and _ready(p)
            ),
            None,
        )
        paused = annotations.get(MIG_PAUSED)
        if manager is None or not wanted:
            # No MIG manager runs here (or nothing asked of it): nothing happens.
            return
        if paused is None and annotations.get(MIG_DONE) == wanted:
            # Already acted on this config.
            return
        namespace = str(manager["metadata"]["namespace"])
        product = str(annotations.get(SIMULATED_PRODUCT, DEFAULT_PRODUCT))
        family = mig_catalog.family_of_product(product)
        gpus = int(annotations.get(SIMULATED_GPUS, "0"))
        try:
            document = self._mig_config(manager)
            devices = mig_planning.mig_devices(document, wanted, family.device_ids[0] if family else "", gpus)
            mig_on = _mig_enabled(document, wanted)
            if family is None and mig_on:
                raise mig_planning.MigConfigError(f"{product} does not support MIG")
        except mig_planning.MigConfigError as error:
            logger.info("node %s: MIG config %s cannot be applied: %s", name, wanted, error)
            self._mig_finish(name, wanted, paused, mig_planning.MigConfigState.FAILED, None)
            return
        applied = _mig_devices(annotations)
        if paused is None:
            if (applied is not None) == mig_on and (applied or {}) == devices:
                # mig-parted's assert: the GPUs are already so; nothing to pause.
                self._mig_finish(name, wanted, None, mig_planning.MigConfigState.SUCCESS, None)
                return
            # Pending: pause the GPU clients (an admin's "false" is honoured and kept).
            found = {o.deploy_label: node_labels.get(o.deploy_label, "") for o in MIG_PAUSED_OPERANDS}
            patch: dict[str, Any] = {
                "labels": {
                    labels.MIG_CONFIG_STATE: mig_planning.MigConfigState.PENDING.value,
                    **{key: labels.PAUSED_FOR_MIG_CHANGE for key, value in found.items() if value != "false"},
                },
                "annotations": {MIG_PAUSED: json.dumps(found, sort_keys=True)},
            }
            self._write(self.core.patch_node, name, {"metadata": patch})
            logger.info("node %s: MIG config %s pending, GPU clients paused", name, wanted)
            return
        paused_apps = {o.app for o in MIG_PAUSED_OPERANDS}
        if any(
            p["spec"].get("nodeName") == name
            and p["metadata"]["namespace"] == namespace
            and _app(p) in paused_apps
            for p in pods
        ):
            # Waiting for the GPU clients' pods to be gone (`kubectl wait --for=delete`).
            return
        if annotations.get(MIG_FAIL) == "true":
            logger.info("node %s: MIG config %s fails (simulated failure)", name, wanted)
            self._mig_finish(name, wanted, paused, mig_planning.MigConfigState.FAILED, None)
            return
        self._mig_finish(
            name, wanted, paused, mig_planning.MigConfigState.SUCCESS, json.dumps(devices) if mig_on else ""
        )
        # NVIDIA's manager restarts the validator pod on the node: the stack is validated again.
        for pod in pods:
            if (
                pod["spec"].get("nodeName") == name
                and pod["metadata"]["namespace"] == namespace
                and _app(pod) == operand_catalog.OPERATOR_VALIDATOR.app
            ):
                try:
                    self._write(self.core.delete_namespaced_pod, pod["metadata"]["name"], namespace)
                except kubernetes.client.ApiException as error:
                    if error.status != 404:
                        raise

    def _mig_finish(
        self,
        name: str,
        wanted: str,
        paused: str | None,
        state: mig_planning.MigConfigState,
        devices: str | None,
    ) -> None:
        """One patch: the state, the paused labels restored, the geometry ("" MIG off, None unchanged)."""
        restored: dict[str, str] = {}
        for key, value in (json.loads(paused) if paused else {}).items():
            # Back to "true" unless it was "false" (mig-parted's maybe_set_true).
            restored[key] = "false" if value == "false" else "true"
        annotations: dict[str, str | None] = {MIG_DONE: wanted, MIG_PAUSED: None}
        if devices is not None:
            annotations[MIG_DEVICES] = devices or None
        patch = {"labels": {labels.MIG_CONFIG_STATE: state.value, **restored}, "annotations": annotations}
        self._write(self.core.patch_node, name, {"metadata": patch})
        logger.info("node %s: MIG config %s %s", name, wanted, state.value)

    def _mig_config(self, pod: Mapping[str, Any]) -> Any:
        """The mig-parted config file the MIG manager pod reads (None when there is none)."""
        config_map = _volume_config_map(pod, "mig-parted-config")
        key = (_env_of(pod, "CONFIG_FILE") or mig_catalog.CONFIG_KEY).rsplit("/", 1)[-1]
        if not config_map:
            return None
        return self._config_file(pod, config_map, key)

    def _config_file(self, pod: Mapping[str, Any], config_map: str, key: str) -> Any:
        """The YAML file `key` of ConfigMap `config_map` in the pod's namespace (None: no such file)."""
        where = (str(pod["metadata"]["namespace"]), config_map)
        mirrored = self.config_maps.get(*where)
        if mirrored is not None:
            self._config_maps[where] = mirrored.get("data") or {}
        elif where not in self._config_maps:
            # NB: not in the mirror (yet): a ConfigMap created a moment ago may not have come
            # through the watch; a GET tells "absent" from "not seen yet".
            try:
                found = self.core.read_namespaced_config_map(
                    config_map, where[0], _request_timeout=REQUEST_TIMEOUT
                )
                self._config_maps[where] = found.data or {}
            except kubernetes.client.ApiException:
                self._config_maps[where] = None
        data = self._config_maps[where]
        if data is None:
            return None
        text = data.get(key)
        return _parsed(text) if text else None

    def _plugin_config(self, pod: Mapping[str, Any], node_labels: Mapping[str, str]) -> dict[str, Any] | None:
        """The config the plugin on this node runs with, as its config-manager would pick it."""
        spec = pod["spec"]
        config_map = _volume_config_map(pod, "available-configs")
        default = next(
            (
                str(e.get("value", ""))
                for c in spec.get("containers") or ()
                if c.get("name") == "config-manager"
                for e in c.get("env") or ()
                if e.get("name") == "DEFAULT_CONFIG"
            ),
            "",
        )
        key = node_labels.get(PLUGIN_CONFIG_LABEL) or default
        if not config_map or not key:
            return None
        loaded = self._config_file(pod, config_map, key)
        return loaded if isinstance(loaded, dict) else None


@functools.lru_cache(maxsize=32)
def _parsed(text: str) -> Any:
    """A config file's YAML, parsed once per text (the same file serves every node; read-only)."""
    return yaml.safe_load(text)


def _mig_devices(annotations: Mapping[str, str]) -> dict[str, int] | None:
    """The MIG devices the simulated GPUs have; None when MIG mode is off."""
    text = annotations.get(MIG_DEVICES)
    if text is None:
        return None
    loaded = json.loads(text)
    return {str(k): int(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def _mig_enabled(document: Any, name: str) -> bool:
    """Config `name` turns MIG mode on (any entry with mig-enabled)."""
    entries = ((document or {}).get("mig-configs") or {}).get(name) or ()
    return any(isinstance(e, Mapping) and e.get("mig-enabled") for e in entries)


def _volume_config_map(pod: Mapping[str, Any], volume: str) -> str | None:
    """The ConfigMap the pod's volume `volume` mounts (None: no such volume or not a ConfigMap)."""
    return next(
        (
            (v.get("configMap") or {}).get("name")
            for v in pod["spec"].get("volumes") or ()
            if v.get("name") == volume
        ),
        None,
    )


def _env_of(pod: Mapping[str, Any] | None, name: str) -> str:
    """The value of env `name` in the pod's first container ("" when absent)."""
    if pod is None:
        return ""
    containers = pod["spec"].get("containers") or ()
    for item in (containers[0].get("env") or ()) if containers else ():
        if item.get("name") == name:
            return str(item.get("value", ""))
    return ""


def _is_gfd_label(key: str) -> bool:
    return (
        key in GFD_LABELS
        or key in GFD_SHARING_LABELS
        or (key.startswith(_MIG_COUNT_PREFIX) and key.endswith(_MIG_COUNT_SUFFIX))
    )


def _refused(config: Mapping[str, Any], mig_strategy: str) -> bool:
    """NVIDIA's parser (k8s-device-plugin's api/config/v1, which GFD, the plugin and the MPS
    daemon share) refuses this config: ocp-gpu's own check, which tests/unit/
    test_plugin_config_upstream.py holds to that parser's verdicts."""
    text = yaml.safe_dump(dict(config))
    return config_maps.plugin_config_problem("", {"config": text}, mig_strategy or "none") is not None


def sharing_strategy(config: Mapping[str, Any] | None) -> str:
    """The plugin config's sharing strategy, as k8s-device-plugin's api/config/v1 `SharingStrategy`
    decides it: mps when `sharing.mps` replicates a resource (replicas > 1), else time-slicing
    when `sharing.timeSlicing` does, else none."""
    sharing = (config or {}).get("sharing") or {}
    for key, strategy in (("mps", "mps"), ("timeSlicing", "time-slicing")):
        entries = (sharing.get(key) or {}).get("resources") or ()
        if any(isinstance(e, Mapping) and int(e.get("replicas", 0) or 0) > 1 for e in entries):
            return strategy
    return "none"


def plugin_instance(pod: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """One run of the device plugin: its pod and the config it runs with (its config-manager
    restarts the plugin, SIGHUP, when the node's config changes)."""
    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{(pod.get('metadata') or {}).get('uid', '')}/{digest}"


def mps_started(recorded: str | None, instance: str | None, daemon_ready: bool) -> str | None:
    """SIMULATION of the device plugin's start with MPS sharing (k8s-device-plugin v0.20.0):
    the plugin instance that serves, else None.

    `instance`: the plugin on the node with an MPS config (`plugin_instance`), None without one;
    `recorded`: the instance that started before (node annotation MPS_STARTED); `daemon_ready`:
    the node's MPS control daemon pod is Ready (it has no readiness probe: Ready once its
    containers run, standing in for `mps-control-daemon` having started the daemon).

    At start the plugin asserts the daemon is healthy (internal/plugin/server.go Start ->
    mps.go waitForDaemon: `echo get_default_active_thread_percentage | nvidia-cuda-mps-control`)
    and, if not, serves nothing and retries every 30 s (cmd/nvidia-device-plugin/main.go
    startPlugins; here: at the next pass).  Once started it never checks again: a daemon that
    goes later leaves the plugin advertising its replicas until it restarts (its pod replaced,
    or a new config).
    """
    if instance is None:
        return None
    if recorded == instance or daemon_ready:
        return instance
    return None


def gfd_sharing_labels(config: Mapping[str, Any] | None, product: str, mig_enabled: bool) -> dict[str, str]:
    """SIMULATION of GFD's sharing labels for full GPUs (k8s-device-plugin v0.20.0 internal/lm:
    resource.go `baseLabeler`, nvml.go `newSharingLabeler`): `nvidia.com/gpu.replicas` (the
    replicas of the entry sharing nvidia.com/gpu, else 1), `.sharing-strategy` (the config's
    strategy when shared, else none), the product with `-SHARED` when shared and not renamed,
    and `nvidia.com/mps.capable` (true with MPS sharing on GPUs without MIG devices)."""
    strategy = sharing_strategy(config)
    sharing = (config or {}).get("sharing") or {}
    # NB: as `ReplicatedResources()`: the MPS entries whenever sharing.mps is set, else time-slicing's.
    replicated = sharing.get("mps") if sharing.get("mps") is not None else sharing.get("timeSlicing") or {}
    entry = next(
        (
            e
            for e in (replicated or {}).get("resources") or ()
            if isinstance(e, Mapping) and plugin_config.qualified(str(e.get("name", ""))) == "nvidia.com/gpu"
        ),
        None,
    )
    replicas = int(entry.get("replicas", 1)) if entry else 1
    shared = replicas > 1
    return {
        labels.GPU_REPLICAS: str(replicas),
        labels.GPU_SHARING_STRATEGY: strategy if shared else "none",
        "nvidia.com/gpu.product": f"{product}-SHARED"
        if shared and not (entry or {}).get("rename")
        else product,
        labels.MPS_CAPABLE: str(strategy == "mps" and not mig_enabled).lower(),
    }


def _gfd_labels(
    product: str, gpus: int, mig_devices: Mapping[str, int] | None, strategy: str
) -> dict[str, str]:
    """What GFD labels a node with these GPUs (and MIG devices) under this MIG strategy."""
    result = dict(
        zip(
            GFD_LABELS,
            (
                product,
                str(gpus),
                PRODUCT_MEMORY.get(product, "81920"),
                "550",
                "54",
                "15",
                "true" if mig_catalog.family_of_product(product) else "false",
                strategy or "none",
            ),
            strict=True,
        )
    )
    devices = {profile: count for profile, count in (mig_devices or {}).items() if count > 0}
    if strategy == "single" and len(devices) == 1:
        # Every GPU shows as its one MIG profile.
        ((profile, count),) = devices.items()
        result["nvidia.com/gpu.product"] = f"{product}-MIG-{profile}"
        result["nvidia.com/gpu.count"] = str(count)
        memory_gb = profile.split(".", 1)[1].split("gb", 1)[0] if "." in profile else ""
        if memory_gb.isdigit():
            result["nvidia.com/gpu.memory"] = str(int(memory_gb) * 1024)
    elif strategy == "mixed":
        for profile, count in devices.items():
            result[f"{_MIG_COUNT_PREFIX}{profile.replace('+', '.')}{_MIG_COUNT_SUFFIX}"] = str(count)
    return result


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _metadata(obj: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    return {
        key: metadata[key]
        for key in ("name", "namespace", "uid", "resourceVersion", *keys)
        if key in metadata
    }


def _trim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What a pass reads of a pod (a whole pod is ~6 KB of JSON, 15,000 of them at 5,000 nodes):
    its app and fate, node, init container names, ConfigMap volumes, containers' env, Ready."""
    spec = pod.get("spec") or {}
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return {
        "metadata": _metadata(
            pod, "labels", "annotations", "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers"
        ),
        "spec": {
            "nodeName": spec.get("nodeName", ""),
            "initContainers": [{"name": c.get("name")} for c in spec.get("initContainers") or ()],
            "volumes": [v for v in spec.get("volumes") or () if "configMap" in v],
            "containers": [
                {"name": c.get("name"), "image": c.get("image", ""), "env": c.get("env") or []}
                for c in spec.get("containers") or ()
            ],
        },
        "status": {"conditions": [c for c in conditions if c.get("type") == "Ready"]},
    }


def _trim_slice(found: Mapping[str, Any]) -> dict[str, Any]:
    """What a pass reads of a ResourceSlice: its name and spec (node, pool, devices)."""
    return {"metadata": _metadata(found), "spec": found.get("spec") or {}}


def _trim_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """What a pass reads of a node: labels, annotations and the allocatable resources."""
    return {
        "metadata": _metadata(node, "labels", "annotations"),
        "status": {"allocatable": (node.get("status") or {}).get("allocatable") or {}},
    }


def _trim_daemonset(daemonset: Mapping[str, Any]) -> dict[str, Any]:
    """What a pass reads of a DaemonSet: which app its pods are."""
    template_labels = (((daemonset.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
        "labels"
    )
    return {
        "metadata": _metadata(daemonset),
        "spec": {"template": {"metadata": {"labels": template_labels or {}}}},
    }


def _trim_config_map(config_map: Mapping[str, Any]) -> dict[str, Any]:
    return {"metadata": _metadata(config_map), "data": config_map.get("data") or {}}


def _daemonset_app(daemonset: Mapping[str, Any]) -> str:
    template_labels = (((daemonset.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
        "labels"
    ) or {}
    return operand_types.pod_app(template_labels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="SIMULATION of kubelets + NVIDIA stack on fake GPU nodes")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--interval", type=float, default=0.25)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    api = kubernetes.config.new_client_from_config(config_file=args.kubeconfig)
    stop = threading.Event()
    agent = NodeAgent(api, stop)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    agent.start()
    while not stop.is_set():
        # A pass when a watch brought a change (or, as a safety net, every RESYNC s).
        agent.changed.wait(RESYNC)
        agent.changed.clear()
        began, cpu_began = time.monotonic(), time.process_time()
        seen = opened = 0
        try:
            seen, opened = agent.run_once()
        except Exception:  # the agent outlives a failed pass (the apiserver restarting, a race)
            logger.exception("pass failed")
        wall, cpu = time.monotonic() - began, time.process_time() - cpu_began
        wait = pass_wait(args.interval, cpu)
        if opened or wall > SLOW_PASS:
            # One line per pass that did something or took long: a stalled simulation shows here.
            logger.info(
                "pass: %d operand pods, %d made Ready, %.1f s (CPU %.1f s); next in %.1f s at the soonest",
                seen,
                opened,
                wall,
                cpu,
                wait,
            )
        stop.wait(wait)
    return 0


def pass_wait(interval: float, pass_cpu_s: float) -> float:
    """Seconds to wait before the next pass, given the CPU seconds the last one used.

    Twice the pass's CPU keeps the simulation's share of a two-core machine to about a third.
    NB: CPU, not wall time, and capped: at 1,000 nodes a pass of ~5,000 pod patches against a
    busy apiserver took minutes of mostly waiting, and twice that wall time left the agent
    silent for ten more minutes while 239 nodes' validators stayed Pending (2026-11-24 08:52).
    """
    return min(MAX_PASS_WAIT, max(interval, 2 * pass_cpu_s))


if __name__ == "__main__":
    raise SystemExit(main())

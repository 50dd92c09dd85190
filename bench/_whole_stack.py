"""``compare_nvidia.py --whole-stack``: both operators on NVIDIA's OperatorHub example policy.

The team's tool (``../shared/tools/compare_nvidia.py``) asks both operators for the driver and the
container toolkit alone.  This module changes it, in the tool's process (``_tree_tool.py
--whole-stack`` installs it, as it installs its CPU and RSS readers), so that both are asked for
the whole stack, as an admin who installs from OperatorHub is:

- the ClusterPolicy's spec is NVIDIA's OperatorHub example (the ``alm-examples`` of the CSV in
  ``$NVIDIA_SRC``: every operand on, ``autoUpgrade: true``, the DaemonSets' ``maxUnavailable: 1``),
  for both operators;
- ocp-gpu starts with the release's images, as its CSV sets them (the example names no image;
  the tool starts NVIDIA's operator with its CSV's ``RELATED_IMAGE_*`` env);
- ocp-gpu gets every CRD it ships and the OpenShift CRDs (SCC, ServiceMonitor, PrometheusRule) the
  tool gives NVIDIA's operator only: the example turns on the DCGM exporter's ServiceMonitor;
- after the ClusterPolicy is created, the tool's settle first waits until every operand pod is
  Ready on every GPU node (``whole_stack_ready``), reading the DaemonSets once a second: the
  result has ``policy_to_every_operand_ready_s`` and, per operand, the second it got there
  (``operand_ready_s``).  The CPU the tool counts from the ClusterPolicy to settled then covers
  the whole stack's start-up.

The operands' pods are readied by the harness's node agent, a SIMULATION of kubelets and the
NVIDIA stack (ocp_gpu_harness/node_agent.py): the seconds are the operators' and the API
server's, not a real node's image pulls and driver builds.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml

DRIVER = "driver"
DRIVER_DAEMONSET_PREFIX = "nvidia-driver-daemonset"
# The operands NVIDIA's example puts on every GPU node (NVIDIA's DaemonSet names, which ocp-gpu
# renders too); the MIG manager runs on MIG-capable nodes only, the MPS control daemon on nodes
# whose sharing config asks for MPS.
EVERY_NODE = frozenset(
    {
        DRIVER,
        "nvidia-container-toolkit-daemonset",
        "nvidia-device-plugin-daemonset",
        "gpu-feature-discovery",
        "nvidia-dcgm",
        "nvidia-dcgm-exporter",
        "nvidia-operator-validator",
        "nvidia-node-status-exporter",
    }
)
OSTREE = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"


@dataclasses.dataclass(frozen=True)
class Rollout:
    """A DaemonSet's counts, or an operand's summed over its DaemonSets."""

    desired: int
    ready: int
    updated: int

    def __add__(self, other: Rollout) -> Rollout:
        return Rollout(self.desired + other.desired, self.ready + other.ready, self.updated + other.updated)

    @property
    def done(self) -> bool:
        return self.ready == self.desired and self.updated == self.desired


def operand_of(daemonset: str) -> str:
    """The driver's DaemonSets (one per RHCOS version or OS) are one operand; every other is its own."""
    return DRIVER if daemonset.startswith(DRIVER_DAEMONSET_PREFIX) else daemonset


def by_operand(rollouts: Mapping[str, Rollout]) -> dict[str, Rollout]:
    summed: dict[str, Rollout] = {}
    for name, rollout in rollouts.items():
        operand = operand_of(name)
        summed[operand] = summed[operand] + rollout if operand in summed else rollout
    return summed


def ready_operands(rollouts: Mapping[str, Rollout], gpu_nodes: int) -> set[str]:
    """The operands with a Ready pod of the current template on every node they are meant for:
    each of EVERY_NODE on all `gpu_nodes`; any other on each node it is scheduled to (at least one:
    an operand with no pod, e.g. the MIG manager without MIG-capable nodes, is not counted)."""
    return {
        operand
        for operand, rollout in by_operand(rollouts).items()
        if rollout.done and (rollout.desired == gpu_nodes if operand in EVERY_NODE else rollout.desired > 0)
    }


def whole_stack_ready(rollouts: Mapping[str, Rollout], gpu_nodes: int) -> bool:
    """Every operand pod Ready on every GPU node: all of EVERY_NODE there, and no other operand
    with a pod still to come or not Ready."""
    summed = by_operand(rollouts)
    ready = ready_operands(rollouts, gpu_nodes)
    pending = {operand for operand, rollout in summed.items() if rollout.desired and operand not in ready}
    return ready >= EVERY_NODE and not pending


def rollouts_of(daemonsets: Iterable[Mapping[str, Any]]) -> dict[str, Rollout]:
    """The counts of DaemonSets as the API returns them (JSON)."""
    return {
        ds["metadata"]["name"]: Rollout(
            desired=(ds.get("status") or {}).get("desiredNumberScheduled", 0),
            ready=(ds.get("status") or {}).get("numberReady", 0),
            updated=(ds.get("status") or {}).get("updatedNumberScheduled", 0),
        )
        for ds in daemonsets
    }


@dataclasses.dataclass
class Run:
    """What one operator's run has measured here (reset at each run of the tool)."""

    policy_created_at: float | None = None
    api: kubernetes.client.ApiClient | None = None
    measured: dict[str, Any] = dataclasses.field(default_factory=dict)


def wait_every_operand_ready(
    api: kubernetes.client.ApiClient, namespace: str, since: float
) -> dict[str, Any]:
    """Reads the GPU nodes once, then the DaemonSets once a second until `whole_stack_ready` (or
    600 s plus 0.6 s a GPU node); the seconds from `since` (the ClusterPolicy's creation) to it, and
    to each operand's readiness."""
    core, apps = kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api)
    gpu_nodes = len(core.list_node(label_selector=OSTREE).items)
    timeout = 600 + 0.6 * gpu_nodes
    operand_ready_s: dict[str, float] = {}
    last: dict[str, Rollout] = {}
    while time.monotonic() - since < timeout:
        try:
            raw = apps.list_namespaced_daemon_set(namespace, _preload_content=False).data
            last = rollouts_of(json.loads(raw)["items"])
        except kubernetes.client.ApiException:  # NB: an overloaded API server: "not yet"
            time.sleep(1)
            continue
        now = round(time.monotonic() - since, 1)
        for operand in ready_operands(last, gpu_nodes):
            operand_ready_s.setdefault(operand, now)
        if whole_stack_ready(last, gpu_nodes):
            return {
                "policy_to_every_operand_ready_s": now,
                "operand_ready_s": dict(sorted(operand_ready_s.items(), key=lambda kv: kv[1])),
                "gpu_nodes": gpu_nodes,
                "operand_pods_ready": sum(r.ready for r in last.values()),
            }
        time.sleep(1)
    return {
        "policy_to_every_operand_ready_s": None,
        "operand_ready_s": operand_ready_s,
        "gpu_nodes": gpu_nodes,
        "operands_not_ready": {
            operand: dataclasses.asdict(rollout)
            for operand, rollout in by_operand(last).items()
            if operand not in ready_operands(last, gpu_nodes)
        },
    }


def install(tool: Any, image_env: Mapping[str, str], operator_process: Callable[..., Any]) -> None:
    """Changes the tool's module `tool` (its globals, looked up at each call; Any: the tool is a
    script loaded by path, with no types) as the module's docstring says."""
    example = yaml.safe_load(
        (tool.NV_SRC / "bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml").read_text()
    )
    policy = next(
        doc
        for doc in yaml.safe_load(example["metadata"]["annotations"]["alm-examples"])
        if doc["kind"] == "ClusterPolicy"
    )
    tool.SPEC = policy["spec"]
    tool.OperatorProcess = functools.partial(operator_process, image_env=dict(image_env))
    run = Run()

    install_crds = tool.install_crds

    def every_crd(api: kubernetes.client.ApiClient, which: str, openshift_extras: bool) -> list[str]:
        if which == "nvidia":
            names: list[str] = install_crds(api, which, openshift_extras)
            return names
        ext = kubernetes.client.ApiextensionsV1Api(api)
        docs = [
            yaml.safe_load(path.read_text())
            for path in sorted(Path(tool.OCP_SRC, "ocp_gpu", "crds").glob("*.yaml"))
        ]
        docs += tool.extra_crds()
        for doc in docs:
            ext.create_custom_resource_definition(doc)
        names = [doc["metadata"]["name"] for doc in docs]
        tool.wait_established(api, names)
        return names

    tool.install_crds = every_crd

    create = kubernetes.client.CustomObjectsApi.create_cluster_custom_object

    def created(
        self: kubernetes.client.CustomObjectsApi, group: str, version: str, plural: str, body: Any, **kw: Any
    ) -> Any:
        if plural == "clusterpolicies":
            run.policy_created_at, run.api = time.monotonic(), self.api_client
        return create(self, group, version, plural, body, **kw)

    kubernetes.client.CustomObjectsApi.create_cluster_custom_object = created

    wait_quiet = tool.wait_quiet

    def operands_then_quiet(op: Any, audit: Any, quiet_for: float, timeout: float) -> tuple[bool, float]:
        # NB: the first wait after the ClusterPolicy's creation is the tool's settle
        if run.policy_created_at is not None and not run.measured and run.api is not None:
            run.measured = wait_every_operand_ready(run.api, tool.NS, run.policy_created_at)
            tool.log(f"every operand Ready on every GPU node: {run.measured}")
        result: tuple[bool, float] = wait_quiet(op, audit, quiet_for, timeout)
        return result

    tool.wait_quiet = operands_then_quiet

    run_one = tool.run_one

    def measured_run(which: str, count: int, args: Any) -> dict[str, Any]:
        run.policy_created_at, run.api, run.measured = None, None, {}
        result: dict[str, Any] = run_one(which, count, args)
        return result | {"whole_stack": True, **run.measured}

    tool.run_one = measured_run

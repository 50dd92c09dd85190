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
    device plugin, GFD, DCGM, DCGM exporter <- toolkit-ready (a Ready toolkit pod on the node);
    validator <- driver-ready, toolkit-ready and, where a device plugin should run,
    plugin-ready (a Ready plugin pod: the plugin validation requests a GPU).
  An operand whose DaemonSet does not exist in that namespace, or that is not to run
  on the node (its deploy label is not "true"), counts as present on the host (e.g.
  `driver.enabled: false`: a preinstalled driver).  A pod given
  another fate by a test (`nodes.set_pod_fate`) is left alone.
- **GPUs become allocatable when the device plugin is Ready.**  For nodes that carry
  `SIMULATED_GPUS` (the number of physical GPUs, set by `nodes.gpu_node(...,
  simulated=True)`), the agent sets the node's `nvidia.com/*` capacity and allocatable
  to what the plugin would advertise: the config the operator rendered (the ConfigMap
  mounted as the pod's `available-configs` volume, the key named by the node's
  `nvidia.com/device-plugin.config` label or the config-manager's DEFAULT_CONFIG),
  through `planning.plugin_config.advertised_resources`.  No Ready plugin pod: none.
- **GFD labels.**  A Ready GFD pod on such a node: `nvidia.com/gpu.product`,
  `.count`, `.memory`, `nvidia.com/cuda.driver.major/minor/rev`; removed when it goes.

It polls (every `--interval` seconds, or twice as long as a pass took) rather than
watching: simple, and cheap at the node counts tests use.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from collections.abc import Mapping
from typing import Any, Final

import kubernetes
import yaml
from kubernetes.client import ApiClient

from ocp_gpu.harness import nodes as nodes_mod
from ocp_gpu.harness import stages
from ocp_gpu.model import labels, operands
from ocp_gpu.planning import plugin_config

logger = logging.getLogger("ocp_gpu.harness.node_agent")

SIMULATED_GPUS: Final = nodes_mod.SIMULATED_GPUS
SIMULATED_PRODUCT: Final = nodes_mod.SIMULATED_PRODUCT
DEFAULT_PRODUCT: Final = "NVIDIA-A100-SXM4-80GB"
# GFD labels the agent writes, with the values a driver 550.54.15 on an A100 80GB would give.
GFD_LABELS: Final = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)
RESOURCE_PREFIX: Final = "nvidia.com/"
PLUGIN_CONFIG_LABEL: Final = "nvidia.com/device-plugin.config"
# The operand pods whose readiness waits for a marker (their init containers would).
GATED_APPS: Final = stages.GATED_APPS
_APPS_SELECTOR: Final = f"{labels.APP} in ({','.join(operands.POD_APPS)})"


def _ready(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def _app(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(labels.APP, ""))


class NodeAgent:
    """One pass reads operand pods, DaemonSets and simulated nodes, then writes what differs."""

    def __init__(self, api_client: ApiClient) -> None:
        self.api = api_client
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.apps = kubernetes.client.AppsV1Api(api_client)

    def _list(self, call: Any, **kwargs: Any) -> list[dict[str, Any]]:
        result = call(_preload_content=False, **kwargs)
        return list(json.loads(result.data).get("items") or [])

    def run_once(self) -> None:
        pods = self._list(self.core.list_pod_for_all_namespaces, label_selector=_APPS_SELECTOR)
        daemonsets = self._list(
            self.apps.list_daemon_set_for_all_namespaces,
            label_selector=f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}",
        )
        nodes = {
            str(n["metadata"]["name"]): n
            for n in self._list(self.core.list_node, label_selector=f"{labels.NFD_NVIDIA_PCI}=true")
        }
        deployed = {(str(d["metadata"]["namespace"]), _daemonset_app(d)) for d in daemonsets}
        ready: set[tuple[str, str, str]] = set()  # (namespace, node, app)
        for pod in pods:
            if _ready(pod):
                ready.add(
                    (str(pod["metadata"]["namespace"]), str(pod["spec"].get("nodeName", "")), _app(pod))
                )

        def present(namespace: str, node: str, operand: operands.Operand) -> bool:
            """The operand's marker would exist on the node: its pod is Ready there, or it is not
            ours to run there (not deployed, or the node not labelled for it): the host has it."""
            node_labels = ((nodes.get(node) or {}).get("metadata") or {}).get("labels") or {}
            return (
                (namespace, node, operand.app) in ready
                or (namespace, operand.app) not in deployed
                or node_labels.get(operand.deploy_label) != "true"
            )

        for pod in pods:
            self._gate(pod, nodes, present)
        for name, node in nodes.items():
            if SIMULATED_GPUS in (node["metadata"].get("annotations") or {}):
                self._node(name, node, pods)

    def _gate(self, pod: Mapping[str, Any], nodes: Mapping[str, Any], present: Any) -> None:
        metadata = pod["metadata"]
        app, node = _app(pod), str(pod["spec"].get("nodeName", ""))
        if app not in GATED_APPS or not node or metadata.get("deletionTimestamp"):
            return
        if stages.FATE_ANNOTATION in (metadata.get("annotations") or {}):
            # Ready already, or a test chose its fate.
            return
        namespace = str(metadata["namespace"])
        driver_ready = present(namespace, node, operands.DRIVER)
        toolkit_ready = driver_ready and present(namespace, node, operands.CONTAINER_TOOLKIT)
        if app == operands.CONTAINER_TOOLKIT.app:
            gate = driver_ready
        elif app == operands.OPERATOR_VALIDATOR.app:
            gate = toolkit_ready and present(namespace, node, operands.DEVICE_PLUGIN)
        else:
            gate = toolkit_ready
        if gate:
            self.core.patch_namespaced_pod(
                metadata["name"],
                namespace,
                {"metadata": {"annotations": {stages.FATE_ANNOTATION: stages.FATE_READY}}},
            )
            logger.info("%s/%s on %s: its markers exist, Ready", namespace, metadata["name"], node)

    def _node(self, name: str, node: Mapping[str, Any], pods: list[dict[str, Any]]) -> None:
        metadata = node["metadata"]
        annotations = metadata.get("annotations") or {}
        gpus = int(annotations.get(SIMULATED_GPUS, "0"))
        on_node = [p for p in pods if p["spec"].get("nodeName") == name and _ready(p)]
        plugin = next((p for p in on_node if _app(p) == operands.DEVICE_PLUGIN.app), None)
        wanted: dict[str, int] = {}
        if plugin is not None:
            config = self._plugin_config(plugin, metadata.get("labels") or {})
            if config is not None:
                wanted = plugin_config.advertised_resources(config, gpus, {})
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
            self.core.patch_node_status(name, body)
            logger.info("node %s: device plugin advertises %s", name, wanted or "nothing")
        gfd = any(_app(p) == operands.GPU_FEATURE_DISCOVERY.app for p in on_node)
        node_labels = metadata.get("labels") or {}
        product = str(annotations.get(SIMULATED_PRODUCT, DEFAULT_PRODUCT))
        wanted_labels = (
            dict(zip(GFD_LABELS, (product, str(gpus), "81920", "550", "54", "15"), strict=True))
            if gfd
            else {}
        )
        have = {key: node_labels[key] for key in GFD_LABELS if key in node_labels}
        if have != wanted_labels:
            patch: dict[str, str | None] = dict.fromkeys(have)
            patch.update(wanted_labels)
            self.core.patch_node(name, {"metadata": {"labels": patch}})
            logger.info("node %s: GFD labels %s", name, wanted_labels or "removed")

    def _plugin_config(self, pod: Mapping[str, Any], node_labels: Mapping[str, str]) -> dict[str, Any] | None:
        """The config the plugin on this node runs with, as its config-manager would pick it."""
        spec = pod["spec"]
        config_map = next(
            (
                (v.get("configMap") or {}).get("name")
                for v in spec.get("volumes") or ()
                if v.get("name") == "available-configs"
            ),
            None,
        )
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
        try:
            data = self.core.read_namespaced_config_map(config_map, pod["metadata"]["namespace"]).data or {}
        except kubernetes.client.ApiException:
            return None
        text = data.get(key)
        loaded = yaml.safe_load(text) if text else None
        return loaded if isinstance(loaded, dict) else None


def _daemonset_app(daemonset: Mapping[str, Any]) -> str:
    template_labels = (((daemonset.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
        "labels"
    ) or {}
    return str(template_labels.get(labels.APP, ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="SIMULATION of kubelets + NVIDIA stack on fake GPU nodes")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    api = kubernetes.config.new_client_from_config(config_file=args.kubeconfig)
    agent = NodeAgent(api)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.is_set():
        began = time.monotonic()
        try:
            agent.run_once()
        except Exception:  # the agent outlives a failed pass (the apiserver restarting, a race)
            logger.exception("pass failed")
        # NB: at thousands of nodes a pass (three lists) takes long; waiting twice as long keeps
        # the simulation's share of a two-core machine, and of the apiserver, to about a third.
        stop.wait(max(args.interval, 2 * (time.monotonic() - began)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

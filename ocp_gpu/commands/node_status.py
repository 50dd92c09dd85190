"""ocp-gpu node-status: the node status exporter (nvidia-node-status-exporter), NVIDIA's node gauges.

Runs on one GPU node (`--node`, default $NODE_NAME) and serves on `--bind` (default
0.0.0.0:8000) `/metrics` with NVIDIA's gpu_operator_node_* gauges: which validation
markers exist in `--validations-dir` (driver, toolkit, cuda, plugin ready), how many
`nvidia.com/*` devices the node advertises (the device plugin's work; -1 when the node
cannot be read), and how many NVIDIA PCI devices `--sys-root`/bus/pci/devices lists.
It looks again every `--interval` seconds.  Decisions: planning/operands/node_status_gauges.py.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from prometheus_client import start_http_server

from ocp_gpu import metrics
from ocp_gpu.kube import clients, inspecting
from ocp_gpu.planning.operands import node_status_gauges
from ocp_gpu.planning.operands.validation import MARKERS

DEFAULT_PORT: Final = 8000
log = logging.getLogger("ocp_gpu.node_status")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--node", default=os.environ.get("NODE_NAME", ""), help="this node's name ($NODE_NAME)"
    )
    parser.add_argument("--validations-dir", type=Path, default=Path("/run/nvidia/validations"))
    parser.add_argument("--sys-root", type=Path, default=Path("/sys"), help="where sysfs is mounted")
    parser.add_argument("--bind", default=f"0.0.0.0:{DEFAULT_PORT}", help="address:port of /metrics")
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between looks")
    parser.add_argument("--kubeconfig", type=Path, default=None, help="default: in-cluster")
    parser.add_argument("--once", action="store_true", help="look once, print the metrics and exit")


def look(args: argparse.Namespace, api_client: Any) -> node_status_gauges.NodeLook:
    """One look at the node: markers, allocatable, PCI vendors; a failed part is None."""
    present = [name for name in MARKERS.values() if (args.validations_dir / name).exists()]
    try:
        allocatable: dict[str, str] | None = inspecting.read_node_allocatable(api_client, args.node)
    except Exception as error:  # a read error is a value (-1), never a crash
        log.warning("could not read node %s: %s", args.node, error)
        allocatable = None
    try:
        devices = sorted((args.sys_root / "bus" / "pci" / "devices").iterdir())
        vendors: list[str] | None = [
            (device / "vendor").read_text() for device in devices if (device / "vendor").is_file()
        ]
    except OSError as error:
        log.warning("could not list PCI devices under %s: %s", args.sys_root, error)
        vendors = None
    return node_status_gauges.NodeLook(markers=present, allocatable=allocatable, pci_vendors=vendors)


def record(node: str, status: node_status_gauges.NodeStatus, now: float) -> None:
    metrics.node_driver_ready.labels(node).set(status.driver_ready)
    metrics.node_toolkit_ready.labels(node).set(status.toolkit_ready)
    metrics.node_cuda_ready.labels(node).set(status.cuda_ready)
    metrics.node_plugin_ready.labels(node).set(status.plugin_ready)
    metrics.node_device_plugin_devices.labels(node).set(status.device_plugin_devices)
    metrics.node_nvidia_pci_devices.labels(node).set(status.nvidia_pci_devices)
    if status.device_plugin_devices > 0:
        metrics.node_device_plugin_last_success.labels(node).set(now)
    else:
        # NB: present from the start (0 = never), so the series exists for alerts on staleness.
        metrics.node_device_plugin_last_success.labels(node)


def run(args: argparse.Namespace, stop: threading.Event, sleep: Callable[[float], bool] | None = None) -> int:
    if not args.node:
        log.error("no node name: pass --node or set NODE_NAME (the downward API's spec.nodeName)")
        return 2
    api_client = clients.load_api_client(args.kubeconfig)
    metrics.node_metrics_ready.labels(args.node).set(time.time())
    if not args.once:
        host, _, port = str(args.bind).rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0", registry=metrics.NODE_REGISTRY)
        log.info("serving node status metrics for %s on %s/metrics", args.node, args.bind)
    wait = sleep or stop.wait
    while True:
        record(args.node, node_status_gauges.plan_node_status(look(args, api_client)), time.time())
        if args.once or wait(args.interval):
            return 0


def main(args: argparse.Namespace) -> int:
    if args.once:
        code = run(args, threading.Event())
        from prometheus_client import generate_latest

        print(generate_latest(metrics.NODE_REGISTRY).decode(), end="")
        return code
    return run(args, threading.Event())

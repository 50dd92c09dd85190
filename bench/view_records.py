"""What the Runtime's views keep per node and per operand pod, in-process, without a cluster.

At 5,000 GPU nodes with the side-by-side tool's operands (driver, container toolkit, validator)
the watches keep 5,000 NodeFacts and 15,000 operand pods' records (issue 13: idle RSS). This
decodes N kwok-like Nodes (`list_pages.kwok_node`) and 3 operand pods per node, each from its
own JSON text as a watch event would be (so every string starts as its own copy), through the
operator's readers (`kube.reading.node_facts`, `kube.pod_watch.pod_facts`), keeps the records as
the views do (node_view, pod_view), and reports the live bytes tracemalloc sees them add, per
node and per pod, with the largest allocation sites.

NB: the pods carry only what the readers read (names, labels, owner, node, container image and
statuses); a real pod's other fields are decoded and dropped, so they change the peak, not what
is kept.

Run: ``.venv/bin/python bench/view_records.py [--nodes 5000] [--top 8]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from list_pages import RHCOS, kwok_node

from ocp_gpu.kube import pod_watch, reading
from ocp_gpu.model import labels
from ocp_gpu.rendering.operands import operand_catalog

NAMESPACE = "nvidia-gpu-operator"
DRIVER_DAEMONSET = f"nvidia-driver-daemonset-{RHCOS}"


def operand_pod(app: str, daemonset: str, node: str, extra_labels: dict[str, str]) -> dict[str, Any]:
    """A Running, Ready pod of `daemonset` on `node`, with the fields the readers read."""
    container = "nvidia-driver-ctr" if app == labels.DRIVER_APP else app
    return {
        "metadata": {
            "name": f"{daemonset}-{uuid.uuid4().hex[:5]}",
            "namespace": NAMESPACE,
            "uid": str(uuid.uuid4()),
            "labels": {
                labels.APP: app,
                "controller-revision-hash": "5d8f7c9b4",
                "pod-template-generation": "1",
                **extra_labels,
            },
            "ownerReferences": [
                {"kind": "DaemonSet", "name": daemonset, "controller": True, "uid": str(uuid.uuid4())}
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": container, "image": "nvcr.io/nvidia/driver:550.90.07-rhcos4.16"}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": container, "ready": True, "restartCount": 0, "state": {"running": {}}}
            ],
        },
    }


def node_pods(node: str) -> list[dict[str, Any]]:
    """The driver, toolkit and validator pods of one node."""
    driver_labels = {
        labels.DRIVER_KEY: RHCOS,
        labels.DRIVER_STRATEGY: "dtk",
        labels.COMPONENT: labels.DRIVER_COMPONENT,
    }
    toolkit = operand_catalog.CONTAINER_TOOLKIT.app
    validator = operand_catalog.OPERATOR_VALIDATOR.app
    return [
        operand_pod(labels.DRIVER_APP, DRIVER_DAEMONSET, node, driver_labels),
        operand_pod(toolkit, toolkit, node, {}),
        operand_pod(validator, validator, node, {}),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--top", type=int, default=8, help="allocation sites shown per kind")
    args = parser.parse_args(argv)
    # Compact JSON texts, decoded one at a time below as the watches decode events.
    raw_nodes = [json.dumps(kwok_node(index), separators=(",", ":")) for index in range(args.nodes)]
    raw_pods = [
        json.dumps(body, separators=(",", ":"))
        for index in range(args.nodes)
        for body in node_pods(f"gpu-{index:05d}")
    ]
    gc.collect()
    tracemalloc.start()
    start = tracemalloc.take_snapshot()
    node_facts = {}
    for text in raw_nodes:
        facts = reading.node_facts(json.loads(text))
        node_facts[facts.name] = facts
    gc.collect()
    after_nodes = tracemalloc.take_snapshot()
    # As reconcilers/pod_view keeps them: one dict per record kind, keyed by pod name.
    kept: dict[str, dict[str, object]] = {"operand": {}, "validator": {}, "driver": {}, "pull": {}}
    for text in raw_pods:
        pod = pod_watch.pod_facts(json.loads(text))
        for kind, record in (
            ("operand", pod.operand),
            ("validator", pod.validator),
            ("driver", pod.driver),
            ("pull", pod.pull),
        ):
            if record is not None:
                kept[kind][pod.name] = record
    gc.collect()
    after_pods = tracemalloc.take_snapshot()
    for what, before, after, count in (
        ("nodes", start, after_nodes, len(node_facts)),
        ("operand pods", after_nodes, after_pods, len(raw_pods)),
    ):
        sites = after.compare_to(before, "lineno")
        added = sum(site.size_diff for site in sites)
        print(f"{count} {what}: {added / 2**20:.1f} MiB kept, {added / count:.0f} bytes each")
        for site in sites[: args.top]:
            frame = site.traceback[0]
            where = f"{frame.filename}:{frame.lineno}"
            print(f"  {site.size_diff / 2**20:7.2f} MiB {site.count_diff:7d}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

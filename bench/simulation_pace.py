"""How fast the local control plane's simulation makes N GPU nodes' operand pods Ready, no operator.

Issue 13's 5,000-node run never settled because the simulation (kwok, the node agent, the
controller manager, the scheduler) was behind, not the operator. This measures the simulation
alone: N kwok GPU nodes labelled as the operator would label them (deploy labels "true"), then
three DaemonSets created at once as the operator renders them for compare_nvidia.py's policy
(a driver, whose pods kwok makes Ready; the container toolkit and the validator, which the node
agent gates on the driver and the toolkit); the time until every pod exists, is bound and is
Ready, sampled every few seconds, and each control-plane process's CPU over that span.

Run: ``flock /tmp/ocp-gpu-bench.lock nice -n 5 .venv/bin/python bench/simulation_pace.py --nodes 1000``
(``PYTHONPATH=<another checkout>`` measures that checkout's harness: the node agent is started as
``python -m ocp_gpu_harness.node_agent`` and inherits the path).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import _common
import _proc
import kubernetes

import ocp_gpu
from ocp_gpu.model import labels, operand_types
from ocp_gpu.rendering.operands import operand_catalog
from ocp_gpu_harness import cluster, nodes

NAMESPACE: Final = "gpu-operator"
SAMPLE_S: Final = 5.0
APPS: Final = (operand_catalog.DRIVER, operand_catalog.CONTAINER_TOOLKIT, operand_catalog.OPERATOR_VALIDATOR)


def daemonset(operand: operand_types.Operand, init_containers: tuple[str, ...] = ()) -> dict[str, Any]:
    pod_labels = {labels.APP: operand.app}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": operand.app,
            "namespace": NAMESPACE,
            "labels": {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, **pod_labels},
        },
        "spec": {
            "selector": {"matchLabels": pod_labels},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "nodeSelector": {operand.deploy_label: "true"},
                    "tolerations": [{"operator": "Exists"}],
                    "initContainers": [{"name": name, "image": "busybox"} for name in init_containers],
                    "containers": [{"name": "main", "image": "busybox"}],
                },
            },
        },
    }


def count(core: kubernetes.client.CoreV1Api) -> dict[str, int]:
    pods = json.loads(
        core.list_namespaced_pod(NAMESPACE, _preload_content=False, _request_timeout=(10, 120)).data
    )["items"]
    ready = sum(
        any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (p.get("status") or {}).get("conditions") or ()
        )
        for p in pods
    )
    bound = sum(bool((p.get("spec") or {}).get("nodeName")) for p in pods)
    return {"pods": len(pods), "bound": bound, "ready": ready}


def run(count_nodes: int, timeout: float, lease_s: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "nodes": count_nodes,
        "commit": _common.git_commit(),
        "harness": str(Path(ocp_gpu.__file__).resolve().parent),
        "load_average_start": _common.load_average(),
        "node_lease_seconds": lease_s,
    }
    with cluster.LocalControlPlane(start_timeout=240, node_lease_seconds=lease_s) as cp:
        api = cp.api_client(pool_size=32)
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        deploy = {o.deploy_label: "true" for o in APPS}
        names = [f"gpu-{i:05d}" for i in range(count_nodes)]
        began = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda n: core.create_node(
                        nodes.gpu_node(n, extra_labels=deploy), _preload_content=False
                    ),
                    names,
                )
            )
        nodes.wait_nodes_ready(api, names, timeout=120 + count_nodes * 0.2)
        result["nodes_ready_s"] = round(time.monotonic() - began, 1)
        _common.log(f"{count_nodes} nodes Ready in {result['nodes_ready_s']} s")
        pids = cp.pids
        cpu0 = {name: _proc.cpu_s(pid) for name, pid in pids.items()}
        apps = kubernetes.client.AppsV1Api(api)
        t0 = time.monotonic()
        apps.create_namespaced_daemon_set(NAMESPACE, daemonset(operand_catalog.DRIVER))
        apps.create_namespaced_daemon_set(NAMESPACE, daemonset(operand_catalog.CONTAINER_TOOLKIT))
        apps.create_namespaced_daemon_set(
            NAMESPACE,
            daemonset(operand_catalog.OPERATOR_VALIDATOR, ("driver-validation", "toolkit-validation")),
        )
        want = len(APPS) * count_nodes
        samples: list[dict[str, Any]] = []
        firsts: dict[str, float] = {}
        while time.monotonic() - t0 < timeout:
            time.sleep(SAMPLE_S)
            seen = count(core)
            at = round(time.monotonic() - t0, 1)
            samples.append({"s": at, **seen})
            for key, value in seen.items():
                if value >= want and key not in firsts:
                    firsts[key] = at
            _common.log(f"{at} s: {seen}")
            if seen["ready"] >= want:
                break
        result["daemonsets_to_all_created_s"] = firsts.get("pods")
        result["daemonsets_to_all_bound_s"] = firsts.get("bound")
        result["daemonsets_to_all_ready_s"] = firsts.get("ready")
        result["pods_wanted"] = want
        result["samples"] = samples
        result["cpu_s"] = {name: round(_proc.cpu_s(pid) - cpu0[name], 1) for name, pid in pids.items()}
        result["load_average_end"] = _common.load_average()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--node-lease-seconds", type=int, default=cluster.NODE_LEASE_SECONDS)
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here (default: print only)")
    args = parser.parse_args()
    _common.stop_cleanly_on_signals()
    result = run(args.nodes, args.timeout, args.node_lease_seconds)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

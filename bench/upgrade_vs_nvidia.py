"""The same driver upgrade under NVIDIA's GPU Operator and under ocp-gpu, side by side (issue 13).

For each operator, on a fresh local control plane in OpenShift mode (the team's
``../shared/tools/compare_nvidia.py`` set-up: its CRDs, the same kwok GPU nodes on two
RHCOS versions, the operator as a local process under its own identity; NVIDIA's built as
bench/README.md says): a ClusterPolicy with the driver at version A and
``driver.upgradePolicy`` ``{autoUpgrade: true, maxParallelUpgrades: P, maxUnavailable:
100%}``; once every node has a Ready driver pod of A and the label ``upgrade-done``, the
seed's patch of ``/spec/driver/version`` to B, then the wall time until every node has a
Ready driver pod of B and ``upgrade-done`` again, the label transitions seen (node watch),
the operator's API requests in that window by verb and resource (audit log), its CPU.
No GPU workload pods (the kwok nodes advertise no schedulable GPU work for NVIDIA's
validator either way): both operators see the same, simpler upgrade than
``upgrades_at_scale.py``'s.

If an operator never labels the nodes, or never finishes, the result says where it stopped
(the states seen, the last lines of its log) instead of a number.

Run: ``.venv/bin/python bench/upgrade_vs_nvidia.py [--nodes 100] [--parallel 10]``;
results in ``bench/results/upgrade-vs-nvidia-<N>-p<P>.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import REPO, RESULTS_DIR, load_average, operator_sources

TOOL = Path(os.environ.get("COMPARE_NVIDIA_TOOL", REPO.parent / "shared" / "tools" / "compare_nvidia.py"))
STATE = "nvidia.com/gpu-driver-upgrade-state"
VERSION_A, VERSION_B = "550.90.07", "550.127.05"


def load_tool(source: Path) -> Any:
    """The team's compare_nvidia.py as a module (its set-up helpers), with ocp-gpu from `source`."""
    os.environ["OCPGPU_SRC"] = str(source)
    # NB: the tool imports the harness as `ocp_gpu.harness`, its home before it became the top-level
    # `ocp_gpu_harness`: the same modules under the old names.
    import ocp_gpu_harness
    from ocp_gpu_harness import cluster, nodes, openshift, operating

    old_names = {"": ocp_gpu_harness, ".cluster": cluster, ".nodes": nodes, ".openshift": openshift}
    for suffix, found in {**old_names, ".operating": operating}.items():
        sys.modules.setdefault(f"ocp_gpu.harness{suffix}", found)
    spec = importlib.util.spec_from_file_location("compare_nvidia_tool", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # As the tool's main() does: the harness audits writes only; log every request of the two
    # operators too, so that reads are counted (without this, reads always read 0).
    module.cluster._AUDIT_POLICY = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {"level": "Metadata", "users": [module.NV_USER, module.OCP_USER]},
            {"level": "Metadata", "verbs": sorted(module.cluster.WRITE_VERBS)},
            {"level": "None"},
        ],
    }
    return module


class NodeStates(threading.Thread):
    """Every upgrade-state label value each node took (a node watch), and its latest."""

    def __init__(self, tool: Any, api: Any) -> None:
        super().__init__(daemon=True)
        self.core = tool.kubernetes.client.CoreV1Api(api)
        self.watch = tool.kubernetes.watch.Watch()
        self.latest: dict[str, str] = {}
        self.transitions: Counter[str] = Counter()
        self.lock = threading.Lock()

    def run(self) -> None:
        try:
            self._follow()
        except Exception as error:  # the control plane stopping ends the watch
            tool_log(f"node watch ended: {error!r}")

    def _follow(self) -> None:
        for event in self.watch.stream(self.core.list_node, timeout_seconds=7200, deserialize=False):
            if event["type"] not in ("ADDED", "MODIFIED"):
                continue
            meta = event["object"].get("metadata") or {}
            state = (meta.get("labels") or {}).get(STATE, "")
            with self.lock:
                if self.latest.get(meta.get("name", "")) != state and state:
                    self.transitions[state] += 1
                self.latest[meta.get("name", "")] = state

    def count(self, state: str) -> int:
        with self.lock:
            return sum(value == state for value in self.latest.values())

    def seen(self) -> dict[str, int]:
        with self.lock:
            return dict(self.transitions)


def ready_driver_nodes(tool: Any, api: Any, version: str) -> int:
    """Nodes with a Ready, not terminating driver pod whose driver image is at `version`.

    NB: NVIDIA's Driver Toolkit pods carry app=<their DaemonSet's name>, not app=nvidia-driver-daemonset:
    both operators' carry openshift.driver-toolkit=true.
    """
    core = tool.kubernetes.client.CoreV1Api(api)
    pods = json.loads(
        core.list_namespaced_pod(
            tool.NS, label_selector="openshift.driver-toolkit=true", _preload_content=False
        ).data
    )["items"]
    nodes = set()
    for pod in pods:
        images = [c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or ()]
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or ()
        )
        if ready and not pod["metadata"].get("deletionTimestamp") and any(f":{version}" in i for i in images):
            nodes.add((pod.get("spec") or {}).get("nodeName"))
    return len(nodes)


def wait(what: str, check: Any, timeout: float) -> float | None:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if check():
            return round(time.monotonic() - began, 2)
        time.sleep(0.25)
    tool_log(f"timed out after {timeout:.0f} s: {what}")
    return None


def tool_log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run_one(
    tool: Any,
    which: str,
    count: int,
    parallel: int,
    timeout: float,
    out: Path,
    upgrade_timeout: float | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "operator": which,
        "nodes": count,
        "max_parallel_upgrades": parallel,
        "load_average_start": load_average(),
        "notes": [],
    }
    spec = json.loads(json.dumps(tool.SPEC))
    spec["driver"] = {
        "enabled": True,
        "repository": "nvcr.io/nvidia",
        "image": "driver",
        "version": VERSION_A,
        "upgradePolicy": {
            "autoUpgrade": True,
            "maxParallelUpgrades": parallel,
            "maxUnavailable": "100%",
            # NB: spelled out: NVIDIA's CRD has no defaults for these, and without podDeletion its
            # upgrade controller stops every node in pod-deletion-required ("pod deletion spec
            # should not be empty"); its Helm chart sets them. The seed's defaults, for both.
            "waitForCompletion": {"timeoutSeconds": 0},
            "podDeletion": {"force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
            "drain": {"enable": False, "force": False, "timeoutSeconds": 300, "deleteEmptyDir": False},
        },
    }
    with tool.cluster.LocalControlPlane(start_timeout=240, node_lease_seconds=40) as cp:
        api = cp.api_client(pool_size=64)
        tool.openshift.install_openshift_apis(api)
        tool.openshift.set_driver_toolkit_tags(
            api, {v: tool.DTK_REPO + f"{i:064x}" for i, v in enumerate((tool.V1, tool.V2))}
        )
        tool.install_crds(api, which, which == "nvidia")
        tool.kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": tool.NS}})
        tool.create_nodes(api, count)
        wait("nodes Ready", lambda: tool.ready_count(api) >= count, 120 + count * 0.2)
        user = tool.NV_USER if which == "nvidia" else tool.OCP_USER
        log_path = out / f"upgrade-vs-nvidia-{which}-{count}.operator.log"
        log_path.unlink(missing_ok=True)
        op = (tool.NvidiaOperator if which == "nvidia" else tool.OcpGpuOperator)(
            cp.make_kubeconfig(user, ["system:masters"]), log_path, api
        )
        states = NodeStates(tool, api)
        states.start()
        audit = tool.Audit(cp.audit_log)
        op.start()
        try:
            wait("leader", op.is_leader, 120)
            tool.kubernetes.client.CustomObjectsApi(api).create_cluster_custom_object(
                "nvidia.com",
                "v1",
                "clusterpolicies",
                {
                    "apiVersion": "nvidia.com/v1",
                    "kind": "ClusterPolicy",
                    "metadata": {"name": tool.POLICY},
                    "spec": spec,
                },
            )
            result["set_up_s"] = wait(
                f"driver {VERSION_A} Ready and upgrade-done on every node",
                lambda: (
                    ready_driver_nodes(tool, api, VERSION_A) >= count
                    and states.count("upgrade-done") >= count
                ),
                timeout,
            )
            result["states_after_set_up"] = dict(Counter(states.latest.values()))
            if result["set_up_s"] is None:
                result["notes"].append(
                    f"set-up never finished: states {result['states_after_set_up']}, "
                    f"{ready_driver_nodes(tool, api, VERSION_A)} nodes with a Ready driver pod"
                )
                return result
            tool.wait_quiet(op, audit, 5, 120)
            before = states.seen()
            mark, cpu0 = audit.mark(), tool.cpu_s(op.pid)
            result["load_average_upgrade_start"] = load_average()
            tool.kubernetes.client.CustomObjectsApi(api).patch_cluster_custom_object(
                "nvidia.com",
                "v1",
                "clusterpolicies",
                tool.POLICY,
                {"spec": {"driver": {"version": VERSION_B}}},
            )
            began = time.monotonic()
            result["wall_s"] = wait(
                f"driver {VERSION_B} Ready and upgrade-done on every node",
                lambda: (
                    ready_driver_nodes(tool, api, VERSION_B) >= count
                    and states.count("upgrade-done") >= count
                ),
                upgrade_timeout or timeout,
            )
            if result["wall_s"] is None:
                result["stopped_after_s"] = round(time.monotonic() - began, 1)
                result["notes"].append(
                    f"upgrade never finished: states now {dict(Counter(states.latest.values()))}"
                )
                # How far it got: nodes upgrade-done with a Ready driver pod of B when stopped.
                result["nodes_upgraded_when_stopped"] = min(
                    ready_driver_nodes(tool, api, VERSION_B), states.count("upgrade-done")
                )
            result["load_average_upgrade_end"] = load_average()
            result["operator_cpu_s"] = round(tool.cpu_s(op.pid) - cpu0, 2)
            counted = tool.Audit.count(audit.lines_since(mark), user)
            result["requests"] = {
                key: counted[key] for key in ("reads", "writes_excl_leases", "lease_writes")
            }
            result["requests_by_verb_resource"] = counted["by_verb_resource"]
            result["writes_per_node"] = round(counted["writes_excl_leases"] / count, 2)
            after = states.seen()
            result["transitions"] = {state: after.get(state, 0) - before.get(state, 0) for state in after}
        finally:
            states.watch.stop()
            op.stop()
            result["operator_log_tail"] = op.log().splitlines()[-15:]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--operators", nargs="+", default=["nvidia", "ocp-gpu"])
    parser.add_argument("--timeout", type=float, default=1200, help="per phase (s)")
    parser.add_argument(
        "--upgrade-timeout", type=float, default=None, help="the upgrade phase alone (s; default --timeout)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with operator_sources("head") as (source, commit):
        tool = load_tool(source)
        runs = {}
        for which in args.operators:
            tool_log(f"=== {which}: {args.nodes} nodes, maxParallelUpgrades {args.parallel} ===")
            runs[which] = run_one(
                tool, which, args.nodes, args.parallel, args.timeout, args.out, args.upgrade_timeout
            )
            tool_log(json.dumps({k: v for k, v in runs[which].items() if k != "operator_log_tail"})[:1500])
    path = args.out / f"upgrade-vs-nvidia-{args.nodes}-p{args.parallel}.json"
    path.write_text(json.dumps({"commit": commit, "runs": runs}, indent=1) + "\n")
    tool_log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

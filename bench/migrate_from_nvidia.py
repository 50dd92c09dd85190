#!/usr/bin/env python3
"""Switch a cluster from NVIDIA's GPU Operator to ocp-gpu and back, with NVIDIA's real operator.

Outside CI (NVIDIA's operator is built from its source outside this repository, as
hack/capture_nvidia_fixtures.py says).  On the local control plane (ocp_gpu_harness) in OpenShift
mode, N kwok GPU nodes on two RHCOS versions, each with a GPU workload pod (`nvidia.com/gpu: 1`):
  1. NVIDIA's operator with its OperatorHub example ClusterPolicy until every driver pod is Ready
     and its namespace is quiet; then stopped, as an OLM uninstall (CRDs and ClusterPolicy stay);
  2. takeover: ocp-gpu's CRD applied over NVIDIA's, ocp-gpu started (the release's images by
     digest, as its install sets them) until the policy is `ready` and it writes nothing for 10 s;
     then stopped;
  3. hand back: NVIDIA's CRDs applied again, NVIDIA's operator started until its policy is
     `ready` and its namespace is quiet (or --timeout).
Per phase: driver pods restarted or replaced, GPU workload pods deleted, nodes cordoned (sampled
every 0.5 s), seconds to `ready`, the operator's API writes (audit log, Leases and Events apart).
NB: the harness's node agent (a SIMULATION of kubelets and the NVIDIA stack) readies the pods.
The switch is the OLM-style one (the ClusterPolicy and CRDs stay); the Helm-style switch differs
only in the namespace (gpu-operator) and is not run here.

  .venv/bin/python bench/migrate_from_nvidia.py --nvidia-src ~/nvidia-gpu-operator --nodes 10 \\
      --out bench/results/migrate_from_nvidia-10.json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ocp_gpu.model import labels, releases  # noqa: E402
from ocp_gpu_harness import cluster, nodes, openshift  # noqa: E402
from ocp_gpu_harness.operating import OperatorProcess  # noqa: E402

NS = "nvidia-gpu-operator"
NV_USER = "nvidia-gpu-operator"
OCP_USER = "ocp-gpu-operator"
V1, V2 = nodes.DEFAULT_RHCOS, "416.94.202407240000-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
DRIVER_PODS = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
WORKLOAD = "gpu-workload"
# Seconds without a write that end a phase (NVIDIA's operator waits for its previous Lease first).
QUIET_S = 20.0
OCP_CRD = ROOT / "ocp_gpu" / "crds" / "clusterpolicies.nvidia.com.yaml"


def log(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", flush=True)


def minimal_crd(group: str, kind: str, plural: str, scope: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def kubectl_apply(plane: cluster.LocalControlPlane, path: Path) -> None:
    subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(plane.kubeconfig),
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            str(path),
        ],
        check=True,
        capture_output=True,
    )


class Nvidia:
    def __init__(self, src: Path, kubeconfig: Path, log_path: Path) -> None:
        self.src, self.kubeconfig, self.log_path = src, kubeconfig, log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def csv(self) -> dict[str, Any]:
        path = self.src / "bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml"
        found: dict[str, Any] = yaml.safe_load(path.read_text())
        return found

    def policy(self) -> dict[str, Any]:
        examples = json.loads(self.csv()["metadata"]["annotations"]["alm-examples"])
        found: dict[str, Any] = next(e for e in examples if e["kind"] == "ClusterPolicy")
        return found

    def start(self) -> None:
        container = self.csv()["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"][
            "containers"
        ][0]
        env = {
            **os.environ,
            **{e["name"]: e["value"] for e in container["env"] if "value" in e},
            "OPERATOR_NAMESPACE": NS,
            "KUBECONFIG": str(self.kubeconfig),
        }
        # NVIDIA's manager reads its manifests from /opt: a private mount namespace shows its optroot there.
        script = f'mount --bind {self.src / "optroot"} /opt && exec {self.src / "bin/gpu-operator"} "$@"'
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    "unshare",
                    "-m",
                    "sh",
                    "-c",
                    script,
                    "gpu-operator",
                    "--leader-elect",
                    f"--leader-elect-namespace={NS}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)


class Sampler(threading.Thread):
    """Every 0.5 s: the nodes cordoned, the most driver pods on one node."""

    def __init__(self, api: kubernetes.client.ApiClient) -> None:
        super().__init__(daemon=True)
        self.core = kubernetes.client.CoreV1Api(api)
        self.cordoned: set[str] = set()
        self.most_drivers = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.5):
            try:
                for node in self.core.list_node(label_selector=f"{labels.NFD_NVIDIA_PCI}=true").items:
                    if node.spec.unschedulable:
                        self.cordoned.add(node.metadata.name)
                counts: dict[str, int] = {}
                for pod in self.core.list_namespaced_pod(NS, label_selector=DRIVER_PODS).items:
                    if pod.spec.node_name:
                        counts[pod.spec.node_name] = counts.get(pod.spec.node_name, 0) + 1
                self.most_drivers = max(self.most_drivers, max(counts.values(), default=0))
            except Exception:  # a failed sample is retried
                pass

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def driver_pods(core: kubernetes.client.CoreV1Api) -> dict[str, int]:
    """uid -> restarts of every driver pod not being deleted."""
    return {
        p.metadata.uid: sum(s.restart_count for s in p.status.container_statuses or ())
        for p in core.list_namespaced_pod(NS, label_selector=DRIVER_PODS).items
        if not p.metadata.deletion_timestamp
    }


def workloads(core: kubernetes.client.CoreV1Api) -> set[str]:
    return {
        p.metadata.uid
        for p in core.list_namespaced_pod(NS, label_selector=f"app={WORKLOAD}").items
        if not p.metadata.deletion_timestamp
    }


def policy_state(api: kubernetes.client.ApiClient, name: str, user: str) -> str:
    """The policy's state as `user`'s operator wrote it ("" until it has): ocp-gpu's status names the
    platform; NVIDIA's operator rewrites the whole status from its Go types, which have no platform."""
    try:
        obj = kubernetes.client.CustomObjectsApi(api).get_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", name
        )
    except kubernetes.client.exceptions.ApiException:
        return ""
    status = obj.get("status") or {}
    if ("platform" in status) != (user == OCP_USER):
        return ""
    return str(status.get("state", ""))


def writes(plane: cluster.LocalControlPlane, user: str, since: int) -> dict[str, int]:
    found: dict[str, int] = {}
    for event in plane.read_audit_events(since_line=since):
        if (event.get("user") or {}).get("username") != user or event.get("stage") != "ResponseComplete":
            continue
        if event.get("verb") not in ("create", "update", "patch", "delete", "deletecollection"):
            continue
        resource = (event.get("objectRef") or {}).get("resource", "")
        if resource in ("leases", "events"):
            continue
        key = f"{event['verb']} {resource}"
        found[key] = found.get(key, 0) + 1
    return found


def phase(
    name: str,
    plane: cluster.LocalControlPlane,
    api: kubernetes.client.ApiClient,
    user: str,
    policy: str,
    start: Any,
    timeout: float,
) -> dict[str, Any]:
    core = kubernetes.client.CoreV1Api(api)
    drivers_before, workloads_before = driver_pods(core), workloads(core)
    mark = plane.audit_line_count()
    sampler = Sampler(api)
    sampler.start()
    # NB: the status the previous operator wrote says `ready` already: cleared, so `ready` is the new one's
    with contextlib.suppress(kubernetes.client.exceptions.ApiException):  # no status yet
        kubernetes.client.CustomObjectsApi(api).patch_cluster_custom_object_status(
            "nvidia.com", "v1", "clusterpolicies", policy, [{"op": "remove", "path": "/status"}]
        )
    began = time.monotonic()
    start()
    ready_s = None
    while time.monotonic() - began < timeout:
        if policy_state(api, policy, user) == "ready":
            ready_s = round(time.monotonic() - began, 1)
            break
        time.sleep(0.5)
    # then until it writes nothing for QUIET_S (or the timeout)
    quiet_since, last = time.monotonic(), sum(writes(plane, user, mark).values())
    while time.monotonic() - began < timeout and time.monotonic() - quiet_since < QUIET_S:
        time.sleep(1)
        now = sum(writes(plane, user, mark).values())
        if now != last:
            last, quiet_since = now, time.monotonic()
    sampler.stop()
    drivers_after = driver_pods(core)
    result = {
        "phase": name,
        "seconds_to_ready": ready_s,
        "driver_pods_before": len(drivers_before),
        "driver_pods_replaced": len(set(drivers_before) - set(drivers_after)),
        "driver_pods_restarted": sum(
            1
            for uid, restarts in drivers_before.items()
            if uid in drivers_after and drivers_after[uid] > restarts
        ),
        "gpu_pods_deleted": len(workloads_before - workloads(core)),
        "nodes_cordoned": len(sampler.cordoned),
        "most_driver_pods_on_a_node": sampler.most_drivers,
        "writes": writes(plane, user, mark),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }
    log(f"{name}: {json.dumps({k: v for k, v in result.items() if k != 'writes'})}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--nvidia-src", type=Path, required=True, help="NVIDIA/gpu-operator built, with optroot/"
    )
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    os.chdir(ROOT)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    src = args.nvidia_src.expanduser().resolve()
    commit = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    results: dict[str, Any] = {
        "nodes": args.nodes,
        "nvidia_commit": commit,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    with cluster.LocalControlPlane(start_timeout=240) as plane:
        api = plane.api_client()
        openshift.install_openshift_apis(api)
        openshift.set_driver_toolkit_tags(api, {V1: DTK + "1" * 64, V2: DTK + "2" * 64})
        ext = kubernetes.client.ApiextensionsV1Api(api)
        nvidia_crds = sorted((src / "config/crd/bases").glob("*.yaml"))
        for crd in [yaml.safe_load(f.read_text()) for f in nvidia_crds] + [
            minimal_crd(
                "security.openshift.io", "SecurityContextConstraints", "securitycontextconstraints", "Cluster"
            ),
            minimal_crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors", "Namespaced"),
            minimal_crd("monitoring.coreos.com", "PrometheusRule", "prometheusrules", "Namespaced"),
        ]:
            ext.create_custom_resource_definition(crd)
        time.sleep(5)
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NS}})
        names = [f"gpu-{i:04d}" for i in range(args.nodes)]
        nodes.create_nodes(
            api, [nodes.gpu_node(n, rhcos=V1 if i % 2 == 0 else V2) for i, n in enumerate(names)]
        )
        nodes.wait_nodes_ready(api, names)
        nvidia = Nvidia(
            src, plane.make_kubeconfig(NV_USER, ["system:masters"]), args.out.with_suffix(".nvidia.log")
        )
        policy = nvidia.policy()
        kubernetes.client.CustomObjectsApi(api).create_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", policy
        )
        name = policy["metadata"]["name"]
        try:
            return_code = _run(results, plane, api, core, names, nvidia, name, args)
        finally:
            nvidia.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    log(f"wrote {args.out}")
    return return_code


def _run(
    results: dict[str, Any],
    plane: Any,
    api: Any,
    core: Any,
    names: list[str],
    nvidia: Nvidia,
    name: str,
    args: Any,
) -> int:
    # NB: one block, so main() stops NVIDIA's operator whatever happens
    if True:
        results["install_nvidia"] = phase(
            "NVIDIA's operator installs", plane, api, NV_USER, name, nvidia.start, args.timeout
        )
        for node in names:
            core.create_namespaced_pod(
                NS,
                {
                    "metadata": {"generateName": f"{WORKLOAD}-", "labels": {"app": WORKLOAD}},
                    "spec": {
                        "nodeName": node,
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [
                            {
                                "name": "cuda",
                                "image": "cuda",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            }
                        ],
                    },
                },
            )
        time.sleep(10)
        nvidia.stop()
        log("NVIDIA's operator stopped (OLM uninstall: CRDs and ClusterPolicy stay)")
        kubectl_apply(plane, OCP_CRD)
        time.sleep(3)
        ocp = OperatorProcess(
            plane.make_kubeconfig(OCP_USER, ["system:masters"]),
            NS,
            args.out.with_suffix(".ocp-gpu.log"),
            image_env=releases.with_release_defaults({}),
        )
        results["takeover"] = phase("ocp-gpu takes over", plane, api, OCP_USER, name, ocp.start, args.timeout)
        ocp.stop()
        log("ocp-gpu stopped")
        for path in sorted((args.nvidia_src.expanduser().resolve() / "config/crd/bases").glob("*.yaml")):
            kubectl_apply(plane, path)
        time.sleep(3)
        results["hand_back"] = phase(
            "NVIDIA's operator takes back", plane, api, NV_USER, name, nvidia.start, args.timeout
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Switch a cluster from NVIDIA's GPU Operator to ocp-gpu and back, with NVIDIA's real operator.

Outside CI (NVIDIA's operator is built from its source outside this repository: bench/README.md,
ocp_gpu_harness/nvidia_operator.py).  On the local control plane (ocp_gpu_harness) in OpenShift mode, N
kwok GPU nodes on two RHCOS versions, each with a GPU workload pod (`nvidia.com/gpu: 1`); for
each switch style asked, each repetition on a fresh control plane:
  1. NVIDIA's operator with its OperatorHub example ClusterPolicy until the policy is `ready` and
     the operator has written nothing for QUIET_S; the GPU workload pods then;
  2. switch to ocp-gpu: NVIDIA's operator stopped and uninstalled as the style says (below);
     ocp-gpu's CRD applied over NVIDIA's; ocp-gpu started (the release's images by digest, as its
     install sets them) until the policy is `ready` and it writes nothing for QUIET_S;
  3. hand back: ocp-gpu stopped and uninstalled as the style says; NVIDIA's CRDs applied again;
     NVIDIA's operator started until its policy is `ready` and it is quiet (or --timeout).
Per phase: driver pods deleted by the switch, driver pods restarted or replaced and GPU workload
pods deleted over the whole phase, nodes cordoned (sampled every 0.5 s, as is the most driver pods
on a node), seconds from the operator's start to `ready`, the operator's API writes (audit log,
Leases and Events apart).

The switch styles.  NB: both are SIMULATIONS of the uninstall, made through the API; the
operators run as processes, not as the Deployments OLM or helm would make:
- `olm`: uninstalling the operator (Subscription and CSV deleted) removes its Deployment and keeps
  the CRDs and the ClusterPolicy (OLM deletes neither).  Simulated: the operator process stopped.
  Namespace nvidia-gpu-operator, the policy as NVIDIA's OperatorHub example names it.
- `helm`: `helm uninstall` of NVIDIA's chart (deployments/gpu-operator at v26.7.0, its defaults).
  The chart renders the ClusterPolicy `cluster-policy` (templates/clusterpolicy.yaml) and marks it
  `helm.sh/resource-policy: keep` only with operator.cleanupCRD (default false), so helm deletes
  it, with its default `--cascade background`: the cluster's garbage collector then deletes every
  object whose ownerReference is the policy, driver DaemonSets and their pods included.  CRDs
  stay (helm never deletes crds/).  The pre-delete hook (cleanup_gpucluster.yaml) deletes
  GPUCluster CRs, of which there are none here; it is not run.  Simulated: the operator process
  stopped, the ClusterPolicy deleted with propagationPolicy Background, and the phase waits until
  the garbage collector has deleted what the policy owned.  ocp-gpu's chart renders
  `cluster-policy` the same way (no keep by default): the hand back deletes it in the same way,
  and `helm install` then creates the policy again (from the same values: NVIDIA's example's
  spec here).  Namespace gpu-operator.
- `helm-orphan`: `helm uninstall --cascade orphan`: the same, the ClusterPolicy deleted with
  propagationPolicy Orphan: the garbage collector removes the ownerReferences and deletes
  nothing.  NB: the operator's Deployment is orphaned too (its ReplicaSet and pod stay, and
  must be deleted by hand); here the process is stopped.
The CRDs: as the README's commands apply them (helm install skips CRDs that exist).
`--platform vanilla`: no OpenShift API, Ubuntu 22.04 GPU nodes, the ClusterPolicy NVIDIA's Helm
chart renders from its default values (tests/unit/data/nvidia-helm/expected/nvidia-values.yaml):
NVIDIA's single `nvidia-driver-daemonset`, ocp-gpu's one per OS.  Its hand back first deletes
ocp-gpu's driver DaemonSets with propagationPolicy Orphan, as docs/migrating-from-nvidia.md says
(`kubectl delete daemonset ... --cascade=orphan`).
NB: the harness's node agent (a SIMULATION of kubelets and the NVIDIA stack) readies the pods;
nothing simulates what a driver pod's deletion does to a GPU workload on a real node.

  .venv/bin/python bench/migrate_from_nvidia.py --nvidia-src ~/nvidia-gpu-operator --nodes 100 \\
      --switch olm helm helm-orphan --repeat 2 --out bench/results/migrate_from_nvidia-100.json
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import kubernetes.client
import urllib3
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ocp_gpu.model import labels, releases  # noqa: E402
from ocp_gpu_harness import cluster, nodes, nvidia_operator, openshift  # noqa: E402
from ocp_gpu_harness.operating import OperatorProcess  # noqa: E402
from ocp_gpu_harness.polling import wait_for  # noqa: E402

NV_USER = "nvidia-gpu-operator"
OCP_USER = "ocp-gpu-operator"
V1, V2 = nodes.DEFAULT_RHCOS, "416.94.202407240000-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
DRIVER_PODS = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
OCP_GPU_DRIVER_DAEMONSETS = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE},{DRIVER_PODS}"
WORKLOAD = "gpu-workload"
# Seconds without a write that end a phase (NVIDIA's operator waits for its previous Lease first).
QUIET_S = 20.0
OCP_CRD = ROOT / "ocp_gpu" / "crds" / "clusterpolicies.nvidia.com.yaml"
CHART_POLICY = ROOT / "tests" / "unit" / "data" / "nvidia-helm" / "expected" / "nvidia-values.yaml"
SWITCHES = ("olm", "helm", "helm-orphan")
# The namespace each style installs into: OLM's (NVIDIA's docs) or the chart's release namespace.
NAMESPACES = {"olm": "nvidia-gpu-operator", "helm": "gpu-operator", "helm-orphan": "gpu-operator"}
# How `helm uninstall` deletes the chart's ClusterPolicy (None: it is kept).
PROPAGATION = {"olm": None, "helm": "Background", "helm-orphan": "Orphan"}
HELM_POLICY = "cluster-policy"  # NVIDIA's chart's and ocp-gpu's chart's ClusterPolicy
# The garbage collector's deletions after a cascading policy deletion: the API server's and the
# controller manager's work on up to a few thousand objects, seconds quiet; minutes under load.
GC_S = 300


def log(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", flush=True)


def kubectl_apply(plane: cluster.LocalControlPlane, path: Path, tries: int = 5) -> None:
    """`kubectl apply --server-side` of `path`, tried again (after 2, 4, 8, 16 s) when it fails: run
    5's helm hand back ended on one failed apply of NVIDIA's CRD at load 35 (its error not kept)."""
    for attempt in range(tries):
        done = subprocess.run(
            [
                *("kubectl", "--kubeconfig", str(plane.kubeconfig)),
                *("apply", "--server-side", "--force-conflicts", "-f", str(path)),
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return
        log(f"kubectl apply -f {path} failed (try {attempt + 1}): {done.stderr.strip()[:500]}")
        if attempt < tries - 1:
            time.sleep(2 ** (attempt + 1))
    raise RuntimeError(f"kubectl apply -f {path}: {done.stderr.strip()[:500]}")


class Sampler(threading.Thread):
    """Every 0.5 s: the nodes cordoned, the most driver pods on one node, and per DaemonSet the
    seconds (from `began`, once set) at which its rollout was last seen incomplete: what a slow
    `ready` waits for."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str) -> None:
        super().__init__(daemon=True)
        self.core = kubernetes.client.CoreV1Api(api)
        self.apps = kubernetes.client.AppsV1Api(api)
        self.namespace = namespace
        self.cordoned: set[str] = set()
        self.most_drivers = 0
        self.samples = 0
        self.began: float | None = None
        # DaemonSet -> seconds since `began` it was last seen with pods not updated or not available
        self.rolling_until: dict[str, float] = {}
        self._halt = threading.Event()

    def sample_rollouts(self) -> None:
        if self.began is None:
            return
        for ds in self.apps.list_namespaced_daemon_set(self.namespace).items:
            status = ds.status
            desired = status.desired_number_scheduled or 0
            if (status.updated_number_scheduled or 0) < desired or (status.number_available or 0) < desired:
                self.rolling_until[ds.metadata.name] = round(time.monotonic() - self.began, 1)

    def run(self) -> None:
        while not self._halt.wait(0.5):
            try:
                for node in self.core.list_node(label_selector=f"{labels.NFD_NVIDIA_PCI}=true").items:
                    if node.spec.unschedulable:
                        self.cordoned.add(node.metadata.name)
                counts: dict[str, int] = {}
                for pod in self.core.list_namespaced_pod(self.namespace, label_selector=DRIVER_PODS).items:
                    if pod.spec.node_name:
                        counts[pod.spec.node_name] = counts.get(pod.spec.node_name, 0) + 1
                self.most_drivers = max(self.most_drivers, max(counts.values(), default=0))
                self.sample_rollouts()
                self.samples += 1
            except Exception:  # a failed sample is retried
                pass

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


# An overloaded apiserver's answers worth asking again (seen at load 46: a LIST of pods, 504).
RETRIED_STATUS = (429, 500, 503, 504)
T = TypeVar("T")
P = ParamSpec("P")


def again(read: Callable[[], T], tries: int = 5) -> T:
    """`read()`, asked again (after 2, 4, 8, 16 s) when the apiserver answers it is overloaded or the
    connection breaks: at load 46 a run of run 5 ended on one such answer."""
    for attempt in range(tries):
        try:
            return read()
        except kubernetes.client.exceptions.ApiException as error:
            if error.status not in RETRIED_STATUS or attempt == tries - 1:
                raise
        except urllib3.exceptions.HTTPError:
            if attempt == tries - 1:
                raise
        time.sleep(2 ** (attempt + 1))
    raise AssertionError("unreachable")


def retried(read: Callable[P, T]) -> Callable[P, T]:
    """`read`, asked `again`."""

    @functools.wraps(read)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return again(lambda: read(*args, **kwargs))

    return wrapper


@retried
def driver_pods(core: kubernetes.client.CoreV1Api, namespace: str) -> dict[str, int]:
    """uid -> restarts of every driver pod not being deleted."""
    return {
        p.metadata.uid: sum(s.restart_count for s in p.status.container_statuses or ())
        for p in core.list_namespaced_pod(namespace, label_selector=DRIVER_PODS).items
        if not p.metadata.deletion_timestamp
    }


@retried
def workloads(core: kubernetes.client.CoreV1Api, namespace: str) -> set[str]:
    return {
        p.metadata.uid
        for p in core.list_namespaced_pod(namespace, label_selector=f"app={WORKLOAD}").items
        if not p.metadata.deletion_timestamp
    }


@retried
def read_policy(api: kubernetes.client.ApiClient, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = kubernetes.client.CustomObjectsApi(api).get_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", name
        )
    except kubernetes.client.exceptions.ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def writes(plane: cluster.LocalControlPlane, user: str, since: int) -> dict[str, int]:
    """`user`'s completed writes since the audit mark, by verb and resource (Leases, Events apart)."""
    found: dict[str, int] = {}
    for event in plane.read_audit_events(since_line=since):
        if (event.get("user") or {}).get("username") != user or event.get("stage") != "ResponseComplete":
            continue
        if event.get("verb") not in ("create", "update", "patch", "delete", "deletecollection"):
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        if resource in ("leases", "events"):
            continue
        key = f"{event['verb']} {resource}"
        found[key] = found.get(key, 0) + 1
    return found


def wrote_status(plane: cluster.LocalControlPlane, user: str, since: int) -> bool:
    """`user` has written the ClusterPolicy's status since the mark (so its state is `user`'s)."""
    return any(key.endswith(" clusterpolicies/status") for key in writes(plane, user, since))


class Switch:
    """One switch style's uninstall of the operator that runs, simulated through the API
    (module docstring), and the install of the next one's ClusterPolicy."""

    def __init__(self, style: str, api: kubernetes.client.ApiClient, policy: dict[str, Any]) -> None:
        self.style, self.api = style, api
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.policy = policy  # what the next install creates when the uninstall deleted it

    def uninstall(self, stop: Callable[[], None], namespace: str) -> dict[str, Any]:
        """Stop the operator; under helm, delete the policy as `helm uninstall` does and wait
        for the garbage collector.  Returns what the uninstall deleted."""
        core = kubernetes.client.CoreV1Api(self.api)
        apps = kubernetes.client.AppsV1Api(self.api)
        drivers_before = driver_pods(core, namespace)
        daemonsets_before = {
            d.metadata.uid for d in again(lambda: apps.list_namespaced_daemon_set(namespace)).items
        }
        stop()
        propagation = PROPAGATION[self.style]
        name = self.policy["metadata"]["name"]
        if propagation is not None:
            live = read_policy(self.api, name)
            assert live is not None, f"no ClusterPolicy {name} to uninstall"
            uid = live["metadata"]["uid"]
            self.custom.delete_cluster_custom_object(
                "nvidia.com", "v1", "clusterpolicies", name, propagation_policy=propagation
            )

            def collected() -> bool:
                """The policy gone, and nothing in the namespace owned by it any more (deleted
                under Background, its reference removed under Orphan)."""
                if read_policy(self.api, name) is not None:
                    return False
                owned = [
                    o
                    for o in apps.list_namespaced_daemon_set(namespace).items
                    + core.list_namespaced_pod(namespace).items
                    if any(ref.uid == uid for ref in o.metadata.owner_references or ())
                ]
                # under Background the driver pods go with their DaemonSets
                return not owned and (propagation == "Orphan" or not driver_pods(core, namespace))

            wait_for(
                collected, GC_S, what=f"the garbage collector done with ClusterPolicy {name}", interval=1
            )
        return {
            "style": self.style,
            "policy_deleted": propagation,
            "driver_pods_deleted": len(set(drivers_before) - set(driver_pods(core, namespace))),
            "daemonsets_deleted": len(
                daemonsets_before
                - {d.metadata.uid for d in again(lambda: apps.list_namespaced_daemon_set(namespace)).items}
            ),
        }

    def install_policy(self) -> bool:
        """The next install's ClusterPolicy: created when the uninstall deleted it (helm install
        renders it again), else the policy that stayed.  Returns whether it was created."""
        if read_policy(self.api, self.policy["metadata"]["name"]) is not None:
            return False
        self.custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", self.policy)
        return True


def phase(
    name: str,
    plane: cluster.LocalControlPlane,
    api: kubernetes.client.ApiClient,
    namespace: str,
    user: str,
    policy: str,
    switch: Callable[[], dict[str, Any]] | None,
    prepare: Callable[[], None],
    start: Callable[[], None],
    running: Callable[[], bool],
    timeout: float,
) -> dict[str, Any]:
    """One operator's start, after `switch` (the previous one's uninstall) and `prepare` (CRDs,
    policy), until `ready` and QUIET_S without a write (or `timeout`)."""
    core = kubernetes.client.CoreV1Api(api)
    drivers_before, workloads_before = driver_pods(core, namespace), workloads(core, namespace)
    sampler = Sampler(api, namespace)
    sampler.start()
    uninstalled = switch() if switch else None
    prepare()
    # NB: a status the previous operator wrote says `ready` already: cleared (a merge patch; the
    # client sends a JSON patch as a merge patch, refused, which left it stale before) and
    # checked; and `ready` counts only once `user` has written the status itself (audit log).
    live = read_policy(api, policy)
    assert live is not None, f"no ClusterPolicy {policy}"
    if live.get("status"):
        kubernetes.client.CustomObjectsApi(api).patch_cluster_custom_object_status(
            "nvidia.com", "v1", "clusterpolicies", policy, {"status": None}
        )
        left = (read_policy(api, policy) or {}).get("status") or {}
        assert not left.get("state"), f"the previous status stayed: {left}"
    mark = plane.audit_line_count()
    began = time.monotonic()
    sampler.began = began
    start()
    ready_s = None
    while time.monotonic() - began < timeout:
        if not running():
            raise RuntimeError(f"{name}: the operator exited (see its log)")
        try:
            state = ((read_policy(api, policy) or {}).get("status") or {}).get("state")
        except Exception:  # NB: a failed read (seen at load 44: IncompleteRead) is "not yet"
            state = None
        if state == "ready" and wrote_status(plane, user, mark):
            ready_s = round(time.monotonic() - began, 1)
            break
        time.sleep(0.5)
    # then until it writes nothing for QUIET_S (or the timeout)
    quiet_since, last = time.monotonic(), sum(writes(plane, user, mark).values())
    while time.monotonic() - began < timeout and time.monotonic() - quiet_since < QUIET_S:
        time.sleep(2)
        now = sum(writes(plane, user, mark).values())
        if now != last:
            last, quiet_since = now, time.monotonic()
    quiet = time.monotonic() - quiet_since >= QUIET_S
    sampler.stop()
    final = (read_policy(api, policy) or {}).get("status") or {}
    apps = kubernetes.client.AppsV1Api(api)
    drivers_after = driver_pods(core, namespace)
    done = writes(plane, user, mark)
    result = {
        "phase": name,
        "uninstall": uninstalled,
        "seconds_to_ready": ready_s,
        "quiet_after_s": round(time.monotonic() - began, 1) if quiet else None,
        "driver_pods_before": len(drivers_before),
        "driver_pods_after": len(drivers_after),
        "driver_pods_replaced": len(set(drivers_before) - set(drivers_after)),
        "driver_pods_restarted": sum(
            1
            for uid, restarts in drivers_before.items()
            if uid in drivers_after and drivers_after[uid] > restarts
        ),
        "gpu_pods_deleted": len(workloads_before - workloads(core, namespace)),
        "nodes_cordoned": len(sampler.cordoned),
        "most_driver_pods_on_a_node": sampler.most_drivers,
        "samples": sampler.samples,
        "writes_total": sum(done.values()),
        "writes": done,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        # why a phase was slow or not ready: the status at its end, and each DaemonSet's rollout
        "final_state": final.get("state"),
        "final_conditions": [
            {k: c.get(k) for k in ("type", "status", "reason", "message")}
            for c in final.get("conditions") or ()
            if c.get("type") not in ("Ready",) or c.get("status") != "True"
        ],
        "daemonsets_at_end": {
            ds.metadata.name: {
                "desired": ds.status.desired_number_scheduled,
                "updated": ds.status.updated_number_scheduled,
                "available": ds.status.number_available,
                "strategy": ds.spec.update_strategy.type,
            }
            for ds in again(lambda: apps.list_namespaced_daemon_set(namespace)).items
        },
        "daemonset_rolling_until_s": dict(sorted(sampler.rolling_until.items(), key=lambda kv: -kv[1])),
    }
    log(f"{name}: {json.dumps({k: v for k, v in result.items() if k != 'writes'})}")
    return result


def chart_policy() -> dict[str, Any]:
    """The ClusterPolicy NVIDIA's chart renders from its default values (hack/nvidia_chart_fixtures.py)."""
    policy: dict[str, Any] = next(
        doc for doc in yaml.safe_load_all(CHART_POLICY.read_text()) if doc and doc["kind"] == "ClusterPolicy"
    )
    return policy


def run_once(
    args: argparse.Namespace, src: Path, style: str, repetition: int, result: dict[str, Any]
) -> None:
    """One switch style on a fresh control plane: install, take over, hand back; each phase into
    `result` as it ends (so a later phase's failure loses nothing measured)."""
    namespace = NAMESPACES[style]
    vanilla = args.platform == "vanilla"
    stem = args.out.with_suffix("")
    logs = Path(f"{stem}.{style}-{repetition}")
    result |= {"namespace": namespace, "platform": args.platform}
    with cluster.LocalControlPlane(start_timeout=240) as plane:
        api = plane.api_client()
        if not vanilla:
            openshift.install_openshift_apis(api)
            openshift.set_driver_toolkit_tags(api, {V1: DTK + "1" * 64, V2: DTK + "2" * 64})
        ext = kubernetes.client.ApiextensionsV1Api(api)
        created = nvidia_operator.crds(src) + ([] if vanilla else nvidia_operator.openshift_crds())
        for crd in created:
            ext.create_custom_resource_definition(crd)
        wait_for(
            lambda: all(
                any(
                    c.type == "Established" and c.status == "True"
                    for c in ext.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions
                    or ()
                )
                for crd in created
            ),
            60,
            what="the CRDs established",
        )
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": namespace}})
        names = [f"gpu-{i:04d}" for i in range(args.nodes)]
        nodes.create_nodes(
            api,
            [
                nodes.vanilla_gpu_node(n) if vanilla else nodes.gpu_node(n, rhcos=V1 if i % 2 == 0 else V2)
                for i, n in enumerate(names)
            ],
        )
        nodes.wait_nodes_ready(api, names)
        nvidia = nvidia_operator.NvidiaOperator(
            src, plane.make_kubeconfig(NV_USER, ["system:masters"]), namespace, Path(f"{logs}.nvidia.log")
        )
        policy = chart_policy() if vanilla else nvidia_operator.example_policy(src)
        if style != "olm":
            policy["metadata"] = {"name": HELM_POLICY}
        name = policy["metadata"]["name"]
        custom = kubernetes.client.CustomObjectsApi(api)
        with nvidia:
            result["install_nvidia"] = phase(
                "NVIDIA's operator installs",
                plane,
                api,
                namespace,
                NV_USER,
                name,
                None,
                lambda: custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", policy),
                nvidia.start,
                nvidia.running,
                args.timeout,
            )
            for node in names:
                core.create_namespaced_pod(
                    namespace,
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
            wait_for(
                lambda: (
                    len(
                        [
                            p
                            for p in core.list_namespaced_pod(
                                namespace, label_selector=f"app={WORKLOAD}"
                            ).items
                            if p.status.phase == "Running"
                        ]
                    )
                    == len(names)
                ),
                120,
                what="the GPU workload pods running",
                interval=1,
            )
            switch = Switch(style, api, policy)
            ocp = OperatorProcess(
                plane.make_kubeconfig(OCP_USER, ["system:masters"]),
                namespace,
                Path(f"{logs}.ocp-gpu.log"),
                image_env=releases.with_release_defaults({}),
            )
            try:

                def to_ocp_gpu() -> None:
                    kubectl_apply(plane, OCP_CRD)
                    result["ocp_gpu_policy_created"] = switch.install_policy()

                result["takeover"] = phase(
                    "ocp-gpu takes over",
                    plane,
                    api,
                    namespace,
                    OCP_USER,
                    name,
                    lambda: switch.uninstall(nvidia.stop, namespace),
                    to_ocp_gpu,
                    ocp.start,
                    ocp.running,
                    args.timeout,
                )
                status = (read_policy(api, name) or {}).get("status") or {}
                result["takeover"]["migratedFrom"] = status.get("migratedFrom")

                def to_nvidia() -> None:
                    if vanilla:
                        # ocp-gpu's per-OS driver DaemonSets leave their pods to NVIDIA's (the docs' command)
                        apps = kubernetes.client.AppsV1Api(api)
                        ours = OCP_GPU_DRIVER_DAEMONSETS
                        apps.delete_collection_namespaced_daemon_set(
                            namespace, label_selector=ours, propagation_policy="Orphan"
                        )
                        wait_for(
                            lambda: not apps.list_namespaced_daemon_set(namespace, label_selector=ours).items,
                            GC_S,
                            what="ocp-gpu's driver DaemonSets gone",
                            interval=1,
                        )
                    for path in nvidia_operator.crd_paths(src):
                        kubectl_apply(plane, path)
                    result["nvidia_policy_created"] = switch.install_policy()

                result["hand_back"] = phase(
                    "NVIDIA's operator takes back",
                    plane,
                    api,
                    namespace,
                    NV_USER,
                    name,
                    lambda: switch.uninstall(ocp.stop, namespace),
                    to_nvidia,
                    nvidia.start,
                    nvidia.running,
                    args.timeout,
                )
            finally:
                ocp.stop()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--nvidia-src", type=Path, required=True, help="NVIDIA/gpu-operator built, with optroot/"
    )
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--switch", nargs="+", choices=SWITCHES, default=list(SWITCHES))
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each switch style, each on a fresh cluster"
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds per phase")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--platform", choices=("openshift", "vanilla"), default="openshift")
    args = parser.parse_args()
    os.chdir(ROOT)
    args.out = args.out.resolve()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    src = args.nvidia_src.expanduser().resolve()

    def commit(path: Path) -> str:
        return subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()

    results: dict[str, Any] = {
        "nodes": args.nodes,
        "nvidia_commit": commit(src),
        # NB: run from a `git archive` (no .git), OCP_GPU_COMMIT names the commit
        "ocp_gpu_commit": commit(ROOT) or os.environ.get("OCP_GPU_COMMIT", ""),
        "platform": args.platform,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "runs": [],
    }
    for repetition in range(1, args.repeat + 1):
        for style in args.switch:
            log(f"--- {style}, repetition {repetition} ---")
            run: dict[str, Any] = {"switch": style, "repetition": repetition}
            results["runs"].append(run)
            try:
                run_once(args, src, style, repetition, run)
            except Exception as error:
                # what it measured stays, the error beside it, and the next one runs
                log(f"{style}, repetition {repetition} failed: {error}")
                run["error"] = str(error)
            # written after every run: a later run's failure loses nothing measured
            args.out.write_text(json.dumps(results, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

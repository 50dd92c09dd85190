"""Chaos runs: a driver upgrade of an OpenShift GPU pool, while the Machine Config Operator
moves the same pool to a new RHCOS, with faults injected, and the invariants watched.

One scenario, shared by the benchmarks (``bench/chaos_*.py``, hundreds of nodes) and the
short end-to-end tests (``tests/e2e/test_chaos.py``, tens of nodes):

1. OpenShift emulation (Driver Toolkit tags for the old and the new RHCOS), N kwok GPU
   nodes on the old RHCOS, a few of them cordoned by an admin beforehand (and left out
   of the MCO's pool: an admin's cordon is the one thing nobody else may lift).
2. The ClusterPolicy at driver version A (``maxParallelUpgrades`` P, ``maxUnavailable``
   100% so that the budget is P), the operator replicas started and supervised
   (`faults.Supervisor`), every node ``upgrade-done`` on A.
3. The seed's change: ``/spec/driver/version`` to B; at the same moment the simulated
   MCO (`nodes.simulate_mco_update`) rolls the pool to the new RHCOS, and the faults of
   the plan fire at random moments over ``fault_window_s``: operator SIGKILLs (any
   replica, or the leader), kube-apiserver SIGKILLed and restarted, etcd compacted.
4. Until every node is ``upgrade-done`` on a current, Ready driver pod of B (or time
   out), while an `InvariantMonitor` checks every watch event.

Invariants (each violation is recorded with when and what):

- never two driver pods on one node (bound to it, not yet deleted);
- upgrades in flight never above ``maxParallelUpgrades``;
- no admin cordon lifted, ever;
- never two driver DaemonSets selecting the same nodes;
and at the end (from fresh LISTs): no node cordoned but the admin's; every GPU node
``upgrade-done`` with one Ready driver pod of B from the DaemonSet of its RHCOS; exactly
one driver DaemonSet per RHCOS version present, each owned by the ClusterPolicy (no
orphan); every operand object that existed before the faults still there.

Measured: wall time (version patch -> done), the operator's API writes (audit log, its
user, Leases apart), faults fired before the upgrade finished, replica exits we did not
cause, the most upgrades seen in flight.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, ParamSpec

import kubernetes.client
import kubernetes.watch
import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from ocp_gpu.model import apis, labels
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning.upgrades import upgrade_table
from ocp_gpu_harness import crds, faults, nodes, openshift, polling
from ocp_gpu_harness import rbac as operator_rbac
from ocp_gpu_harness.cluster import LEASES, WRITE_VERBS, LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

P = ParamSpec("P")

NAMESPACE: Final = labels.OPENSHIFT_NAMESPACE
POLICY: Final = labels.CLUSTER_POLICY_NAME
OPERATOR_USER: Final = "ocp-gpu-operator"
CRD_PATH: Final = Path(__file__).resolve().parents[1] / "ocp_gpu" / "crds" / "clusterpolicies.nvidia.com.yaml"
VERSION_A: Final = "550.90.07"
# The seed's target (a downgrade, as the seed does it).
VERSION_B: Final = "510.85.02"
RHCOS_OLD: Final = "416.94.202407030122-0"
RHCOS_NEW: Final = "417.94.202410090854-0"
# The OpenShift releases of RHCOS_OLD and RHCOS_NEW (the `openshift_upgrade` scenario).
OPENSHIFT_FROM: Final = "4.16.20"
OPENSHIFT_TO: Final = "4.17.3"
# The MachineConfigPools' role labels (`node-role.kubernetes.io/<pool>`) of the multi-pool scenario.
POOL_ROLE_PREFIX: Final = "node-role.kubernetes.io/"
# The operator's pre-pull DaemonSets' component (rendering/prepull_rendering.py).
PREPULL_COMPONENT: Final = "nvidia-driver-prepull"
_DTK: Final = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
DTK_TAGS: Final = {RHCOS_OLD: _DTK + "a" * 64, RHCOS_NEW: _DTK + "b" * 64}
DRIVER_SELECTOR: Final = f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
GPU_NODE_SELECTOR: Final = f"{labels.NFD_NVIDIA_PCI}=true"
MANAGED_SELECTOR: Final = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
# The upgrade states that hold a slot of maxParallelUpgrades (planning.upgrades.upgrade_plan.IN_PROGRESS).
IN_FLIGHT: Final = frozenset(
    {
        "cordon-required",
        "wait-for-jobs-required",
        "pod-deletion-required",
        "drain-required",
        "pod-restart-required",
        "validation-required",
        "uncordon-required",
    }
)
DONE: Final = "upgrade-done"
# Fault kinds of a plan.
KILL_OPERATOR: Final = "kill-operator"
KILL_LEADER: Final = "kill-leader"
RESTART_APISERVER: Final = "restart-apiserver"
COMPACT_ETCD: Final = "compact-etcd"
# A leader notices a lost Lease within its renew deadline (3 s) of the apiserver coming back
# (or failing): exits within this many seconds of an outage are that, not crashes.
LEASE_LOSS_GRACE_S: Final = 15.0
# The fake nodes' Lease for chaos control planes (`LocalControlPlane(node_lease_seconds=...)`).
# NB: with the default 40 s, an apiserver outage on a loaded machine lets Leases lapse; the
# node-lifecycle controller then marks the nodes' pods not Ready, and kwok, unlike a
# kubelet, never marks them Ready again (seen: driver pods 2/2 ready, condition Ready False).
# Real kubelets re-report; longer Leases keep that kwok gap out of the results.
NODE_LEASE_SECONDS: Final = 120
# How long (seconds, times 1 + nodes/200) every node may say upgrade-done with no fault left
# while an end invariant still fails, before the run reports it rather than waits.
STALL_S: Final = 60.0
# How long a restarted kube-apiserver may take to say /readyz. NB: at a load average of 36 a
# 100-node run's was not ready within 120 s (HTTP 500 while etcd timed out), which ended the
# fault runner and with it every fault after: a slow restart is still a restart.
APISERVER_READY_S: Final = 600.0
# How long a kill waits for the restarted operator to lead again before it fires anyway.
LEAD_PATIENCE_S: Final = 60.0
# Violations kept in full per invariant (the count is always complete).
_KEEP: Final = 20


def log_to_stdout(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclasses.dataclass(frozen=True)
class ChaosConfig:
    nodes: int = 30
    max_parallel: int = 10
    # The MCO rolls the pool (all nodes but the admin-cordoned) to RHCOS_NEW during the upgrade.
    mco: bool = True
    # The MCO's default: one node at a time (the upgrade then meets nodes on both RHCOS).
    mco_max_unavailable: int = 1
    # Several MachineConfigPools (issue 24's upgrade day): the pool's nodes split into one
    # MachineConfigPool per entry, each rolled side by side with that maxUnavailable; empty:
    # one pool rolled with ``mco_max_unavailable``.
    pool_max_unavailable: tuple[int, ...] = ()
    # An OpenShift upgrade around it: until the version patch only the old RHCOS's Driver
    # Toolkit tag exists; at the patch ClusterVersion starts applying OPENSHIFT_TO and the new
    # RHCOS's tag appears (as the CVO does before the MCO rolls the pools); once every pool
    # has moved, ClusterVersion says Completed.
    openshift_upgrade: bool = False
    # At the end, the rest of the stack too: every other operand DaemonSet rolled out and
    # Ready on its nodes, the ClusterPolicy `ready` with no UpgradePreflight condition left.
    stack_ready: bool = False
    # A killed replica comes back as the kubelet restarts a container: in the same pod, under
    # the same Lease identity (it leads again at once, issue 24 item 1); False: as a new pod.
    same_pod_restarts: bool = False
    # The replicas' Lease: duration, renew deadline, retry period (seconds). The short default
    # makes kills cheap for a new identity; controller-runtime's 15/10/2 (NVIDIA's) rides out a
    # loaded machine's slow renewals.
    lease_s: tuple[float, float, float] = (4.0, 3.0, 0.5)
    admin_cordoned: int = 2
    replicas: int = 1
    operator_kills: int = 0
    # Kill the leader (with replicas >= 2: a standby takes over) rather than any replica.
    kill_leader: bool = False
    apiserver_restarts: int = 0
    compactions: int = 0
    # Faults fire at random moments in [3 s, fault_window_s] after the version patch.
    fault_window_s: float = 60.0
    # How long the apiserver stays down per restart (uniform in this range).
    apiserver_down_s: tuple[float, float] = (1.0, 4.0)
    seed: int = 1
    timeout_s: float = 900.0

    @property
    def fault_count(self) -> int:
        return self.operator_kills + self.apiserver_restarts + self.compactions


def plan_faults(config: ChaosConfig) -> list[tuple[float, str]]:
    """(seconds after the version patch, kind) for every fault, in time order; reproducible
    from ``config.seed``."""
    rng = random.Random(config.seed)
    kill = KILL_LEADER if config.kill_leader else KILL_OPERATOR
    kinds = (
        [kill] * config.operator_kills
        + [RESTART_APISERVER] * config.apiserver_restarts
        + [COMPACT_ETCD] * config.compactions
    )
    low = min(3.0, config.fault_window_s)
    return sorted((round(rng.uniform(low, config.fault_window_s), 2), kind) for kind in kinds)


@dataclasses.dataclass
class Violation:
    invariant: str
    at_s: float
    detail: str


# The invariants checked continuously, and the names results use.
TWO_DRIVER_PODS: Final = "two driver pods on a node"
OVER_BUDGET: Final = "upgrades in flight above maxParallelUpgrades"
ADMIN_CORDON_LIFTED: Final = "admin cordon lifted"
DUPLICATE_DAEMONSET: Final = "two driver DaemonSets for the same nodes"
NODE_STUCK: Final = "node in one upgrade state longer than its timeout"
CONTINUOUS: Final = (TWO_DRIVER_PODS, OVER_BUDGET, ADMIN_CORDON_LIFTED, DUPLICATE_DAEMONSET, NODE_STUCK)
# The states a node waits in for pods, not for the operator (`InvariantMonitor.waits`):
# validation waits for the validator pods; pod-restart-required waits for the DaemonSet
# controller and the kubelet from the old driver pod's deletion to a new Ready one.
WAITS_ON_PODS: Final = "validation-required"
RESTART: Final = "pod-restart-required"


def state_limits() -> dict[str, float]:
    """How long a node may stay in each in-flight state: its timeout in the operator's upgrade
    table for the policy these runs use (seed defaults), and for a state without one (a single
    write: cordon, uncordon; jobs with no timeout) the longest of those timeouts."""
    policy = policy_spec.UpgradePolicy()
    timed = {
        str(state): float(rule.timeout.seconds(policy))
        for state, rule in upgrade_table.TABLE.items()
        if rule.timeout is not None and rule.timeout.seconds(policy) > 0
    }
    longest = max(timed.values())
    return {state: timed.get(state, longest) for state in IN_FLIGHT}


class InvariantMonitor:
    """Watches GPU nodes, driver pods and driver DaemonSets (one thread each) and checks
    the continuous invariants after every event.

    NB: a watch that is cut (apiserver restart) or expires (410 Gone) lists again; what
    changed while it was away is seen as one jump (the apiserver was down: nothing could
    change but what the controllers had in flight).
    """

    def __init__(self, api: ApiClient, budget: int, admin_cordoned: Iterable[str], t0: float) -> None:
        self._core = kubernetes.client.CoreV1Api(api)
        self._apps = kubernetes.client.AppsV1Api(api)
        self.budget = budget
        self.admin = frozenset(admin_cordoned)
        self.t0 = t0
        self.lock = threading.Lock()
        self.node_state: dict[str, str] = {}
        self.node_unschedulable: dict[str, bool] = {}
        # pod uid -> (node, name); pods bound to a node and not yet DELETED.
        self.pods: dict[str, tuple[str, str]] = {}
        # DaemonSet name -> its nodeSelector, serialized.
        self.daemonsets: dict[str, str] = {}
        self.violations: dict[str, list[Violation]] = {name: [] for name in CONTINUOUS}
        self.violation_counts: Counter[str] = Counter()
        self.max_in_flight = 0
        self.max_driver_pods_on_a_node = 0
        # node -> [(seconds after t0, state)] at every change of its upgrade state
        self.timeline: dict[str, list[tuple[float, str]]] = {}
        # node -> [(seconds after t0, "deleting" | "ready")] of its driver pods (each pod once per mark)
        self.pod_marks: dict[str, list[tuple[float, str]]] = {}
        self._pod_marked: set[tuple[str, str]] = set()
        self.limits = state_limits()
        self._stuck_flagged: set[tuple[str, float]] = set()
        # Node-seconds where a slot of maxParallelUpgrades was free while a node waited for one.
        self.free_slot_node_s = 0.0
        self._last_node_change = 0.0
        self.events = 0
        # Node events only: during an upgrade nearly all are the operator's label writes.
        self.node_events = 0
        self.relists: Counter[str] = Counter()
        self.watch_errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._watches: list[kubernetes.watch.Watch] = []
        self._threads = [
            threading.Thread(target=self._run, args=(kind,), daemon=True, name=f"monitor-{kind}")
            for kind in ("nodes", "pods", "daemonsets")
        ]

    def __enter__(self) -> InvariantMonitor:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for w in list(self._watches):
            w.stop()
        for thread in self._threads:
            thread.join(10)

    # -- watching --

    def _list_fn(self, kind: str) -> tuple[Callable[..., Any], dict[str, str]]:
        if kind == "nodes":
            return self._core.list_node, {"label_selector": GPU_NODE_SELECTOR}
        if kind == "pods":
            return self._core.list_namespaced_pod, {"namespace": NAMESPACE, "label_selector": DRIVER_SELECTOR}
        return self._apps.list_namespaced_daemon_set, {
            "namespace": NAMESPACE,
            "label_selector": DRIVER_SELECTOR,
        }

    def _run(self, kind: str) -> None:
        list_fn, kwargs = self._list_fn(kind)
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    listed = json.loads(list_fn(_preload_content=False, **kwargs).data)
                    self.relists[kind] += 1
                    version = listed["metadata"]["resourceVersion"]
                    self._replace(kind, listed["items"])
                w = kubernetes.watch.Watch()
                self._watches.append(w)
                for event in w.stream(
                    list_fn,
                    resource_version=version,
                    timeout_seconds=30,
                    allow_watch_bookmarks=True,
                    deserialize=False,
                    **kwargs,
                ):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        # 410 Gone: the version we resume from is compacted away; list again.
                        self.watch_errors[f"{kind} {obj.get('code')}"] += 1
                        version = ""
                        break
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        self._record(kind, event["type"], obj)
                    if self._stop.is_set():
                        break
                self._watches.remove(w)
            except Exception as error:  # cut connection: resume from the last version
                if (isinstance(error, ApiException) and error.status == 410) or isinstance(error, KeyError):
                    # NB: KeyError is the client failing on an ERROR event (410 Gone) when not
                    # deserializing (it reads event["raw_object"]): list again.
                    self.watch_errors[f"{kind} 410"] += 1
                    version = ""
                if not self._stop.is_set():
                    time.sleep(0.5)

    def _replace(self, kind: str, items: list[Mapping[str, Any]]) -> None:
        """A fresh LIST: forget what is no longer there, record what is."""
        names = {str(i["metadata"]["name"]) for i in items}
        uids = {str(i["metadata"].get("uid")) for i in items}
        with self.lock:
            if kind == "nodes":
                for gone in set(self.node_state) - names:
                    self.node_state.pop(gone, None)
            elif kind == "pods":
                for gone in set(self.pods) - uids:
                    del self.pods[gone]
            else:
                for gone in set(self.daemonsets) - names:
                    del self.daemonsets[gone]
        for item in items:
            self._record(kind, "ADDED", item)

    def _violate(self, invariant: str, detail: str) -> None:
        """Caller holds the lock."""
        self.violation_counts[invariant] += 1
        if len(self.violations[invariant]) < _KEEP:
            self.violations[invariant].append(
                Violation(invariant, round(time.monotonic() - self.t0, 2), detail)
            )

    def _record(self, kind: str, type_: str, obj: Mapping[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        name = str(metadata.get("name", ""))
        with self.lock:
            self.events += 1
            if kind == "nodes":
                self.node_events += 1
            if kind == "nodes":
                self._record_node(type_, name, obj)
            elif kind == "pods":
                self._record_pod(type_, name, obj)
            else:
                self._record_daemonset(type_, name, obj)

    def _record_node(self, type_: str, name: str, obj: Mapping[str, Any]) -> None:
        if type_ == "DELETED":
            self.node_state.pop(name, None)
            return
        state = str(((obj.get("metadata") or {}).get("labels") or {}).get(labels.UPGRADE_STATE, ""))
        unschedulable = bool((obj.get("spec") or {}).get("unschedulable"))
        if self.node_state.get(name) != state:
            now = round(time.monotonic() - self.t0, 3)
            self._count_free_slots(now)
            self.timeline.setdefault(name, []).append((now, state))
        self.node_state[name] = state
        self.node_unschedulable[name] = unschedulable
        if name in self.admin and not unschedulable:
            self._violate(ADMIN_CORDON_LIFTED, f"{name} schedulable")
        in_flight = sum(s in IN_FLIGHT for s in self.node_state.values())
        self.max_in_flight = max(self.max_in_flight, in_flight)
        if in_flight > self.budget:
            busy = sorted(n for n, s in self.node_state.items() if s in IN_FLIGHT)
            self._violate(OVER_BUDGET, f"{in_flight} > {self.budget}: {busy}")

    def _record_pod(self, type_: str, name: str, obj: Mapping[str, Any]) -> None:
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        if type_ == "DELETED" or not node:
            self.pods.pop(uid, None)
            return
        self.pods[uid] = (node, name)
        self._mark_pod(node, uid, obj)
        on_node = sorted(n for n_node, n in self.pods.values() if n_node == node)
        self.max_driver_pods_on_a_node = max(self.max_driver_pods_on_a_node, len(on_node))
        if len(on_node) > 1:
            self._violate(TWO_DRIVER_PODS, f"{node}: {on_node}")

    def _record_daemonset(self, type_: str, name: str, obj: Mapping[str, Any]) -> None:
        if type_ == "DELETED" or (obj.get("metadata") or {}).get("deletionTimestamp"):
            self.daemonsets.pop(name, None)
            return
        template = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        selector = json.dumps(template.get("nodeSelector") or {}, sort_keys=True)
        self.daemonsets[name] = selector
        same = sorted(n for n, s in self.daemonsets.items() if s == selector)
        if len(same) > 1:
            self._violate(DUPLICATE_DAEMONSET, f"{same} select {selector}")

    def _mark_pod(self, node: str, uid: str, obj: Mapping[str, Any]) -> None:
        """When a driver pod on ``node`` began to terminate, or first turned Ready (caller holds the lock)."""
        deleting = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
        mark = "deleting" if deleting else "ready" if _ready(obj) else ""
        if mark and (uid, mark) not in self._pod_marked:
            self._pod_marked.add((uid, mark))
            self.pod_marks.setdefault(node, []).append((round(time.monotonic() - self.t0, 3), mark))

    def _count_free_slots(self, now: float) -> None:
        """Add the node-seconds since the last state change in which a slot was free and a
        node waited in upgrade-required (caller holds the lock)."""
        waiting = sum(s == "upgrade-required" for s in self.node_state.values())
        free = self.budget - sum(s in IN_FLIGHT for s in self.node_state.values())
        if waiting and free > 0:
            self.free_slot_node_s += (now - self._last_node_change) * min(waiting, free)
        self._last_node_change = now

    def check_stuck(self) -> None:
        """Record every node that has stayed in an in-flight state longer than its limit
        (`state_limits`), once per stay; called every second by the run."""
        now = time.monotonic() - self.t0
        with self.lock:
            for name, timeline in self.timeline.items():
                since, state = timeline[-1]
                limit = self.limits.get(state)
                if limit is not None and now - since > limit and (name, since) not in self._stuck_flagged:
                    self._stuck_flagged.add((name, since))
                    self._violate(
                        NODE_STUCK, f"{name} in {state} for {now - since:.0f} s (limit {limit:.0f} s)"
                    )

    def waits(self) -> dict[str, float]:
        """Where the nodes' in-flight time went (node-seconds): waiting on pods (the validator;
        from the old driver pod's deletion to a new Ready one), the rest on the operator (its
        label writes and actions, a restart after a kill); and the free-slot node-seconds."""
        end = time.monotonic() - self.t0
        in_flight = on_pods = 0.0
        with self.lock:
            for name, timeline in self.timeline.items():
                marks = self.pod_marks.get(name, [])
                for (began, state), (ended, _) in zip(timeline, [*timeline[1:], (end, "")], strict=True):
                    if state not in IN_FLIGHT:
                        continue
                    in_flight += ended - began
                    if state == WAITS_ON_PODS:
                        on_pods += ended - began
                    elif state == RESTART:
                        deleted = next((t for t, m in marks if m == "deleting" and began <= t < ended), None)
                        if deleted is not None:
                            ready = next(
                                (t for t, m in marks if m == "ready" and deleted <= t < ended), ended
                            )
                            on_pods += ready - deleted
            free = self.free_slot_node_s
        on_operator = in_flight - on_pods
        return {
            "in_flight_node_s": round(in_flight, 1),
            "waiting_on_pods_node_s": round(on_pods, 1),
            "waiting_on_operator_node_s": round(on_operator, 1),
            "operator_share": round(on_operator / in_flight, 3) if in_flight else 0.0,
            "free_slot_node_s": round(free, 1),
        }

    # -- questions --

    def states(self) -> Counter[str]:
        with self.lock:
            return Counter(self.node_state.values())

    def all_done(self, count: int) -> bool:
        with self.lock:
            states = list(self.node_state.values())
        return len(states) >= count and all(s == DONE for s in states)

    def report(self) -> dict[str, Any]:
        waits = self.waits()  # NB: takes the lock itself
        with self.lock:
            return {
                "violations": {k: self.violation_counts[k] for k in CONTINUOUS},
                "examples": {
                    k: [dataclasses.asdict(v) for v in vs] for k, vs in self.violations.items() if vs
                },
                "max_in_flight": self.max_in_flight,
                "max_driver_pods_on_a_node": self.max_driver_pods_on_a_node,
                "state_limits_s": self.limits,
                "watch_events": self.events,
                "relists": dict(self.relists),
                "watch_errors": dict(self.watch_errors),
                "waits": waits,
            }


# --- what the end must look like (fresh LISTs) ---------------------------------------------------


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _pod_version(pod: Mapping[str, Any]) -> str:
    """The driver version in the pod's driver image tag (``...:510.85.02-rhcos4.17``)."""
    for container in (pod.get("spec") or {}).get("containers") or ():
        tag = str(container.get("image", "")).rpartition(":")[2]
        if tag[:1].isdigit():
            return tag.split("-")[0]
    return ""


def _raw_list(call: Callable[..., Any], **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(call(_preload_content=False, **kwargs).data)["items"]
    return items


@dataclasses.dataclass(frozen=True)
class OperandObject:
    kind: str
    name: str


def list_operand_objects(api: ApiClient) -> set[OperandObject]:
    """Every object labelled as ours (managed-by ocp-gpu) in the operand namespace and
    cluster-wide: ServiceAccounts, Roles, RoleBindings, ConfigMaps, DaemonSets,
    ClusterRoles, ClusterRoleBindings."""
    core = kubernetes.client.CoreV1Api(api)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    apps = kubernetes.client.AppsV1Api(api)
    calls: dict[str, tuple[Callable[..., Any], dict[str, str]]] = {
        "ServiceAccount": (core.list_namespaced_service_account, {"namespace": NAMESPACE}),
        "ConfigMap": (core.list_namespaced_config_map, {"namespace": NAMESPACE}),
        "Role": (rbac.list_namespaced_role, {"namespace": NAMESPACE}),
        "RoleBinding": (rbac.list_namespaced_role_binding, {"namespace": NAMESPACE}),
        "DaemonSet": (apps.list_namespaced_daemon_set, {"namespace": NAMESPACE}),
        "ClusterRole": (rbac.list_cluster_role, {}),
        "ClusterRoleBinding": (rbac.list_cluster_role_binding, {}),
    }
    found: set[OperandObject] = set()
    for kind, (call, kwargs) in calls.items():
        for item in _raw_list(call, label_selector=MANAGED_SELECTOR, **kwargs):
            if not item["metadata"].get("deletionTimestamp"):
                found.add(OperandObject(kind, item["metadata"]["name"]))
    return found


def _never_raising(check: Callable[P, list[str]]) -> Callable[P, list[str]]:
    """`check`, or the reason the cluster cannot be read now (the apiserver is restarting):
    never raises, so a check made during an outage only says "not yet"."""

    @functools.wraps(check)
    def checked(*args: P.args, **kwargs: P.kwargs) -> list[str]:
        try:
            return check(*args, **kwargs)
        except Exception as error:
            return [f"cannot read the cluster: {type(error).__name__}"]

    return checked


def final_problems(
    api: ApiClient,
    names: Iterable[str],
    admin_cordoned: Iterable[str],
    operands_before: set[OperandObject],
    version: str = VERSION_B,
    *,
    stack: bool = False,
) -> list[str]:
    """What is wrong with the cluster now, against the end invariants (empty: all hold);
    ``stack``: also the rest of the stack (`stack_problems`)."""
    core = kubernetes.client.CoreV1Api(api)
    apps = kubernetes.client.AppsV1Api(api)
    custom = kubernetes.client.CustomObjectsApi(api)
    problems: list[str] = []
    expected = set(names)
    admin = set(admin_cordoned)
    gpu_nodes = {
        n["metadata"]["name"]: n for n in _raw_list(core.list_node, label_selector=GPU_NODE_SELECTOR)
    }
    daemonsets = {
        d["metadata"]["name"]: d
        for d in _raw_list(
            apps.list_namespaced_daemon_set, namespace=NAMESPACE, label_selector=DRIVER_SELECTOR
        )
    }
    pods = _raw_list(core.list_namespaced_pod, namespace=NAMESPACE, label_selector=DRIVER_SELECTOR)
    policy = custom.get_cluster_custom_object(
        apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, POLICY
    )
    policy_uid = policy["metadata"]["uid"]

    if missing := sorted(expected - set(gpu_nodes)):
        problems.append(f"GPU nodes missing: {missing[:5]}")
    rhcos_present: Counter[str] = Counter()
    pods_by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        if node := (pod.get("spec") or {}).get("nodeName"):
            pods_by_node.setdefault(node, []).append(pod)
    cordoned, not_done, no_pod, stale_pod, two_pods = [], [], [], [], []
    for name, node in gpu_nodes.items():
        node_labels = node["metadata"].get("labels") or {}
        rhcos = node_labels.get(labels.OSTREE_VERSION, "")
        rhcos_present[rhcos] += 1
        unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        if name in admin and not unschedulable:
            problems.append(f"admin cordon lifted on {name}")
        elif name not in admin and unschedulable:
            cordoned.append(name)
        if node_labels.get(labels.UPGRADE_STATE) != DONE:
            not_done.append(f"{name}={node_labels.get(labels.UPGRADE_STATE)}")
        on_node = pods_by_node.get(name, [])
        if len(on_node) > 1:
            two_pods.append(name)
        if not on_node:
            no_pod.append(name)
            continue
        pod = on_node[0]
        owner = next(
            (r["name"] for r in pod["metadata"].get("ownerReferences") or () if r.get("controller")), ""
        )
        selector = ((daemonsets.get(owner) or {}).get("spec") or {}).get("template", {}).get("spec", {})
        matches = (selector.get("nodeSelector") or {}).get(labels.OSTREE_VERSION, rhcos) == rhcos
        why = [
            what
            for what, wrong in (
                ("terminating", bool(pod["metadata"].get("deletionTimestamp"))),
                ("not Ready", not _ready(pod)),
                (f"version {_pod_version(pod)}", _pod_version(pod) != version),
                (f"owner {owner or '-'} gone", owner not in daemonsets),
                ("DaemonSet of another RHCOS", not matches),
            )
            if wrong
        ]
        if why:
            stale_pod.append(f"{name}:{pod['metadata']['name']} ({', '.join(why)})")
    for what, found in (
        ("nodes left cordoned", cordoned),
        ("nodes not upgrade-done", not_done),
        ("nodes without a driver pod", no_pod),
        ("nodes whose driver pod is not current and Ready", stale_pod),
        ("nodes with two driver pods", two_pods),
    ):
        if found:
            problems.append(f"{what} ({len(found)}): {sorted(found)[:5]}")

    by_rhcos: dict[str, list[str]] = {}
    for ds_name, ds in daemonsets.items():
        if ds["metadata"].get("deletionTimestamp"):
            continue
        owners = [r.get("uid") for r in ds["metadata"].get("ownerReferences") or ()]
        if policy_uid not in owners:
            problems.append(f"orphan DaemonSet {ds_name} (owners {owners})")
        node_selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
        by_rhcos.setdefault(node_selector.get(labels.OSTREE_VERSION, ""), []).append(ds_name)
    for rhcos, ds_names in by_rhcos.items():
        if len(ds_names) > 1:
            problems.append(f"duplicate DaemonSets for RHCOS {rhcos}: {sorted(ds_names)}")
        if rhcos not in rhcos_present:
            problems.append(f"DaemonSets {ds_names} for RHCOS {rhcos}, which no GPU node runs")
    if absent := sorted(set(rhcos_present) - set(by_rhcos)):
        problems.append(f"no driver DaemonSet for RHCOS {absent}")

    now = list_operand_objects(api)
    lost = sorted(
        f"{o.kind}/{o.name}"
        for o in operands_before - now
        if not (o.kind == "DaemonSet" and o.name.startswith(labels.DRIVER_APP))
    )
    if lost:
        problems.append(f"operand objects missing: {lost}")
    if stack:
        problems += stack_problems(api, policy)
    return problems


def stack_problems(api: ApiClient, policy: Mapping[str, Any]) -> list[str]:
    """Every operand DaemonSet but the drivers' rolled out (all its pods current) and Ready on
    every node it targets, as its controller counts them, and no pre-pull DaemonSet left; the
    ClusterPolicy `ready`, with no UpgradePreflight condition (ClusterVersion says Completed by then)."""
    problems: list[str] = []
    apps = kubernetes.client.AppsV1Api(api)
    behind = []
    for ds in _raw_list(
        apps.list_namespaced_daemon_set, namespace=NAMESPACE, label_selector=MANAGED_SELECTOR
    ):
        meta = ds["metadata"]
        if (
            meta.get("deletionTimestamp")
            or (meta.get("labels") or {}).get(labels.COMPONENT) == labels.DRIVER_COMPONENT
        ):
            continue
        if (meta.get("labels") or {}).get(labels.COMPONENT) == PREPULL_COMPONENT:
            # ClusterVersion says Completed by now: nothing is left to pull
            problems.append(f"pre-pull DaemonSet {meta['name']} left after the upgrade")
            continue
        status = ds.get("status") or {}
        desired = status.get("desiredNumberScheduled", 0)
        counts = (status.get("numberReady", 0), status.get("updatedNumberScheduled", 0))
        # NB: 0 desired is fine (MIG manager: no MIG-capable node)
        if counts != (desired, desired) or status.get("observedGeneration") != meta.get("generation"):
            behind.append(f"{meta['name']} ready/updated/desired {counts[0]}/{counts[1]}/{desired}")
    if behind:
        problems.append(f"operand DaemonSets not rolled out and Ready ({len(behind)}): {sorted(behind)[:5]}")
    status = policy.get("status") or {}
    if status.get("state") != "ready":
        problems.append(f"ClusterPolicy state {status.get('state')!r}, not 'ready'")
    if any(c.get("type") == "UpgradePreflight" for c in status.get("conditions") or ()):
        problems.append("ClusterPolicy still has an UpgradePreflight condition")
    return problems


# --- the audit log -----------------------------------------------------------------------


# `final_problems` while faults may be under way.
current_problems = _never_raising(final_problems)


class AuditWindow:
    """Audit events written from `start` on, across the apiserver's log rotation and restarts
    (the apiserver appends); also bench/upgrades_at_scale.py's.

    NB: the apiserver's audit log rotates at 100 MB (lumberjack's default: a renamed file, a new
    audit.log); at 1,000 nodes kwok's Lease renewals alone log ~100 lines/s, so a long window
    spans files. We read the file the window started in from its offset, then every newer file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._inode = 0
        self._offset = 0
        self._started = 0.0

    def start(self) -> AuditWindow:
        stat = self.path.stat()
        self._inode, self._offset, self._started = stat.st_ino, stat.st_size, time.time()
        return self

    def lines(self) -> Iterable[bytes]:
        files = sorted(self.path.parent.glob("*.log"), key=lambda p: p.stat().st_mtime)
        seen_start = False
        for file in files:
            stat = file.stat()
            if stat.st_ino == self._inode:
                seen_start = True
                with file.open("rb") as f:
                    f.seek(self._offset)
                    yield from f
            elif seen_start or stat.st_mtime >= self._started:
                with file.open("rb") as f:
                    yield from f

    def writes(self, username: str) -> Counter[str]:
        """``username``'s writes by "<verb> <resource>[/<subresource>]", Leases apart."""
        needle = f'"username":"{username}"'.encode()
        found: Counter[str] = Counter()
        for line in self.lines():
            if needle not in line or not line.strip():
                continue
            event = json.loads(line)
            if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
                continue
            if (event.get("user") or {}).get("username") != username:
                continue
            ref = event.get("objectRef") or {}
            group = ref.get("apiGroup") or ""
            resource = ref.get("resource", "") + (f".{group}" if group else "")
            if resource == LEASES:
                continue
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            found[f"{event.get('verb')} {resource}"] += 1
        return found

    def writes_per_minute(self, username: str, bucket_s: float = 60.0) -> list[int]:
        """``username``'s writes (Leases apart) per ``bucket_s`` window since `start`."""
        needle = f'"username":"{username}"'.encode()
        buckets: Counter[int] = Counter()
        for line in self.lines():
            if needle not in line:
                continue
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if event.get("verb") not in WRITE_VERBS or ref.get("resource") == "leases":
                continue
            stamp = event.get("stageTimestamp", "").replace("Z", "+00:00")

            moment = datetime.datetime.fromisoformat(stamp).timestamp()
            buckets[int((moment - self._started) // bucket_s)] += 1
        return [buckets[i] for i in range(max(buckets, default=-1) + 1)]


# --- the run -----------------------------------------------------------------------------------


@dataclasses.dataclass
class ChaosResult:
    config: dict[str, Any]
    completed: bool = False
    wall_s: float = 0.0
    # problems at the end (empty: every end invariant holds)
    final_problems: list[str] = dataclasses.field(default_factory=list)
    monitor: dict[str, Any] = dataclasses.field(default_factory=dict)
    faults_planned: int = 0
    faults_fired: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    faults_before_done: int = 0
    operator_exits_not_ours: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Exits not ours and not explained by an apiserver outage (a leader that cannot renew
    # its Lease exits on purpose, see ocp_gpu/operator.py): crashes.
    operator_crashes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Exits because the Lease could not be renewed in time (the operator's design).
    operator_lease_losses: int = 0
    operator_starts: int = 0
    writes: dict[str, int] = dataclasses.field(default_factory=dict)
    writes_total: int = 0
    writes_per_node: float = 0.0
    compaction_410: list[bool] = dataclasses.field(default_factory=list)
    # Kills that followed a node write by at most a few ms (see _FaultRunner._await_operator_write).
    kills_mid_pass: int = 0
    # Kills that found the replica leading (holding the Lease, so acting), not starting or standing by.
    kills_on_leader: int = 0
    mco_s: float | None = None
    mco_error: str = ""
    # each MachineConfigPool: its nodes, maxUnavailable, seconds to roll
    pools: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # when ClusterVersion said Completed (the openshift_upgrade scenario)
    openshift_completed_s: float | None = None
    setup_s: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def continuous_violations(self) -> int:
        return int(sum(self.monitor.get("violations", {}).values()))

    @property
    def ok(self) -> bool:
        return (
            self.completed
            # a run whose faults did not all fire is no run with those faults
            and len(self.faults_fired) == self.faults_planned
            and not self.final_problems
            and self.continuous_violations == 0
            and not self.operator_crashes
        )


def _wait(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.5) -> None:
    polling.wait_for(check, timeout, what=what, interval=interval)


def install_crd(api: ApiClient) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(api)
    crd = yaml.safe_load(CRD_PATH.read_text())
    ext.create_custom_resource_definition(crd)
    crds.wait_until_served(api, [crd["metadata"]["name"]])


def create_namespace(api: ApiClient, name: str) -> None:
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    _wait(
        f"the default ServiceAccount of {name}",
        lambda: bool(
            core.list_namespaced_service_account(name, field_selector="metadata.name=default").items
        ),
        60,
        0.2,
    )


def policy_body(max_parallel: int, version: str = VERSION_A) -> dict[str, Any]:
    return {
        "apiVersion": apis.POLICY_API_VERSION,
        "kind": apis.POLICY_KIND,
        "metadata": {"name": POLICY},
        "spec": {
            "driver": {
                "version": version,
                "upgradePolicy": {
                    "autoUpgrade": True,
                    "maxParallelUpgrades": max_parallel,
                    "maxUnavailable": "100%",
                },
            }
        },
    }


def operator_factory(
    cp: LocalControlPlane,
    index: int,
    cwd: Path | None,
    env: Mapping[str, str] | None = None,
    *,
    identity: str | None = None,
    lease_s: tuple[float, float, float] = (4.0, 3.0, 0.5),
) -> Callable[[], OperatorProcess]:
    """`ocp-gpu run` as `OPERATOR_USER` under the shipped RBAC (every replica: the audit log sums them), short
    Leases (4 s; ``lease_s``) and upgrade re-checks every second, as the e2e tests run it; ``identity``:
    every start under that Lease identity (the same pod), else a new one each time."""
    # The RBAC the operator ships with, not an admin's (harness/rbac.py).
    kubeconfig = operator_rbac.operator_kubeconfig(cp, OPERATOR_USER, NAMESPACE, name=f"operator-{index}")

    def make() -> OperatorProcess:
        return OperatorProcess(
            kubeconfig,
            NAMESPACE,
            cp.logs_dir / f"operator-{index}.log",
            extra_args=[
                "--lease-duration",
                f"{lease_s[0]:g}",
                "--lease-renew-deadline",
                f"{lease_s[1]:g}",
                "--lease-retry-period",
                f"{lease_s[2]:g}",
            ],
            identity=identity,
            env={"OCP_GPU_UPGRADE_RECHECK_SECONDS": "1", **(env or {})},
            cwd=cwd,
        )

    return make


def _watch_410_since(api: ApiClient, resource_version: str) -> bool:
    """Does a node watch from ``resource_version`` get 410 Gone now?"""
    core = kubernetes.client.CoreV1Api(api)
    w = kubernetes.watch.Watch()
    try:
        for _ in w.stream(
            core.list_node, resource_version=resource_version, timeout_seconds=2, deserialize=False
        ):
            return False
    except ApiException as error:
        return bool(error.status == 410)
    except KeyError:
        # NB: the client (v29-v33) fails on an ERROR event when not deserializing
        # (it reads event["raw_object"]); the only ERROR a watch sends is 410 Gone.
        return True
    finally:
        w.stop()
    return False


class _FaultRunner(threading.Thread):
    """Fires the planned faults at their moments (seconds after ``t0``)."""

    def __init__(
        self,
        cp: LocalControlPlane,
        api: ApiClient,
        supervisor: faults.Supervisor,
        plan: list[tuple[float, str]],
        config: ChaosConfig,
        t0: float,
        log: Callable[[str], None],
        monitor: InvariantMonitor,
    ) -> None:
        super().__init__(daemon=True, name="faults")
        self.monitor = monitor
        self.kills_mid_pass = 0
        self.kills_on_leader = 0
        self.cp, self.api, self.supervisor, self.plan = cp, api, supervisor, plan
        self.config, self.t0, self.log = config, t0, log
        self.fired: list[dict[str, Any]] = []
        self.compaction_410: list[bool] = []
        self.error = ""
        self.stop_event = threading.Event()
        self._rng = random.Random(config.seed + 1)

    def run(self) -> None:
        try:
            for at, kind in self.plan:
                if self.stop_event.wait(max(0.0, self.t0 + at - time.monotonic())):
                    return
                started = round(time.monotonic() - self.t0, 2)
                detail = self._fire(kind)
                self.fired.append(
                    {
                        "started_s": started,
                        "at_s": round(time.monotonic() - self.t0, 2),
                        "kind": kind,
                        "detail": detail,
                    }
                )
        except Exception as error:  # reported, never silently lost
            self.error = f"{type(error).__name__}: {error}"
            self.log(f"fault runner failed: {self.error}")

    def _await_operator_write(self, patience: float = 3.0) -> bool:
        """Wait (at most ``patience`` s) for a node event, so that the kill lands in the
        middle of a pass (right after one of its writes) rather than between passes."""
        seen = self.monitor.node_events
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            if self.monitor.node_events != seen:
                return True
            time.sleep(0.01)
        return False

    def _await_role(self, replica: faults.Replica, role: str, patience: float = LEAD_PATIENCE_S) -> bool:
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline and not self.stop_event.is_set():
            if replica.role() == role:
                return True
            time.sleep(0.1)
        return False

    def _fire(self, kind: str) -> str:
        if kind == KILL_OPERATOR:
            replica = self._rng.choice(self.supervisor.replicas)
            deadline = time.monotonic() + LEAD_PATIENCE_S
            while True:
                if len(self.supervisor.replicas) == 1:
                    # NB: a kill of an operator still starting tests little (session 3: 37 of 50
                    # did); wait until the restarted one leads again, so the kills are spaced by
                    # its restarts and land on an operator at work.
                    self._await_role(replica, "leader", max(0.0, deadline - time.monotonic()))
                mid_pass = self._await_operator_write()
                role = replica.role()
                if role == "leader" or len(self.supervisor.replicas) > 1 or time.monotonic() >= deadline:
                    break
                # NB: it stopped leading while we waited for its write (CI, load 17: a renewal
                # timed out, it let the Lease go and exited, as it must): wait for the restart.
            self.kills_mid_pass += mid_pass
            self.kills_on_leader += role == "leader"
            replica.kill()
            return f"replica {replica.index} ({role}){' mid-pass' if mid_pass else ''}"
        if kind == KILL_LEADER:
            deadline = time.monotonic() + 30
            while (leader := self.supervisor.leader()) is None and time.monotonic() < deadline:
                time.sleep(0.2)
            if leader is None:
                return "no leader to kill within 30 s"
            mid_pass = self._await_operator_write()
            self.kills_mid_pass += mid_pass
            self.kills_on_leader += 1
            leader.kill()
            return f"leader replica {leader.index}{' mid-pass' if mid_pass else ''}"
        if kind == RESTART_APISERVER:
            down = self._rng.uniform(*self.config.apiserver_down_s)
            self.cp.kill_process("kube-apiserver")
            time.sleep(down)
            began = time.monotonic()
            self.cp.restart_process("kube-apiserver", timeout=APISERVER_READY_S)
            return f"down {down:.1f} s, back in {time.monotonic() - began:.1f} s"
        if kind == COMPACT_ETCD:
            core = kubernetes.client.CoreV1Api(self.api)
            listed = json.loads(core.list_node(_preload_content=False, limit=1).data)
            before = listed["metadata"]["resourceVersion"]
            # Something to compact past: the version above must fall behind.
            core.patch_node(
                _first_node(self.api),
                {"metadata": {"annotations": {"ocp-gpu.harness/chaos": str(time.time())}}},
            )
            revision = faults.compact_etcd(self.cp.etcd_url)
            # NB: compaction alone expires no watch served from the apiserver's watch cache
            # (the cache still holds the versions); the restart re-initialises the cache at
            # the compacted revision, so every watch resuming from before gets 410 Gone.
            self.cp.kill_process("kube-apiserver")
            self.cp.restart_process("kube-apiserver", timeout=APISERVER_READY_S)
            gone = _watch_410_since(self.api, before)
            self.compaction_410.append(gone)
            return f"compacted at revision {revision}, apiserver restarted; 410 from {before}: {gone}"
        raise ValueError(f"unknown fault {kind}")


def _first_node(api: ApiClient) -> str:
    items = _raw_list(kubernetes.client.CoreV1Api(api).list_node, label_selector=GPU_NODE_SELECTOR, limit=1)
    return str(items[0]["metadata"]["name"])


def run_chaos(
    cp: LocalControlPlane,
    config: ChaosConfig,
    *,
    operator_cwd: Path | None = None,
    log: Callable[[str], None] = log_to_stdout,
) -> ChaosResult:
    """The scenario of the module docstring on a fresh control plane ``cp``; never raises for
    a broken invariant (the result says), only for a set-up that cannot be done."""
    result = ChaosResult(config=dataclasses.asdict(config))
    began = time.monotonic()
    api = cp.api_client(pool_size=64)
    scale = 1 + config.nodes / 200
    install_crd(api)
    create_namespace(api, NAMESPACE)
    if config.openshift_upgrade:
        # the release of RHCOS_OLD, whose DTK tag alone exists until the upgrade begins
        openshift.install_openshift_apis(api, version=OPENSHIFT_FROM)
        openshift.set_driver_toolkit_tags(api, {RHCOS_OLD: DTK_TAGS[RHCOS_OLD]})
    else:
        openshift.install_openshift_apis(api)
        openshift.set_driver_toolkit_tags(api, DTK_TAGS)
    names = [f"gpu-{i:05d}" for i in range(config.nodes)]
    admin = names[: config.admin_cordoned]
    pools = machine_config_pools(names, config)
    role = {n: pool for pool, members, _ in pools for n in members}
    log(f"creating {config.nodes} GPU nodes on RHCOS {RHCOS_OLD} in {len(pools)} pool(s)")
    nodes.create_nodes(
        api,
        [
            nodes.gpu_node(
                n, rhcos=RHCOS_OLD, unschedulable=n in admin, extra_labels={POOL_ROLE_PREFIX + role[n]: ""}
            )
            for n in names
        ],
        timeout=120 * scale,
        workers=16,
    )
    kubernetes.client.CustomObjectsApi(api).create_cluster_custom_object(
        apis.POLICY_GROUP, apis.POLICY_VERSION, apis.POLICY_PLURAL, policy_body(config.max_parallel)
    )
    replicas = [
        faults.Replica(
            index=i,
            make=operator_factory(
                cp,
                i,
                operator_cwd,
                identity=f"ocp-gpu-operator-{i}" if config.same_pod_restarts else None,
                lease_s=config.lease_s,
            ),
        )
        for i in range(config.replicas)
    ]
    with faults.Supervisor(replicas) as supervisor:
        t_setup = time.monotonic()
        with InvariantMonitor(api, config.max_parallel, admin, t_setup) as setup_watch:
            _wait(
                f"driver {VERSION_A} on every node, upgrade-done",
                lambda: (
                    setup_watch.all_done(config.nodes)
                    and not current_problems(
                        api, names, admin, set(), version=VERSION_A, stack=config.stack_ready
                    )
                ),
                # NB: at 500 nodes under load 15-19 the set-up (2,500 operand pods) took over 1,050 s.
                600 * scale,
                2.0,
            )
        operands = list_operand_objects(api)
        result.setup_s = round(time.monotonic() - began, 1)
        log(
            f"set up in {result.setup_s} s: {len(operands)} operand objects; "
            f"patching the driver to {VERSION_B}"
        )
        plan = plan_faults(config)
        result.faults_planned = len(plan)
        audit = AuditWindow(cp.audit_log).start()
        t0 = time.monotonic()
        with InvariantMonitor(api, config.max_parallel, admin, t0) as monitor:
            kubernetes.client.CustomObjectsApi(api).patch_cluster_custom_object(
                apis.POLICY_GROUP,
                apis.POLICY_VERSION,
                apis.POLICY_PLURAL,
                POLICY,
                {"spec": {"driver": {"version": VERSION_B}}},
            )
            if config.openshift_upgrade:
                # the CVO: the new release is being applied, its DTK tag appears before any node moves
                openshift.start_cluster_update(api, OPENSHIFT_FROM, OPENSHIFT_TO)
                openshift.set_driver_toolkit_tags(api, DTK_TAGS)
            rolling = [
                _MCO(api, name, [n for n in members if n not in admin], max_unavailable, config, t0, log)
                for name, members, max_unavailable in (pools if config.mco else [])
            ]
            runner = _FaultRunner(cp, api, supervisor, plan, config, t0, log, monitor)
            runner.start()
            for mco in rolling:
                mco.start()
            cluster_version_pending = config.openshift_upgrade
            done_at: float | None = None
            stalled_since: float | None = None
            last_report = t0
            deadline = t0 + config.timeout_s
            try:
                while time.monotonic() < deadline:
                    time.sleep(1.0)
                    monitor.check_stuck()
                    if cluster_version_pending and not any(m.is_alive() for m in rolling):
                        # every pool has moved: the CVO says Completed (retried while the apiserver is down)
                        with contextlib.suppress(Exception):
                            openshift.set_cluster_version(api, OPENSHIFT_TO)
                            cluster_version_pending = False
                            result.openshift_completed_s = round(time.monotonic() - t0, 1)
                    if time.monotonic() - last_report > 30:
                        last_report = time.monotonic()
                        log(
                            f"  {time.monotonic() - t0:.0f} s: {dict(monitor.states())}, "
                            f"faults {len(runner.fired)}/{len(plan)}, MCO pools rolling "
                            f"{sum(m.is_alive() for m in rolling)}/{len(rolling)}"
                        )
                    if done_at is not None:
                        if not runner.is_alive():
                            break
                        continue
                    if (
                        not monitor.all_done(config.nodes)
                        or any(m.is_alive() for m in rolling)
                        or cluster_version_pending
                    ):
                        continue
                    problems = current_problems(api, names, admin, operands, stack=config.stack_ready)
                    if not problems:
                        done_at = time.monotonic()
                        result.faults_before_done = len(runner.fired)
                    elif not runner.is_alive():
                        # Every node says upgrade-done and nothing is left to happen, yet an
                        # end invariant fails: give it a while, then report instead of waiting.
                        if stalled_since is None:
                            stalled_since = time.monotonic()
                            log(f"  every node upgrade-done, no fault left, but: {problems}")
                        elif time.monotonic() - stalled_since > STALL_S * scale:
                            result.notes.append(f"stalled {STALL_S * scale:.0f} s with: {problems}")
                            break
            finally:
                runner.stop_event.set()
                runner.join(120)
                for mco in rolling:
                    mco.join(max(1.0, deadline - time.monotonic()))
            # After the last fault, the cluster must (again) satisfy everything.
            stack = config.stack_ready
            if stalled_since is None and not runner.is_alive() and not any(m.is_alive() for m in rolling):
                settle = time.monotonic() + max(60.0, 120 * scale)
                while (
                    current_problems(api, names, admin, operands, stack=stack) and time.monotonic() < settle
                ):
                    time.sleep(2.0)
            result.completed = done_at is not None
            result.wall_s = round((done_at or time.monotonic()) - t0, 1)
            monitor.check_stuck()
            result.final_problems = current_problems(api, names, admin, operands, stack=stack)
            result.monitor = monitor.report()
        result.faults_fired = runner.fired
        if runner.error:
            result.notes.append(f"fault runner: {runner.error}")
        result.compaction_410 = runner.compaction_410
        result.kills_mid_pass = runner.kills_mid_pass
        result.kills_on_leader = runner.kills_on_leader
        if rolling:
            result.mco_s = max((m.seconds or 0.0) for m in rolling)
            result.mco_error = "; ".join(f"{m.pool}: {m.error}" for m in rolling if m.error)
            result.pools = [
                {
                    "pool": m.pool,
                    "nodes": len(m.pool_nodes),
                    "max_unavailable": m.max_unavailable,
                    "s": m.seconds,
                }
                for m in rolling
            ]
        # The last kill can land just before the end: count its restart, not a race with it.
        if not supervisor.wait_restarted(10.0):
            result.notes.append("a replica was not running again 10 s after the end")
        # NB: one snapshot, taken with the supervisor paused: a replica exiting (a Lease lost on
        # a loaded machine) between reading its exits and its starts counted a start without
        # its exit (the restart count of test_chaos failed in a full run, issue 30).
        with supervisor.paused():
            exits = supervisor.unexpected_exits()
            result.operator_starts = sum(r.starts for r in supervisor.replicas)
        result.operator_exits_not_ours = [dataclasses.asdict(e) for e in exits]
        outages = [
            (f["started_s"], f["at_s"] + LEASE_LOSS_GRACE_S)
            for f in runner.fired
            if f["kind"] in (RESTART_APISERVER, COMPACT_ETCD)
        ]
        for exit_, record in zip(result.operator_exits_not_ours, exits, strict=True):
            exit_["at"] = round(exit_["at"] - t0, 2)
            exit_["log_tail"] = exit_["log_tail"][-600:]
            if record.lease_lost:
                # Not a crash: a leader that cannot renew in time steps down on purpose
                # (apiserver down, or the machine too busy to renew within the deadline).
                result.operator_lease_losses += 1
            elif not any(start <= exit_["at"] <= end for start, end in outages):
                result.operator_crashes.append(exit_)
    writes = audit.writes(OPERATOR_USER)
    result.writes = dict(sorted(writes.items()))
    result.writes_total = sum(writes.values())
    result.writes_per_node = round(result.writes_total / max(1, config.nodes), 2)
    if not result.completed:
        result.notes.append(f"not finished within {config.timeout_s:.0f} s")
    return result


def machine_config_pools(names: list[str], config: ChaosConfig) -> list[tuple[str, list[str], int]]:
    """(pool, its nodes, maxUnavailable) of each MachineConfigPool: the nodes in contiguous
    runs, one per entry of ``pool_max_unavailable`` (or one pool, `worker`)."""
    limits = config.pool_max_unavailable or (config.mco_max_unavailable,)
    if len(limits) == 1:
        return [("worker", list(names), limits[0])]
    size = -(-len(names) // len(limits))
    return [(f"gpu-{i + 1}", names[i * size : (i + 1) * size], limit) for i, limit in enumerate(limits)]


class _MCO(threading.Thread):
    """The Machine Config Operator rolling one pool to RHCOS_NEW (`nodes.simulate_mco_update`)."""

    def __init__(
        self,
        api: ApiClient,
        pool: str,
        pool_nodes: list[str],
        max_unavailable: int,
        config: ChaosConfig,
        t0: float,
        log: Callable[[str], None],
    ) -> None:
        super().__init__(daemon=True, name=f"mco-{pool}")
        self.api, self.pool, self.pool_nodes, self.config, self.t0, self.log = (
            api,
            pool,
            pool_nodes,
            config,
            t0,
            log,
        )
        self.max_unavailable = max_unavailable
        self.seconds: float | None = None
        self.error = ""

    def run(self) -> None:
        # Retried: the apiserver may be down in the middle of a node's update.
        remaining = list(self.pool_nodes)
        while remaining and time.monotonic() - self.t0 < self.config.timeout_s:
            batch = remaining[: self.max_unavailable]
            try:
                nodes.simulate_mco_update(
                    self.api,
                    batch,
                    RHCOS_NEW,
                    max_unavailable=self.max_unavailable,
                    drain_timeout=300,
                )
                remaining = remaining[len(batch) :]
            except Exception as error:  # the apiserver restarting: try the batch again
                self.error = f"{type(error).__name__} (retried)"
                time.sleep(1.0)
        self.seconds = round(time.monotonic() - self.t0, 1)
        if remaining:
            self.error = f"{len(remaining)} nodes not moved"
        self.log(f"  MCO: pool {self.pool} on {RHCOS_NEW} after {self.seconds} s")


def summary_rows(result: ChaosResult) -> list[tuple[str, str]]:
    """One line per measured thing, for a printed table."""
    monitor = result.monitor
    waits = monitor.get("waits") or {}
    return [
        ("ok: completed, every planned fault fired, no violation, no crash", f"{result.ok}"),
        ("completed (every end invariant held)", f"{result.completed}"),
        ("wall: version patch -> every node upgrade-done", f"{result.wall_s} s"),
        (
            "faults planned / fired / before done",
            f"{result.faults_planned} / {len(result.faults_fired)} / {result.faults_before_done}",
        ),
        (
            "operator starts / exits we did not cause",
            f"{result.operator_starts} / {len(result.operator_exits_not_ours)} "
            f"(Lease lost: {result.operator_lease_losses}, crashes: {len(result.operator_crashes)})",
        ),
        (
            "kills that hit a leading operator / right after a node write",
            f"{result.kills_on_leader} / {result.kills_mid_pass}",
        ),
        (
            "compactions whose old version got 410",
            f"{sum(result.compaction_410)} / {len(result.compaction_410)}",
        ),
        *((f"violations: {name}", str(monitor.get("violations", {}).get(name, "-"))) for name in CONTINUOUS),
        ("largest in flight / budget", f"{monitor.get('max_in_flight')} / {result.config['max_parallel']}"),
        ("most driver pods seen on one node", f"{monitor.get('max_driver_pods_on_a_node')}"),
        ("end problems", "; ".join(result.final_problems) or "none"),
        (
            "operator writes (audit, Leases apart)",
            f"{result.writes_total} ({result.writes_per_node} per node)",
        ),
        ("MCO pool migration", f"{result.mco_s} s {result.mco_error}".strip()),
        *(
            (f"  pool {p['pool']} ({p['nodes']} nodes, maxUnavailable {p['max_unavailable']})", f"{p['s']} s")
            for p in result.pools
            if len(result.pools) > 1
        ),
        *(
            (("ClusterVersion Completed after", f"{result.openshift_completed_s} s"),)
            if result.openshift_completed_s is not None
            else ()
        ),
        (
            "nodes' in-flight time: on the operator / on pods (node-s)",
            f"{waits.get('waiting_on_operator_node_s')} / {waits.get('waiting_on_pods_node_s')} "
            f"(operator's share {100 * waits.get('operator_share', 0):.1f}%)",
        ),
        ("free slot while a node waited (node-s)", f"{waits.get('free_slot_node_s')}"),
        (
            "monitor watch events / relists / errors",
            f"{monitor.get('watch_events')} / {monitor.get('relists')} / {monitor.get('watch_errors')}",
        ),
    ]

"""Driver DaemonSets at scale: how fast, how quiet and how small the operator is at N GPU nodes.

For each size N (default 100, 1,000 and 5,000) this starts a fresh local control plane
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok; see
``ocp_gpu_harness``) in OpenShift mode, creates N fake GPU nodes on one RHCOS build V1,
starts ``ocp-gpu run`` as its own user and measures, in this order:

startup
    Operator start -> its V1 DaemonSet exists (first pass applied it) -> the policy
    status lists that DaemonSet with all N nodes (the first *full* pass is done: every
    node labelled, the DaemonSet applied, status written) -> the policy is ``ready``
    (every driver pod Ready: mostly the DaemonSet controller's, scheduler's and
    kwok's time, not ours).

steady state
    After the operator has settled, a quiet window (60 s by default) during which
    nothing changes but kwok's node heartbeats (each node's status every 10-20 min,
    its Lease every 10 s). Counted from the apiserver's audit log, by the operator's
    user: writes other than ``leases.coordination.k8s.io`` (target 0: a write in a
    quiet cluster is a bug, and at 5,000 nodes a per-node write is a storm) and,
    separately, its leader-Lease renewals (expected: one per retry period). Also
    the operator's CPU seconds in the window (from /proc/<pid>/stat; what
    processing heartbeats costs) and its RSS at the end (VmRSS: the idle footprint).

new RHCOS version -> its DaemonSet
    K nodes (20 by default), one at a time, move to a fresh build V_i the way a node
    does after an OS update: the kubelet's ``status.nodeInfo.osImage`` first, then
    (after the operator is idle again) NFD's ``OSTREE_VERSION`` label. Latency is
    from the label patch's response to the DaemonSet's ADDED event arriving on our
    own watch: what an admin (or a waiting MCO drain) would observe. Each move starts
    from an idle operator, so this is the latency of one change, not of a queue.

last node leaves a version -> its DaemonSet deleted
    Each of those nodes then moves back to V1 (osImage, settle, then the label).
    Latency is from the label patch's response to the DELETED event. It has two
    parts: the DaemonSet controller must first report ``desiredNumberScheduled == 0``
    and ``numberMisscheduled == 0`` (the operator's GC guard); then the operator
    re-reads the nodes and deletes. We split it at the first watch event showing
    those zeros: the part after it is ours. The operator's "deleted stale driver
    DaemonSet" log line gives a second, in-process view of the same.

    By default (``--pattern pairs``) each node goes out and straight back, so at most
    two driver DaemonSets exist, as during an OpenShift upgrade, and the numbers show
    how latency grows with nodes. ``--pattern accumulate`` moves all K out first (up
    to K+1 DaemonSets), then all back: how latency grows with DaemonSets, since every
    pass renders every one of them (``bench/pass_cost.py`` isolates that cost).

memory
    VmRSS after the first full pass, idle (end of the quiet window), and VmHWM (the
    peak over the whole run). NB: CPython rarely returns freed arenas, so idle RSS sits
    near the peak of the startup burst, not near the live data.

load
    Cores used per phase by the machine, by each control plane process, by the
    operator and by everything else ("foreign": other people's builds and tests on a
    shared machine). On two cores a foreign load of 1.5 cores slows the operator and
    the control plane several times over: read latencies with it.

The operator runs from HEAD's committed code (``--source head``, extracted to a temp
dir) so that numbers belong to a commit; ``--source tree`` runs the working tree.
When kwok cannot keep N nodes Ready (node Leases renewed too slowly) the run goes on
"degraded" and says so: nodes then flap, and DaemonSet statuses with them.

Each size prints a table and writes ``bench/results/drivers-<N>.json``. Every wait has
a timeout; the control plane and the operator are always stopped.

Run: ``.venv/bin/python bench/drivers_at_scale.py [--nodes 100 1000 5000]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Final

import _proc
import kubernetes.client
import kubernetes.watch
from _common import operator_sources
from kubernetes.client import ApiClient

from ocp_gpu.model import labels
from ocp_gpu_harness import binaries, nodes, openshift
from ocp_gpu_harness.chaos import install_crd
from ocp_gpu_harness.cluster import LEASES, WRITE_VERBS, LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

REPO: Final = Path(__file__).resolve().parents[1]
RESULTS_DIR: Final = REPO / "bench" / "results"

OPERATOR_USER: Final = "ocp-gpu-operator"
NAMESPACE: Final = labels.OPENSHIFT_NAMESPACE
POLICY: Final = "cluster-policy"
V1: Final = nodes.DEFAULT_RHCOS
DTK_IMAGE: Final = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
# The operator's reconcile-pass counter: unchanged (and no CPU burnt) means idle.
RECONCILES: Final = "gpu_operator_reconciliation_total"
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")
MIB: Final = 1024 * 1024


def log(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", flush=True)


def fresh_version(i: int) -> str:
    """The i-th made-up RHCOS 4.16 build, distinct from V1 and valid as a label and a name."""
    return f"416.94.20240801{i:04d}-0"


def os_image(version: str) -> str:
    return f"Red Hat Enterprise Linux CoreOS {version} (Plow)"


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (with 20 samples, p99 is the maximum)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def summarize(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else math.nan,
    }


def wait_until(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.2) -> float:
    """Poll ``check`` until true; return the seconds it took, or raise TimeoutError."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - began


# --- /proc -------------------------------------------------------------------------------------


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all cores, every process) since boot."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(f) for f in fields]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / CLOCK_TICKS


class CpuMeter:
    """Cores used during a phase: the whole machine, the operator, and everyone else.

    "Foreign" is what neither this benchmark's cluster, its operator nor this process
    used: other people's builds and tests on a shared machine. NB: on two cores, a
    foreign load of one core halves what the control plane and the operator get.
    """

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = dict(pids)

    def _sample(self) -> tuple[float, float, dict[str, float]]:
        own = {name: _proc.cpu_s(pid) for name, pid in self.pids.items()}
        own["bench"] = _proc.own_cpu_s(os.getpid())
        return time.monotonic(), machine_busy_seconds(), own

    def __enter__(self) -> CpuMeter:
        self._before = self._sample()
        return self

    def __exit__(self, *_: object) -> None:
        after = self._sample()
        wall = max(after[0] - self._before[0], 1e-9)
        used = {name: after[2][name] - self._before[2][name] for name in after[2]}
        machine = after[1] - self._before[1]
        self.cores = {
            "machine": round(machine / wall, 2),
            "foreign": round(max(0.0, machine - sum(v for v in used.values() if v == v)) / wall, 2),
            **{name: round(v / wall, 2) for name, v in used.items() if v == v},
        }


class RssSampler:
    """Samples a process's VmRSS twice a second in the background; keeps the maximum seen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.max_rss_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.max_rss_kib = max(self.max_rss_kib, _proc.status_kib(self.pid, "VmRSS"))


# --- the audit log -----------------------------------------------------------------------------


class AuditWindow:
    """Write requests logged by the apiserver between `start` and `stop`, read once at the end.

    NB: not `LocalControlPlane.count_writes`, which keeps every line since the cluster
    started in memory: at 5,000 nodes kwok's Lease renewals alone log ~500 lines/s.
    The apiserver rotates the log at 100 MB (a renamed file, a new ``audit.log``), so
    the window is read from the file it started in and then any newer file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._inode = 0
        self._offset = 0
        self._started = 0.0

    def start(self) -> None:
        stat = self.path.stat()
        self._inode, self._offset, self._started = stat.st_ino, stat.st_size, time.time()

    def stop(self) -> Iterator[bytes]:
        """The window's lines, streamed (a startup window at 5,000 nodes is hundreds of MB)."""
        files = sorted(self.path.parent.glob("*.log"), key=lambda p: p.stat().st_mtime)
        seen_start = False
        for file in files:
            stat = file.stat()
            if stat.st_ino == self._inode:
                seen_start = True
                with file.open("rb") as f:
                    f.seek(self._offset)
                    yield from _lines(f)
            elif seen_start or stat.st_mtime >= self._started:
                with file.open("rb") as f:
                    yield from _lines(f)


def _lines(f: IO[bytes]) -> Iterator[bytes]:
    """Complete lines from the file's position on; a line still being written ends it."""
    for line in f:
        if not line.endswith(b"\n"):
            return
        yield line[:-1]


@dataclasses.dataclass(frozen=True)
class WriteCounts:
    by_user_total: int  # every write in the window, all users (the apiserver's load)
    operator: Counter[str]  # "<verb> <resource.group>" -> count, operator's user only
    last_write: float | None  # epoch seconds of the operator's last write other than a Lease


def count_writes(lines: Iterable[bytes], username: str) -> WriteCounts:
    operator: Counter[str] = Counter()
    total = 0
    last: float | None = None
    needle = f'"username":"{username}"'.encode()
    for line in lines:
        if not line.strip():
            continue
        total += 1
        if needle not in line:
            continue
        event = json.loads(line)
        if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
            continue
        if (event.get("user") or {}).get("username") != username:
            continue
        ref = event.get("objectRef") or {}
        group = ref.get("apiGroup") or ""
        resource = ref.get("resource", "") + (f".{group}" if group else "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        operator[f"{event['verb']} {resource}"] += 1
        if not resource.startswith(LEASES) and event.get("stageTimestamp"):
            stamp = datetime.datetime.fromisoformat(event["stageTimestamp"]).timestamp()
            last = stamp if last is None else max(last, stamp)
    return WriteCounts(total, operator, last)


# --- watching our DaemonSets -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DaemonSetEvent:
    at: float  # time.monotonic() on arrival
    type: str  # ADDED, MODIFIED, DELETED
    name: str
    version: str  # its openshift.driver-toolkit.rhcos label
    desired: int
    misscheduled: int
    ready: int


class DaemonSetWatch:
    """A kubernetes watch on the namespace's DaemonSets in a thread, events timestamped on arrival."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self._apps = kubernetes.client.AppsV1Api(api)
        self._namespace = namespace
        self.events: list[DaemonSetEvent] = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._watch: kubernetes.watch.Watch | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="daemonset-watch")

    def __enter__(self) -> DaemonSetWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        self._thread.join(10)

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    listed = self._apps.list_namespaced_daemon_set(self._namespace)
                    version = listed.metadata.resource_version
                    for ds in listed.items:
                        self._record("ADDED", ds.to_dict(), listed=True)
                self._watch = kubernetes.watch.Watch()
                for event in self._watch.stream(
                    self._apps.list_namespaced_daemon_set,
                    self._namespace,
                    resource_version=version,
                    timeout_seconds=60,
                    allow_watch_bookmarks=True,
                    deserialize=False,
                ):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        version = ""  # 410 Gone: list again
                        break
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        self._record(event["type"], obj)
                    if self._stop.is_set():
                        break
            except Exception as error:  # a dropped connection: resume from the last version
                if not self._stop.is_set():
                    log(f"  (DaemonSet watch restarting: {error})")
                    time.sleep(0.5)

    def _record(self, type_: str, obj: dict[str, Any], listed: bool = False) -> None:
        metadata = obj.get("metadata") or {}
        status = obj.get("status") or {}

        # NB: the typed list returns snake_case keys, the raw watch camelCase.
        def get(camel: str, snake: str) -> int:
            return int(status.get(camel, status.get(snake)) or 0)

        event = DaemonSetEvent(
            at=time.monotonic(),
            type=type_,
            name=str(metadata.get("name", "")),
            version=str((metadata.get("labels") or {}).get(labels.DTK_RHCOS, "")),
            desired=get("desiredNumberScheduled", "desired_number_scheduled"),
            misscheduled=get("numberMisscheduled", "number_misscheduled"),
            ready=get("numberReady", "number_ready"),
        )
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def mark(self) -> int:
        with self._cond:
            return len(self.events)

    def wait_for(
        self, what: str, predicate: Callable[[DaemonSetEvent], bool], since: int, timeout: float
    ) -> DaemonSetEvent:
        """The first event from index ``since`` on that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            checked = since
            while True:
                for event in self.events[checked:]:
                    if predicate(event):
                        return event
                checked = len(self.events)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
                self._cond.wait(left)

    def since(self, mark: int) -> list[DaemonSetEvent]:
        with self._cond:
            return self.events[mark:]

    def latest(self, version: str) -> DaemonSetEvent | None:
        with self._cond:
            for event in reversed(self.events):
                if event.version == version:
                    return event
        return None


def event_of(type_: str, version: str) -> Callable[[DaemonSetEvent], bool]:
    return lambda event: event.type == type_ and event.version == version


def filled(version: str) -> Callable[[DaemonSetEvent], bool]:
    """Its one node has its pod, Ready."""
    return lambda event: event.version == version and event.desired == 1 and event.ready == 1


# --- cluster set-up ----------------------------------------------------------------------------


def create_policy(api: ApiClient, spec: dict[str, Any] | None = None) -> None:
    """The ClusterPolicy `cluster-policy` (every default unless `spec` says otherwise)."""
    kubernetes.client.CustomObjectsApi(api).create_cluster_custom_object(
        "nvidia.com",
        "v1",
        "clusterpolicies",
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": POLICY},
            "spec": spec or {},
        },
    )


def create_nodes_fast(api: ApiClient, count: int, workers: int) -> list[str]:
    """``count`` GPU nodes on V1, created by a thread pool without parsing the responses."""
    core = kubernetes.client.CoreV1Api(api)
    names = [f"gpu-{i:05d}" for i in range(count)]
    done = 0
    lock = threading.Lock()

    def create(name: str) -> None:
        nonlocal done
        core.create_node(nodes.gpu_node(name, rhcos=V1), _preload_content=False)
        with lock:
            done += 1
            if done % 1000 == 0:
                log(f"  {done}/{count} nodes created")

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(create, names))
    return names


def ready_node_count(api: ApiClient) -> int:
    """Nodes Ready with no not-ready taint, from one raw list (no model objects)."""
    core = kubernetes.client.CoreV1Api(api)
    items = json.loads(core.list_node(_preload_content=False).data)["items"]
    not_ready_taints = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    count = 0
    for node in items:
        conditions = (node.get("status") or {}).get("conditions") or []
        taints = (node.get("spec") or {}).get("taints") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        if ready and not any(t["key"] in not_ready_taints for t in taints):
            count += 1
    return count


def wait_nodes_ready(result: Result, cp: LocalControlPlane, api: ApiClient, count: int) -> None:
    """Until every node is Ready; else record why not and go on "degraded".

    NB: kwok renews every node's Lease every 10 s (a kubelet's pace at the harness's
    40 s lease); when it falls behind, the node-lifecycle controller marks nodes
    Unknown and taints them, and they flap. Numbers from such a cluster are indicative.
    """
    interval = max(2.0, count / 1000)  # each poll parses every node: not free at 5,000
    timeout, stall = 120 + count * 0.1, 90.0
    began = best_at = time.monotonic()
    best = 0
    while time.monotonic() - began < timeout and time.monotonic() - best_at < stall:
        ready = ready_node_count(api)
        if ready >= count:
            return
        if ready > best:
            best, best_at = ready, time.monotonic()
        time.sleep(interval)
    ready = ready_node_count(api)
    audit = AuditWindow(cp.audit_log)
    audit.start()
    time.sleep(10)
    lines = list(audit.stop())
    leases = sum(
        1 for line in lines if b'"username":"kwok-controller"' in line and b'"resource":"leases"' in line
    )
    result.degraded = (
        f"only {ready} of {count} nodes Ready after {time.monotonic() - began:.0f}s (best {best}, "
        f"no progress for {stall:.0f}s or timed out): kwok renewed "
        f"{leases / 10:.0f} node Leases/s, {count / 10:.0f}/s are needed (one per node per 10 s); "
        f"all writes {len(lines) / 10:.0f}/s"
    )
    log(f"  DEGRADED: {result.degraded}")


def read_policy_status(api: ApiClient) -> dict[str, Any]:
    obj = kubernetes.client.CustomObjectsApi(api).get_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies", POLICY
    )
    return dict(obj.get("status") or {})


def policy_lists_all_nodes(api: ApiClient, count: int) -> bool:
    entries = read_policy_status(api).get("driverDaemonSets") or []
    return any(e.get("key") == V1 and e.get("nodes") == count for e in entries)


def patch_os_image(api: ApiClient, name: str, version: str) -> None:
    kubernetes.client.CoreV1Api(api).patch_node_status(
        name, {"status": {"nodeInfo": {"osImage": os_image(version)}}}, _preload_content=False
    )


def patch_ostree_label(api: ApiClient, name: str, version: str) -> None:
    kubernetes.client.CoreV1Api(api).patch_node(
        name, {"metadata": {"labels": {labels.OSTREE_VERSION: version}}}, _preload_content=False
    )


class AuditTail:
    """New write requests by one user since the last look, read incrementally from the audit log.

    NB: follows the apiserver's rotation: the open handle still reads the renamed file
    to its end, then the new ``audit.log`` is opened.
    """

    def __init__(self, path: Path, username: str) -> None:
        self.path = path
        self._needle = f'"username":"{username}"'.encode()
        self._file = path.open("rb")
        self._file.seek(0, os.SEEK_END)
        self._partial = b""

    def close(self) -> None:
        self._file.close()

    def writes(self) -> int:
        """Writes (leases excluded) logged since the last call."""
        chunk = self._file.read()
        if os.stat(self.path).st_ino != os.fstat(self._file.fileno()).st_ino:
            self._file.close()
            self._file = self.path.open("rb")
            chunk += self._file.read()
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        return sum(
            1
            for line in data[:cut].splitlines()
            if self._needle in line and b'"resource":"leases"' not in line
        )


def reconcile_passes(op: OperatorProcess) -> float | None:
    """The operator's pass counter; None when /metrics does not answer in time.

    NB: not `OperatorProcess.metric`, whose 2 s timeout a busy operator on a loaded
    two-core machine sometimes misses.
    """
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{op.port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(RECONCILES + " "):
            return float(line.split()[1])
    return None


def wait_operator_idle(
    op: OperatorProcess, audit: AuditTail, quiet_for: float = 1.0, timeout: float = 30.0
) -> bool:
    """Until, for ``quiet_for`` s, no pass started, no write was made and under 10% of a CPU was used.

    NB: the pass counter moves when a pass begins; a long pass shows as CPU or, when it
    is a serial loop of writes (little CPU, one pass), in the audit log.
    """
    deadline = time.monotonic() + timeout
    audit.writes()
    last = (reconcile_passes(op), _proc.cpu_s(op.pid), time.monotonic())
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = (reconcile_passes(op), _proc.cpu_s(op.pid), time.monotonic())
        busy = now[0] is None or now[0] != last[0] or now[1] - last[1] > 0.1 * max(now[2] - last[2], 0.2)
        if busy or audit.writes():
            last = now
        elif now[2] - last[2] >= quiet_for:
            return True
    return False


_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*deleted stale driver DaemonSet (\S+)")


def logged_deletions(op: OperatorProcess) -> dict[str, float]:
    """DaemonSet name -> epoch seconds of the operator's "deleted stale driver DaemonSet" line."""
    found: dict[str, float] = {}
    for line in op.log().splitlines():
        if m := _LOG_TIME.match(line):
            stamp = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
            found[m.group(2)] = stamp.timestamp()  # the operator logs local time, as datetime does
    return found


# --- one size ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    nodes: int
    measured_at: str
    commit: str
    pattern: str
    machine: dict[str, Any]
    phases_s: dict[str, float] = dataclasses.field(default_factory=dict)
    # The fake nodes' Lease duration (kwok's renewal pace; see --node-lease-seconds).
    node_lease_seconds: int = 40
    startup_s: dict[str, float | None] = dataclasses.field(default_factory=dict)
    startup_writes: dict[str, int] = dataclasses.field(default_factory=dict)
    quiet_window_s: float = 0.0
    writes_per_min: float = 0.0
    writes: dict[str, int] = dataclasses.field(default_factory=dict)
    lease_writes_per_min: float = 0.0
    reconciles_in_window: float = 0.0
    cluster_writes_per_s: float = 0.0
    operator_cpu_s_in_window: float = 0.0
    component_cpu_s_in_window: dict[str, float] = dataclasses.field(default_factory=dict)
    rss_after_first_full_mib: float = 0.0
    rss_idle_mib: float = 0.0
    rss_peak_mib: float = 0.0
    component_rss_mib: dict[str, float] = dataclasses.field(default_factory=dict)
    create_latency_s: list[float] = dataclasses.field(default_factory=list)
    create_latency: dict[str, float] = dataclasses.field(default_factory=dict)
    delete_latency_s: list[float] = dataclasses.field(default_factory=list)
    delete_latency: dict[str, float] = dataclasses.field(default_factory=dict)
    delete_controller_part_s: list[float] = dataclasses.field(default_factory=list)
    delete_operator_part_s: list[float] = dataclasses.field(default_factory=list)
    delete_operator_part: dict[str, float] = dataclasses.field(default_factory=dict)
    delete_logged_s: list[float] = dataclasses.field(default_factory=list)
    # Cores used per phase: machine, foreign (other people's work), operator, control plane.
    cores: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    # Set when the cluster could not be held at N Ready nodes: then numbers are indicative.
    degraded: str = ""
    failed: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)
    total_s: float = 0.0


def machine() -> dict[str, Any]:
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "kube": binaries.versions()[0],
        "etcd": binaries.versions()[1],
        "kwok": binaries.versions()[2],
    }


@contextlib.contextmanager
def profiled(pid: int, out: Path | None) -> Iterator[None]:
    """py-spy samples ``pid`` while the block runs (nothing if ``out`` is None).

    Writes collapsed stacks (``<out>.txt``, one "frame;frame;... count" line per stack:
    grep-able, and flamegraph.pl or speedscope read it). NB: sampling costs CPU on a
    two-core machine, so numbers from a profiled run are not the headline numbers.
    """
    if out is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [spy, "record", "--pid", str(pid), "--rate", "50", "--nonblocking", "--format", "raw"]
    proc = subprocess.Popen(
        [*command, "--output", str(out.with_suffix(".txt"))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def start_operator(op: OperatorProcess, sources: Path) -> None:
    """Start it with ``sources`` as its working directory.

    NB: ``python -m`` puts the working directory first on sys.path, before the editable
    install, so the operator imports the ``ocp_gpu`` found there.
    """
    with contextlib.chdir(sources):
        op.start()


@contextlib.contextmanager
def phase(result: Result, name: str, pids: dict[str, int] | None = None) -> Iterator[None]:
    """Time a phase; with ``pids`` (name -> pid), also the cores each used and the foreign load."""
    began = time.monotonic()
    log(f"{name} ...")
    meter = CpuMeter(pids or {})
    try:
        with meter:
            yield
    finally:
        result.phases_s[name] = round(time.monotonic() - began, 1)
        if pids:
            result.cores[name] = meter.cores
        log(f"{name}: {result.phases_s[name]:.1f}s" + (f" (cores: {meter.cores})" if pids else ""))


def run_size(count: int, args: argparse.Namespace) -> Result:
    result = Result(
        nodes=count,
        measured_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        commit="",
        pattern=args.pattern,
        machine=machine(),
    )
    began = time.monotonic()
    versions = [fresh_version(i) for i in range(args.relabels)]
    binaries.ensure_binaries()
    with (
        operator_sources(args.source) as (sources, result.commit),
        LocalControlPlane(start_timeout=180, node_lease_seconds=args.node_lease_seconds) as cp,
    ):
        result.phases_s["control plane start"] = round(cp.startup_seconds or 0.0, 1)
        result.node_lease_seconds = args.node_lease_seconds
        api = cp.api_client(pool_size=max(64, args.workers * 2))
        with phase(result, "OpenShift APIs, DTK tags, CRD, policy"):
            openshift.install_openshift_apis(api)
            openshift.set_driver_toolkit_tags(
                api, {v: DTK_IMAGE + f"{i:064x}" for i, v in enumerate([V1, *versions])}
            )
            install_crd(api)
            kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
            create_policy(api)
        with phase(result, f"create {count} nodes"):
            names = create_nodes_fast(api, count, args.workers)
        with phase(result, "nodes Ready", cp.pids):
            wait_nodes_ready(result, cp, api, count)
        kubeconfig = cp.make_kubeconfig(OPERATOR_USER, ["system:masters"])
        op = OperatorProcess(kubeconfig, NAMESPACE, cp.state_dir / "logs" / "operator.log")
        with DaemonSetWatch(api, NAMESPACE) as watch:
            audit = AuditTail(cp.audit_log, OPERATOR_USER)
            try:
                measure(Bench(result, cp, api, op, watch, names, versions, args, audit), sources)
            except (TimeoutError, RuntimeError) as error:
                result.failed = f"{type(error).__name__}: {error}"
                log(f"  FAILED: {result.failed}")
            finally:
                op.stop()
                audit.close()
                if args.keep_operator_log:
                    args.keep_operator_log.mkdir(parents=True, exist_ok=True)
                    (args.keep_operator_log / f"operator-{count}.log").write_text(op.log())
    result.total_s = round(time.monotonic() - began, 1)
    return result


@dataclasses.dataclass
class Bench:
    """What the phases of one size share."""

    result: Result
    cp: LocalControlPlane
    api: ApiClient
    op: OperatorProcess
    watch: DaemonSetWatch
    names: list[str]
    versions: list[str]
    args: argparse.Namespace
    audit: AuditTail

    @property
    def scale(self) -> float:
        """Timeouts grow with the cluster."""
        return 1 + len(self.names) / 500

    @property
    def idle_timeout(self) -> float:
        """How long to wait for the operator to go idle between steps.

        NB: in a degraded (flapping) cluster DaemonSet statuses keep changing and the
        operator is never idle for long; waiting the full time would take an hour.
        """
        return 10.0 if self.result.degraded else 30.0

    @property
    def pids(self) -> dict[str, int]:
        return {**self.cp.pids, "operator": self.op.pid}

    def profile(self, what: str) -> contextlib.AbstractContextManager[None]:
        out = self.args.profile / f"operator-{len(self.names)}-{what}" if self.args.profile else None
        return profiled(self.op.pid, out)


def measure(bench: Bench, sources: Path) -> None:
    result, op = bench.result, bench.op
    mark = bench.watch.mark()
    startup_audit = AuditWindow(bench.cp.audit_log)
    startup_audit.start()
    start_operator(op, sources)
    started, started_wall = time.monotonic(), time.time()
    with RssSampler(op.pid) as sampler:
        with phase(result, "operator start -> first full reconcile", bench.pids), bench.profile("startup"):
            measure_startup(bench, started, mark)
        with phase(result, "driver pods Ready (policy ready)"):
            measure_rollout(bench, started)
        with phase(result, "settle"):
            settle = 120.0 if result.degraded else 120 * bench.scale
            if not wait_operator_idle(op, bench.audit, quiet_for=10.0, timeout=settle):
                result.notes.append("operator did not become idle before the quiet window")
            # What the first passes wrote (node labels, upgrade-state labels, events...) and when
            # the last of it was written.
            startup = count_writes(startup_audit.stop(), OPERATOR_USER)
            result.startup_writes = dict(startup.operator)
            if startup.last_write is not None:
                result.startup_s["startup_writes_done"] = round(startup.last_write - started_wall, 2)
        with phase(result, f"quiet window {bench.args.quiet:.0f}s", bench.pids):
            measure_steady_state(bench)
        moved = bench.names[: len(bench.versions)]
        with (
            phase(result, f"{len(moved)} nodes to new versions and back", bench.pids),
            bench.profile("version-moves"),
        ):
            measure_version_moves(bench, moved)
        result.rss_peak_mib = round(max(_proc.status_kib(op.pid, "VmHWM"), sampler.max_rss_kib) / 1024, 1)


def measure_startup(bench: Bench, started: float, mark: int) -> None:
    """Operator start -> leader -> V1 DaemonSet applied -> status lists all N nodes."""
    result, op, count = bench.result, bench.op, len(bench.names)
    op.wait_http("/healthz", timeout=60)
    wait_until("operator leadership", lambda: op.role() == "leader", 60)
    result.startup_s["leader"] = round(time.monotonic() - started, 2)
    # NB: the first pass writes to every node, one request at a time: minutes at 5,000 nodes.
    startup_timeout = 120 + 0.3 * count
    ds = bench.watch.wait_for("the V1 DaemonSet", lambda e: e.version == V1, mark, timeout=startup_timeout)
    result.startup_s["v1_daemonset_exists"] = round(ds.at - started, 2)
    wait_until(
        f"policy status listing {count} nodes",
        lambda: policy_lists_all_nodes(bench.api, count),
        startup_timeout,
        0.25,
    )
    result.startup_s["first_full_reconcile"] = round(time.monotonic() - started, 2)
    result.rss_after_first_full_mib = round(_proc.status_kib(op.pid, "VmRSS") / 1024, 1)
    log(f"  first full reconcile after {result.startup_s['first_full_reconcile']:.1f}s")


def measure_rollout(bench: Bench, started: float) -> None:
    """Until the policy is ready: every driver pod Ready (the DaemonSet controller's pace, mostly)."""
    try:
        wait_until(
            "policy state ready",
            lambda: read_policy_status(bench.api).get("state") == "ready",
            180.0 if bench.result.degraded else 120 * bench.scale,
            1.0,
        )
        bench.result.startup_s["policy_ready"] = round(time.monotonic() - started, 2)
    except TimeoutError:
        latest = bench.watch.latest(V1)
        bench.result.startup_s["policy_ready"] = None
        bench.result.notes.append(f"policy not ready in time; V1 DaemonSet last seen as {latest}")
        log(f"  policy not ready in time; V1 DaemonSet: {latest}")


def measure_steady_state(bench: Bench) -> None:
    """Writes, CPU and RSS over a quiet window in which only kwok's heartbeats happen."""
    result, op = bench.result, bench.op
    audit = AuditWindow(bench.cp.audit_log)
    pids = bench.cp.pids
    cpu_before = {name: _proc.cpu_s(pid) for name, pid in pids.items()}
    op_cpu_before = _proc.cpu_s(op.pid)
    reconciles_before = reconcile_passes(op) or math.nan
    audit.start()
    window_began = time.monotonic()
    time.sleep(bench.args.quiet)
    window = time.monotonic() - window_began
    lines = audit.stop()
    result.quiet_window_s = round(window, 1)
    result.operator_cpu_s_in_window = round(_proc.cpu_s(op.pid) - op_cpu_before, 2)
    result.component_cpu_s_in_window = {
        name: round(_proc.cpu_s(pid) - cpu_before[name], 1) for name, pid in pids.items()
    }
    result.reconciles_in_window = (reconcile_passes(op) or math.nan) - reconciles_before
    result.rss_idle_mib = round(_proc.status_kib(op.pid, "VmRSS") / 1024, 1)
    counts = count_writes(lines, OPERATOR_USER)
    leases = sum(n for what, n in counts.operator.items() if what.split()[1].startswith(LEASES))
    others = {what: n for what, n in counts.operator.items() if not what.split()[1].startswith(LEASES)}
    result.writes = others
    result.writes_per_min = round(sum(others.values()) * 60 / window, 2)
    result.lease_writes_per_min = round(leases * 60 / window, 2)
    result.cluster_writes_per_s = round(counts.by_user_total / window, 1)
    result.component_rss_mib = {
        name: round(_proc.status_kib(pid, "VmRSS") / 1024, 1) for name, pid in pids.items()
    }
    log(
        f"  operator writes/min {result.writes_per_min} (leases {result.lease_writes_per_min}), "
        f"cpu {result.operator_cpu_s_in_window}s, RSS {result.rss_idle_mib} MiB"
    )


def move_to_new_version(bench: Bench, name: str, version: str) -> None:
    """One node to a fresh build: label patch response -> DaemonSet ADDED on our watch."""
    result, op, watch = bench.result, bench.op, bench.watch
    # The kubelet reports the new OS first; NFD relabels later. Let that pass settle.
    patch_os_image(bench.api, name, version)
    wait_operator_idle(op, bench.audit, timeout=bench.idle_timeout)
    mark = watch.mark()
    patch_ostree_label(bench.api, name, version)
    t0 = time.monotonic()
    added = watch.wait_for(
        f"DaemonSet of {version}", event_of("ADDED", version), mark, timeout=30 * bench.scale
    )
    result.create_latency_s.append(round(added.at - t0, 4))
    try:
        watch.wait_for(f"DaemonSet of {version} filled", filled(version), mark, timeout=60 * bench.scale)
    except TimeoutError as error:
        result.notes.append(f"{name}: {error}")
    wait_operator_idle(op, bench.audit, timeout=bench.idle_timeout)


def move_back(bench: Bench, name: str, version: str, wall_t0: dict[str, float]) -> None:
    """The node back to V1: label patch response -> its version's DaemonSet DELETED.

    Split at the first event with desiredNumberScheduled == numberMisscheduled == 0:
    before it the DaemonSet controller works, after it the operator.
    """
    result, op, watch = bench.result, bench.op, bench.watch
    patch_os_image(bench.api, name, V1)
    wait_operator_idle(op, bench.audit, timeout=bench.idle_timeout)
    mark = watch.mark()
    patch_ostree_label(bench.api, name, V1)
    t0 = time.monotonic()
    wall_t0[version] = time.time()
    deleted = watch.wait_for(
        f"deletion of the DaemonSet of {version}",
        event_of("DELETED", version),
        mark,
        timeout=60 * bench.scale,
    )
    result.delete_latency_s.append(round(deleted.at - t0, 4))
    emptied = next(
        (
            e
            for e in watch.since(mark)
            if e.version == version and e.type == "MODIFIED" and e.desired == 0 and e.misscheduled == 0
        ),
        None,
    )
    if emptied is not None:
        result.delete_controller_part_s.append(round(emptied.at - t0, 4))
        result.delete_operator_part_s.append(round(deleted.at - emptied.at, 4))
    wait_operator_idle(op, bench.audit, timeout=bench.idle_timeout)


def measure_version_moves(bench: Bench, moved: list[str]) -> None:
    """K nodes to fresh builds and back, in the order ``--pattern`` says.

    ``pairs`` (default): each node goes to its build and straight back, so at most two
    driver DaemonSets exist, as during an OpenShift upgrade; the numbers then show how
    latency grows with nodes. ``accumulate``: all K move first (K+1 DaemonSets at the
    end), then all move back; this shows how it grows with DaemonSets (every pass
    renders every DaemonSet; ``pass_cost.py`` isolates that).
    """
    result = bench.result
    wall_t0: dict[str, float] = {}
    pairs = list(zip(moved, bench.versions, strict=True))
    if bench.args.pattern == "pairs":
        for name, version in pairs:
            move_to_new_version(bench, name, version)
            move_back(bench, name, version, wall_t0)
    else:
        for name, version in pairs:
            move_to_new_version(bench, name, version)
        for name, version in pairs:
            move_back(bench, name, version, wall_t0)
    logged = logged_deletions(bench.op)
    for version in bench.versions:
        ds_name = f"nvidia-driver-daemonset-{version}"
        if ds_name in logged and version in wall_t0:
            result.delete_logged_s.append(round(logged[ds_name] - wall_t0[version], 3))
    result.create_latency = summarize(result.create_latency_s)
    result.delete_latency = summarize(result.delete_latency_s)
    result.delete_operator_part = summarize(result.delete_operator_part_s)
    log(f"  new version -> DaemonSet: {fmt_summary(result.create_latency)}")
    log(f"  last node leaves -> DaemonSet deleted: {fmt_summary(result.delete_latency)}")
    log(f"    of which after desired=0 (ours): {fmt_summary(result.delete_operator_part)}")


# --- output ------------------------------------------------------------------------------------


def fmt_summary(s: dict[str, float]) -> str:
    return " / ".join(f"{k} {v * 1000:.0f} ms" for k, v in s.items())


def table(result: Result) -> str:
    def ms(s: dict[str, float], key: str) -> str:
        return f"{s.get(key, math.nan) * 1000:.0f} ms"

    ready = result.startup_s.get("policy_ready")
    rows = [
        ("GPU nodes", f"{result.nodes}"),
        ("operator start -> V1 DaemonSet exists", f"{result.startup_s.get('v1_daemonset_exists')} s"),
        ("operator start -> first full reconcile", f"{result.startup_s.get('first_full_reconcile')} s"),
        ("operator start -> policy ready (all pods)", f"{ready} s" if ready is not None else "timed out"),
        ("operator start -> its startup writes done", f"{result.startup_s.get('startup_writes_done')} s"),
        (
            "  startup writes (excl. leases)",
            ", ".join(f"{k} {v}" for k, v in sorted(result.startup_writes.items()) if LEASES not in k),
        ),
        (
            "new OSTREE_VERSION -> DaemonSet (p50/p99/max)",
            " / ".join(ms(result.create_latency, k) for k in ("p50", "p99", "max")),
        ),
        (
            "last node leaves -> DaemonSet gone (p50/p99/max)",
            " / ".join(ms(result.delete_latency, k) for k in ("p50", "p99", "max")),
        ),
        (
            "  of which the operator's (after desired=0)",
            " / ".join(ms(result.delete_operator_part, k) for k in ("p50", "p99", "max")),
        ),
        ("writes/min in steady state (excl. leases)", f"{result.writes_per_min}"),
        ("leader Lease writes/min", f"{result.lease_writes_per_min}"),
        ("reconcile passes in the quiet window", f"{result.reconciles_in_window:.0f}"),
        (
            f"operator CPU in the {result.quiet_window_s:.0f} s window",
            f"{result.operator_cpu_s_in_window} s",
        ),
        (
            "operator RSS first full pass / idle / peak",
            f"{result.rss_after_first_full_mib} / {result.rss_idle_mib} / {result.rss_peak_mib} MiB",
        ),
        ("all writes to the apiserver (kwok leases...)", f"{result.cluster_writes_per_s}/s"),
    ]
    for name, cores in result.cores.items():
        if "nodes" in name or "quiet" in name:
            rows.append((f"cores: machine / foreign, {name}", f"{cores['machine']} / {cores['foreign']}"))
    rows.append(("run time", f"{result.total_s:.0f} s"))
    if result.degraded:
        rows.append(("DEGRADED", result.degraded))
    if result.failed:
        rows.append(("FAILED", result.failed))
    rows.extend(("note", note) for note in result.notes)
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000], help="sizes to run")
    parser.add_argument("--relabels", type=int, default=20, help="nodes moved to a new version (K)")
    parser.add_argument(
        "--pattern",
        choices=("pairs", "accumulate"),
        default="pairs",
        help="each node to its new version and straight back (<= 2 DaemonSets), or all out then all back",
    )
    parser.add_argument("--quiet", type=float, default=60.0, help="seconds of the steady-state window")
    parser.add_argument("--workers", type=int, default=16, help="threads creating nodes")
    parser.add_argument(
        "--node-lease-seconds",
        type=int,
        default=40,
        help="fake nodes' Lease duration (kwok renews at a quarter of it); 200 lets kwok keep "
        "5,000 nodes Ready on two cores",
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where drivers-<N>.json go")
    parser.add_argument(
        "--source",
        choices=("head", "tree"),
        default="head",
        help="run the operator from HEAD's committed code (default) or the working tree",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy the operator into this directory (startup, then the latency phases)",
    )
    parser.add_argument("--keep-operator-log", type=Path, default=None, help="copy operator logs here")
    args = parser.parse_args(argv)
    if args.relabels < 1 or args.quiet < 60:
        parser.error("--relabels must be >= 1 and --quiet >= 60")
    args.results.mkdir(parents=True, exist_ok=True)
    for count in args.nodes:
        if count <= args.relabels:
            parser.error(f"--nodes {count}: need more nodes than --relabels")
        log(f"=== {count} GPU nodes ===")
        result = run_size(count, args)
        path = args.results / f"drivers-{count}.json"
        path.write_text(json.dumps(dataclasses.asdict(result), indent=2) + "\n")
        print(f"\n{count} GPU nodes ({path}):\n{table(result)}\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

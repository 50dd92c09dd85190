"""Faults for chaos tests: etcd compaction, a pod left half deleted, and operator replicas kept
running the way a kubelet keeps a Deployment's pods running (restarted after they exit or are
killed).

The apiserver itself is killed and restarted through `LocalControlPlane.kill_process` and
`LocalControlPlane.restart_process`.

Simulated here, because the local control plane runs no kubelet for the operator (kwok
only fakes the kubelets of its nodes): the operator's restart after an exit. A
`Replica` restarts its `ocp-gpu run` process ``restart_delay`` seconds after it
exited, as a kubelet restarts a container whose pod has ``restartPolicy: Always``
(no CrashLoopBackOff growth: chaos runs want the replica back quickly).
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ocp_gpu_harness.operating import OperatorProcess

# What `ocp-gpu run` logs when it exits because its Lease could not be renewed in time.
LEASE_LOST_LOG: Final = "lost leadership lease"


def _etcd_post(etcd_url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One call to etcd's gRPC gateway (JSON over HTTP; bytes fields are base64)."""
    request = urllib.request.Request(
        f"{etcd_url}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def etcd_revision(etcd_url: str) -> int:
    """etcd's current revision (the header of any range request)."""
    # The key "/" with a count-only range: reads nothing, returns the header.
    answer = _etcd_post(
        etcd_url, "/v3/kv/range", {"key": base64.b64encode(b"/").decode(), "count_only": True}
    )
    return int(answer["header"]["revision"])


def bump_etcd_revision(etcd_url: str) -> int:
    """Write one key of our own straight to etcd (no API server needed); returns the new revision.

    NB: with the API server down nothing else writes: a client may hold etcd's very last
    revision (a bookmark), which a compaction keeps; after this write it does not."""
    key = base64.b64encode(b"/ocp-gpu-harness/revision-bump").decode()
    answer = _etcd_post(etcd_url, "/v3/kv/put", {"key": key, "value": key})
    return int(answer["header"]["revision"])


def compact_etcd(etcd_url: str) -> int:
    """Compact etcd's history up to its current revision (physically); returns that revision.

    Every resourceVersion older than it is gone from etcd: a watch or an exact LIST
    from such a version that reaches etcd gets 410 Gone (watches served from the
    apiserver's watch cache get it once the cache no longer holds that version, e.g.
    after an apiserver restart re-initialises the cache at the new revision).
    NB: etcdctl is not built here; its ``compact --physical`` is this call."""
    revision = etcd_revision(etcd_url)
    _etcd_post(etcd_url, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


# Where kube-apiserver keeps its objects in etcd (its --etcd-prefix, left at the default).
ETCD_PREFIX: Final = "/registry"


def leave_pod_half_deleted(etcd_url: str, pod: dict[str, Any]) -> None:
    """Store ``pod`` (as read from the API, JSON) as kube-apiserver leaves it when it is killed in
    the middle of a grace-0 deletion: a deletion is two steps (the generic registry's
    ``updateForGracefulDeletionAndFinalizers`` stores deletionTimestamp and
    deletionGracePeriodSeconds 0, then ``Storage.Delete`` removes the object); killed between
    them, the pod stays stored, terminating, with no further event (seen in test_chaos.py's
    apiserver restart, issue 30).

    Written to etcd directly, since no API request leaves that state: JSON, which the apiserver's
    storage decoder reads beside protobuf; its watch cache then sends the change to every watcher
    as a MODIFIED event, as after the real first step."""
    metadata = pod["metadata"]
    stored = {
        **pod,
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            # NB: the apiserver never stores resourceVersion (it is the etcd revision).
            **{k: v for k, v in metadata.items() if k != "resourceVersion"},
            "deletionTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "deletionGracePeriodSeconds": 0,
        },
    }
    key = f"{ETCD_PREFIX}/pods/{metadata['namespace']}/{metadata['name']}"
    _etcd_post(
        etcd_url,
        "/v3/kv/put",
        {
            "key": base64.b64encode(key.encode()).decode(),
            "value": base64.b64encode(json.dumps(stored).encode()).decode(),
        },
    )


@dataclass
class ReplicaExit:
    """One exit of a replica's process: by our SIGKILL, or on its own (code, time)."""

    replica: int
    code: int | None
    killed: bool
    at: float
    # The end of its log: why it exited (e.g. "lost leadership lease").
    log_tail: str = ""

    @property
    def lease_lost(self) -> bool:
        """It exited because it could not renew its Lease in time (on purpose: see ocp_gpu/operator.py)."""
        return LEASE_LOST_LOG in self.log_tail


@dataclass
class Replica:
    """One operator replica, restarted after every exit (see the module docstring).

    ``make`` builds a fresh `OperatorProcess` (a new log file per start is not needed:
    the log is appended to)."""

    index: int
    make: Callable[[], OperatorProcess]
    restart_delay: float = 0.5
    process: OperatorProcess | None = None
    starts: int = 0
    exits: list[ReplicaExit] = field(default_factory=list)
    _kill_pending: bool = False

    def start(self) -> None:
        self.process = self.make().start()
        self.starts += 1

    def role(self) -> str:
        """'leader', 'standby', 'starting', or 'down' when it cannot be asked."""
        if self.process is None or not self.process.running():
            return "down"
        try:
            return self.process.role()
        except OSError:
            return "down"

    def kill(self) -> None:
        """SIGKILL (a crash: the Lease is left to expire); the supervisor restarts it."""
        if self.process is not None and self.process.running():
            self._kill_pending = True
            self.process.kill()

    def poll(self) -> bool:
        """Record an exit and restart; True when it restarted."""
        if self.process is None or self.process.running():
            return False
        code = self.process.stop()
        tail = "" if self._kill_pending else self.process.log()[-1500:]
        self.exits.append(ReplicaExit(self.index, code, self._kill_pending, time.monotonic(), tail))
        self._kill_pending = False
        time.sleep(self.restart_delay)
        self.start()
        return True


class Supervisor:
    """Keeps replicas running in a background thread (the kubelet's part; see above)."""

    def __init__(self, replicas: Sequence[Replica], interval: float = 0.2) -> None:
        self.replicas = list(replicas)
        self._interval = interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name="operator-supervisor")

    def __enter__(self) -> Supervisor:
        for replica in self.replicas:
            replica.start()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for replica in self.replicas:
            if replica.process is not None:
                with contextlib.suppress(Exception):
                    replica.process.stop()

    @contextlib.contextmanager
    def paused(self) -> Any:
        """No restarts while the block runs (e.g. while a kill is being decided)."""
        with self._lock:
            yield

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                for replica in self.replicas:
                    if self._stop.is_set():
                        return
                    replica.poll()

    def leader(self) -> Replica | None:
        for replica in self.replicas:
            if replica.role() == "leader":
                return replica
        return None

    def wait_restarted(self, timeout: float) -> bool:
        """Wait until every replica runs again (a kill just before the end is restarted
        ``restart_delay`` after the next poll); True when all run."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(r.process is not None and r.process.running() for r in self.replicas):
                return True
            time.sleep(self._interval)
        return False

    def unexpected_exits(self) -> list[ReplicaExit]:
        """Exits we did not cause with a kill."""
        return [e for r in self.replicas for e in r.exits if not e.killed]

    def kills(self) -> int:
        return sum(e.killed for r in self.replicas for e in r.exits)

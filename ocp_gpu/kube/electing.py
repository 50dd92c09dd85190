"""Leader election on a `coordination.k8s.io/v1` Lease.

Of several operator replicas exactly one acts: the one holding the Lease.  The
decisions are in `planning/leadership.py`; this module reads and writes the
Lease with optimistic concurrency (resourceVersion), so two replicas racing for
a free lease cannot both win.

Renewal never waits for reconcile work (bug B of issue 8: at 500 nodes under load
the leader lost its 4 s Lease three times).  It runs in a thread of its own with
an API client (and so a connection pool) of its own: it does not queue behind a
pass's blocking calls in the event loop's executor, does not wait for a busy event
loop to wake it, and does not share connections with reconcile requests.

`ElectionProcess` goes one step further for `ocp-gpu run`: the whole election
(acquire, renew, release) runs in a child process, so that not even the
interpreter lock, held by the reconcile thread through a long C call (parsing a
LIST of thousands of pods), delays a renewal.  The child stops renewing as soon as
the operator process dies (its end of the pipe closes), so a killed leader's Lease
expires as it should.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import datetime
import logging
import multiprocessing
import os
import signal
import socket
import threading
import uuid
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ocp_gpu.kube import clients
from ocp_gpu.planning import leadership

logger = logging.getLogger("ocp_gpu.leader")

LEASE_NAME = "ocp-gpu-operator-leader"
# OpenShift's leader election defaults for operators (see ElectionSettings).
LEASE_DURATION_S = 137
RENEW_DEADLINE_S = 107.0
RETRY_PERIOD_S = 26.0


@dataclasses.dataclass(frozen=True)
class ElectionSettings:
    namespace: str
    name: str = LEASE_NAME
    identity: str = dataclasses.field(
        default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    )
    # OpenShift's conventions for operators (library-go's LeaderElectionDefaulting, the
    # "leader election" section of openshift/enhancements' high-availability guide):
    # 137 s lease, 107 s renew deadline, 26 s retry.  They survive a 60 s apiserver
    # outage and write the Lease about twice a minute.  client-go's are 15/10/2 s.
    lease_duration_s: int = LEASE_DURATION_S
    renew_deadline_s: float = RENEW_DEADLINE_S
    retry_period_s: float = RETRY_PERIOD_S


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class LeaderElector:
    """Acquires, renews and releases one Lease for one identity."""

    def __init__(
        self,
        api_client: client.ApiClient,
        settings: ElectionSettings,
        clock: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        # NB: a client of our own (own urllib3 pool): the reconcilers' calls never hold
        # the connection a renewal needs.
        self._api = client.CoordinationV1Api(_own_client(api_client))
        self._settings = settings
        self._clock = clock
        self._last_renewed: datetime.datetime | None = None
        self._observed: tuple[leadership.LeaseRecord | None, str | None] = (None, None)
        # What we last wrote, and the resourceVersion the write returned: a renewal writes
        # over it without reading first (half the requests on a loaded apiserver); a 409
        # says someone else wrote since, and we read.
        self._held: tuple[leadership.LeaseRecord, str] | None = None

    @property
    def identity(self) -> str:
        return self._settings.identity

    async def acquire(self) -> None:
        """Block until this replica holds the lease."""
        logged_wait = False
        while True:
            if await asyncio.to_thread(self._try_acquire_or_renew):
                logger.info(
                    "acquired leadership lease %s/%s as %s",
                    self._settings.namespace,
                    self._settings.name,
                    self.identity,
                )
                return
            if not logged_wait:
                holder = self._observed[0].holder if self._observed[0] else None
                logger.info(
                    "standing by: lease %s/%s is held by %s",
                    self._settings.namespace,
                    self._settings.name,
                    holder,
                )
                logged_wait = True
            await asyncio.sleep(self._settings.retry_period_s)

    async def keep_renewing(self) -> None:
        """Renew until leadership is lost; then return (the caller must stop acting).

        The renewals run in the thread `renew_in_thread` starts; this coroutine only
        waits for its verdict, so a busy event loop delays noticing a loss, never a renewal.
        """
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()
        stop = threading.Event()

        def resolve() -> None:
            if not lost.done():
                lost.set_result(None)

        def report_lost() -> None:
            loop.call_soon_threadsafe(resolve)

        thread = threading.Thread(
            target=self.renew_in_thread, args=(stop, report_lost), name="lease-renewal", daemon=True
        )
        thread.start()
        try:
            await lost
        finally:
            stop.set()

    def renew_in_thread(
        self, stop: threading.Event, report_lost: Callable[[], None], exit_when_stuck: bool = True
    ) -> None:
        """Renew every retry period until `stop` is set or the renew deadline passes unrenewed.

        On a loss, `report_lost()` tells the caller to stop acting.  If the process is
        still running when our lease could have expired for the others (its event loop
        stuck in a long pass), it exits here: a standby may lead by then, and two
        acting replicas is the one thing an election must prevent.
        """
        while not stop.wait(self._settings.retry_period_s):
            try:
                self._try_acquire_or_renew()
            except Exception:  # a transient API failure: retried until the deadline
                logger.warning("lease renewal failed", exc_info=True)
            now = self._clock()
            if self._last_renewed is None or leadership.is_lease_lost(
                self._last_renewed, now, self._settings.renew_deadline_s
            ):
                logger.error("lost leadership lease %s/%s", self._settings.namespace, self._settings.name)
                report_lost()
                if exit_when_stuck:
                    exit_unless_stopped(stop, self._settings)
                return

    def release(self) -> None:
        """Step down so a standby takes over at once instead of after the lease expires."""
        try:
            record, version = self._read()
            if record is None or record.holder != self.identity:
                return
            self._write(leadership.released(record), version)
            logger.info("released leadership lease")
        except ApiException:
            logger.warning("could not release the lease; a standby takes over when it expires")

    # --- I/O -----------------------------------------------------------------

    def _try_acquire_or_renew(self) -> bool:
        now = self._clock()
        if self._held is not None:
            held, held_version = self._held
            self._held = None
            try:
                self._write(dataclasses.replace(held, renewed_at=now), held_version)
                self._last_renewed = now
                return True
            except ApiException as error:
                if error.status not in (409, 422):
                    raise
                # Someone wrote the Lease since our last write: read it and decide.
        record, version = self._read()
        self._observed = (record, version)
        decision = leadership.plan_lease(record, self.identity, now, self._settings.lease_duration_s)
        if decision.action is leadership.LeaseAction.WAIT or decision.record is None:
            self._last_renewed = (
                None if record is None or record.holder != self.identity else self._last_renewed
            )
            return False
        try:
            if decision.action is leadership.LeaseAction.CREATE:
                self._create(decision.record)
            else:
                self._write(decision.record, version)
        except ApiException as error:
            if error.status in (409, 422):
                # Another replica won the race for this resourceVersion.
                return False
            raise
        self._last_renewed = now
        return True

    def _timeout(self) -> float:
        # A slow request may use what is left of the renew deadline (as client-go's renew
        # context does), never more: past it we step down anyway.
        if self._last_renewed is None:  # acquiring: a hung read must not stall the retries
            return max(1.0, min(self._settings.renew_deadline_s, self._settings.retry_period_s * 2))
        left = self._settings.renew_deadline_s - (self._clock() - self._last_renewed).total_seconds()
        return max(0.5, left)

    def _read(self) -> tuple[leadership.LeaseRecord | None, str | None]:
        try:
            lease = self._api.read_namespaced_lease(
                self._settings.name, self._settings.namespace, _request_timeout=self._timeout()
            )
        except ApiException as error:
            if error.status == 404:
                return None, None
            raise
        spec = lease.spec
        return (
            leadership.LeaseRecord(
                holder=spec.holder_identity or None,
                renewed_at=spec.renew_time,
                acquired_at=spec.acquire_time,
                duration_s=int(spec.lease_duration_seconds or self._settings.lease_duration_s),
                transitions=int(spec.lease_transitions or 0),
            ),
            lease.metadata.resource_version,
        )

    def _body(self, record: leadership.LeaseRecord, version: str | None) -> client.V1Lease:
        return client.V1Lease(
            metadata=client.V1ObjectMeta(
                name=self._settings.name,
                namespace=self._settings.namespace,
                resource_version=version,
                labels={"app.kubernetes.io/managed-by": "ocp-gpu"},
            ),
            spec=client.V1LeaseSpec(
                holder_identity=record.holder,
                lease_duration_seconds=record.duration_s,
                acquire_time=_micro(record.acquired_at),
                renew_time=_micro(record.renewed_at),
                lease_transitions=record.transitions,
            ),
        )

    def _create(self, record: leadership.LeaseRecord) -> None:
        created = self._api.create_namespaced_lease(
            self._settings.namespace, self._body(record, None), _request_timeout=self._timeout()
        )
        self._held = (record, created.metadata.resource_version)

    def _write(self, record: leadership.LeaseRecord, version: str | None) -> None:
        written = self._api.replace_namespaced_lease(
            self._settings.name,
            self._settings.namespace,
            self._body(record, version),
            _request_timeout=self._timeout(),
        )
        self._held = (record, written.metadata.resource_version) if record.holder == self.identity else None


def exit_unless_stopped(stop: threading.Event, settings: ElectionSettings) -> None:
    """After a loss: exit the process if it has not stopped acting (``stop``) by the time our
    lease may have expired for the others."""
    grace = settings.lease_duration_s - settings.renew_deadline_s
    if not stop.wait(max(grace, 0.0)):
        logger.critical("lost leadership lease and still running %.1f s later: exiting now", grace)
        logging.shutdown()
        os._exit(1)


# Messages from the election process to the operator.
_ACQUIRED = "acquired"
_LOST = "lost"
# From the operator to the election process: stop renewing and release the Lease.
_RELEASE = "release"


class ElectionProcess:
    """The election of `LeaderElector`, run in a child process (see the module docstring).

    The child loads its own client from the same kubeconfig (or in-cluster config), so
    it shares nothing with the operator but the pipe.
    """

    def __init__(self, kubeconfig: Path | None, settings: ElectionSettings) -> None:
        self._settings = settings
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(
            target=_election_main,
            args=(str(kubeconfig) if kubeconfig else None, settings, child_conn),
            name="ocp-gpu-election",
            daemon=True,
        )
        self._process.start()
        child_conn.close()

    @property
    def identity(self) -> str:
        return self._settings.identity

    async def acquire(self) -> None:
        """Block until the child holds the lease."""
        message = await asyncio.to_thread(self._receive)
        if message != _ACQUIRED:
            raise RuntimeError(f"the election process ended before acquiring the lease ({message})")

    async def keep_renewing(self) -> None:
        """Return when the child lost the lease (or died); the caller must stop acting."""
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()
        stop = threading.Event()

        def resolve() -> None:
            if not lost.done():
                lost.set_result(None)

        def wait_for_loss() -> None:
            message = self._receive()
            if stop.is_set():
                return
            logger.error("lost leadership lease (%s)", message)
            loop.call_soon_threadsafe(resolve)
            exit_unless_stopped(stop, self._settings)

        threading.Thread(target=wait_for_loss, name="lease-watch", daemon=True).start()
        try:
            await lost
        finally:
            stop.set()

    def release(self) -> None:
        """Ask the child to release the lease and wait (briefly) for it to end."""
        with contextlib.suppress(OSError, ValueError):
            self._conn.send(_RELEASE)
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()

    def stop(self) -> None:
        """End the child without releasing (deposed: the lease is someone else's or expires)."""
        with contextlib.suppress(OSError, ValueError):
            self._conn.close()
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()

    def _receive(self) -> str:
        try:
            return str(self._conn.recv())
        except (EOFError, OSError):
            return "election process ended"


def _election_main(kubeconfig: str | None, settings: ElectionSettings, conn: Connection) -> None:
    """The child: acquire, tell the parent, renew until lost or told to release, or the parent is gone."""
    # NB: a terminal's Ctrl-C and a SIGTERM sent to the process group reach the child too; it must
    # outlive them to release the lease when the parent says so (or stop when the parent is gone).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    elector = LeaderElector(clients.load_api_client(Path(kubeconfig) if kubeconfig else None), settings)
    stop = threading.Event()
    release = threading.Event()

    def watch_parent() -> None:
        # NB: recv ends with EOFError when the parent dies (SIGKILL closes its end):
        # the child then stops renewing, and the lease expires as a killed leader's should.
        try:
            if conn.recv() == _RELEASE:
                release.set()
        except (EOFError, OSError):
            pass
        stop.set()

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    asyncio.run(_acquire_unless(elector, stop))
    if stop.is_set():
        return
    conn.send(_ACQUIRED)

    def report_lost() -> None:
        with contextlib.suppress(OSError, ValueError):
            conn.send(_LOST)

    elector.renew_in_thread(stop, report_lost, exit_when_stuck=False)
    if release.is_set():
        elector.release()


async def _acquire_unless(elector: LeaderElector, stop: threading.Event) -> None:
    acquiring = asyncio.ensure_future(elector.acquire())
    while not acquiring.done():
        if stop.is_set():
            acquiring.cancel()
            break
        await asyncio.sleep(0.2)
    with contextlib.suppress(asyncio.CancelledError):
        await acquiring


def _own_client(api_client: client.ApiClient) -> client.ApiClient:
    """A client with the same configuration (server, credentials) and a connection pool of its own."""
    configuration = copy.deepcopy(api_client.configuration)
    configuration.connection_pool_maxsize = 1  # one renewal at a time
    own = client.ApiClient(configuration)
    own.user_agent = api_client.user_agent
    return own


def _micro(stamp: datetime.datetime | None) -> datetime.datetime | None:
    # NB: Lease times are MicroTime; the client serialises datetimes with
    # microseconds, which the API accepts.
    return stamp

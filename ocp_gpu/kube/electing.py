"""Leader election on a `coordination.k8s.io/v1` Lease.

Of several operator replicas exactly one acts: the one holding the Lease.  The
decisions are in `planning/leadership.py`; this module reads and writes the
Lease (through `kube/leasing.py`) with optimistic concurrency (resourceVersion),
so two replicas racing for a free lease cannot both win.

Renewal never waits for reconcile work (bug B of issue 8: at 500 nodes under load
the leader lost its 4 s Lease three times).  It runs in a thread of its own with
a connection of its own: it does not queue behind a pass's blocking calls in the
event loop's executor, does not wait for a busy event loop to wake it, and does not
share connections with reconcile requests.

`ElectionProcess` goes one step further for `ocp-gpu run`: the whole election
(acquire, renew, release) runs in a child process, so that not even the
interpreter lock, held by the reconcile thread through a long C call (parsing a
LIST of thousands of pods), delays a renewal.  The child stops renewing as soon as
the operator process dies (its stdin closes), so a killed leader's Lease expires
as it should.

The identity is the pod's name ($POD_NAME from the downward API): a container restarted
in its pod after a crash resumes its own Lease at once, a new pod waits for it to expire
(`planning/leadership.lease_identity`).

NB: the child is `python -S -m ocp_gpu.kube.electing`: it imports only the standard
library and its neighbours (`kube/leasing.py`, `kube/sending.py`, `kube/authenticating.py`,
`planning/leadership.py`), never kopf or yaml (issue 13: about 15 MiB instead of 60 MiB
with multiprocessing's spawn and resource tracker).  The operator reads the kubeconfig
once (`kube/configuring.py`) and hands the credentials over as plain data
(`authenticating.Credentials`); an exec credential plugin the child runs itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any

from ocp_gpu.kube import leasing
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
    # The pod's name ($POD_NAME) when there is one (planning/leadership.lease_identity says why).
    identity: str = dataclasses.field(
        default_factory=lambda: leadership.lease_identity(
            os.environ, socket.gethostname(), os.urandom(4).hex()
        )
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
        credentials: leasing.Credentials,
        settings: ElectionSettings,
        clock: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        # NB: a connection of our own: the reconcilers' calls never hold the one a renewal needs.
        self._api = leasing.LeaseApi(credentials)
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
        import asyncio  # NB: here, not at the top: the election child never pays for asyncio (4 MiB)

        stop = threading.Event()
        try:
            await asyncio.to_thread(self.acquire_until, stop)
        finally:
            stop.set()

    def acquire_until(self, stop: threading.Event) -> bool:
        """Try every retry period until this replica holds the lease (True) or `stop` is set."""
        logged_wait = False
        while not stop.is_set():
            try:
                if self._try_acquire_or_renew():
                    # NB: still ours when a container restarted in its pod (same identity): no wait.
                    resumed = self._observed[0] is not None and self._observed[0].holder == self.identity
                    logger.info(
                        "%s leadership lease %s/%s as %s",
                        "resumed our own" if resumed else "acquired",
                        self._settings.namespace,
                        self._settings.name,
                        self.identity,
                    )
                    return True
            except Exception:  # an unreachable or failing apiserver: try again next period
                logger.warning("could not read or take the lease; retrying", exc_info=True)
            else:
                if not logged_wait:
                    holder = self._observed[0].holder if self._observed[0] else None
                    logger.info(
                        "standing by: lease %s/%s is held by %s",
                        self._settings.namespace,
                        self._settings.name,
                        holder,
                    )
                    logged_wait = True
            stop.wait(self._settings.retry_period_s)
        return False

    async def keep_renewing(self) -> None:
        """Renew until leadership is lost; then return (the caller must stop acting).

        The renewals run in the thread `renew_in_thread` starts; this coroutine only
        waits for its verdict, so a busy event loop delays noticing a loss, never a renewal.
        """

        def start(stop: threading.Event, report_lost: Callable[[], None]) -> None:
            threading.Thread(
                target=self.renew_in_thread, args=(stop, report_lost), name="lease-renewal", daemon=True
            ).start()

        await _until_lost(start)

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
            except Exception:  # a transient API or network failure: retried until the deadline
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
        except (leasing.LeaseApiError, OSError):
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
            except leasing.LeaseApiError as error:
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
        except leasing.LeaseApiError as error:
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
        return self._api.read(
            self._settings.namespace, self._settings.name, self._timeout(), self._settings.lease_duration_s
        )

    def _create(self, record: leadership.LeaseRecord) -> None:
        version = self._api.create(self._settings.namespace, self._settings.name, record, self._timeout())
        self._held = (record, version)

    def _write(self, record: leadership.LeaseRecord, version: str | None) -> None:
        written = self._api.replace(
            self._settings.namespace, self._settings.name, record, version, self._timeout()
        )
        self._held = (record, written) if record.holder == self.identity else None


async def _until_lost(start: Callable[[threading.Event, Callable[[], None]], None]) -> None:
    """Run `start(stop, report_lost)` (it starts a thread that watches the lease) and return
    once that thread calls `report_lost()`; `stop` is set when we return or are cancelled."""
    import asyncio  # NB: not at the top (see LeaderElector.acquire)

    loop = asyncio.get_running_loop()
    lost: asyncio.Future[None] = loop.create_future()
    stop = threading.Event()

    def resolve() -> None:
        if not lost.done():
            lost.set_result(None)

    def report_lost() -> None:
        loop.call_soon_threadsafe(resolve)

    start(stop, report_lost)
    try:
        await lost
    finally:
        stop.set()


def exit_unless_stopped(stop: threading.Event, settings: ElectionSettings) -> None:
    """After a loss: exit the process if it has not stopped acting (``stop``) by the time our
    lease may have expired for the others."""
    grace = settings.lease_duration_s - settings.renew_deadline_s
    if not stop.wait(max(grace, 0.0)):
        logger.critical("lost leadership lease and still running %.1f s later: exiting now", grace)
        logging.shutdown()
        os._exit(1)


# Lines from the election process to the operator (its stdout).
_ACQUIRED = "acquired"
_LOST = "lost"
# From the operator to the election process (its stdin): stop renewing and release the Lease.
_RELEASE = "release"
# The directory holding the ocp_gpu package, put first on the child's path.
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ElectionProcess:
    """The election of `LeaderElector`, run in a child process (see the module docstring).

    The child gets the settings and credentials as one JSON line on its stdin, then reads
    the operator's word (`release`) there; it reports `acquired` and `lost` on its stdout
    and logs to the operator's stderr.  It shares nothing with the operator but the pipes.
    """

    def __init__(self, credentials: leasing.Credentials, settings: ElectionSettings) -> None:
        import subprocess  # NB: not at the top: only the operator starts the child (3 MiB in it)

        self._settings = settings
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (_PACKAGE_ROOT, env.get("PYTHONPATH"))))
        with _signals_ignored():
            # NB: -S: no site module (nor the venv's .pth files); the package comes from PYTHONPATH.
            self._process = subprocess.Popen(
                [sys.executable, "-S", "-m", "ocp_gpu.kube.electing"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                text=True,
                close_fds=True,
            )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._to_child: IO[str] = self._process.stdin
        self._from_child: IO[str] = self._process.stdout
        hello = {"settings": dataclasses.asdict(settings), "credentials": credentials.to_json()}
        self._say(json.dumps(hello))

    @property
    def identity(self) -> str:
        return self._settings.identity

    @property
    def pid(self) -> int:
        return self._process.pid

    async def acquire(self) -> None:
        """Block until the child holds the lease."""
        import asyncio  # NB: not at the top (see LeaderElector.acquire)

        message = await asyncio.to_thread(self._receive)
        if message != _ACQUIRED:
            raise RuntimeError(f"the election process ended before acquiring the lease ({message})")

    async def keep_renewing(self) -> None:
        """Return when the child lost the lease (or died); the caller must stop acting."""

        def start(stop: threading.Event, report_lost: Callable[[], None]) -> None:
            def wait_for_loss() -> None:
                message = self._receive()
                if stop.is_set():
                    return
                logger.error("lost leadership lease (%s)", message)
                report_lost()
                exit_unless_stopped(stop, self._settings)

            threading.Thread(target=wait_for_loss, name="lease-watch", daemon=True).start()

        await _until_lost(start)

    def release(self) -> None:
        """Ask the child to release the lease and wait (briefly) for it to end."""
        self._say(_RELEASE)
        self._end(timeout=10)

    def stop(self) -> None:
        """End the child without releasing (deposed: the lease is someone else's or expires)."""
        self._end(timeout=5)

    def _say(self, line: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._to_child.write(line + "\n")
            self._to_child.flush()

    def _end(self, timeout: float) -> None:
        # Closing its stdin is the child's signal to stop (as the operator's death would be).
        with contextlib.suppress(OSError, ValueError):
            self._to_child.close()
        try:
            self._process.wait(timeout=timeout)
        except Exception:  # subprocess.TimeoutExpired: it did not end in time
            self._process.kill()
            self._process.wait()

    def _receive(self) -> str:
        try:
            line = self._from_child.readline()
        except (OSError, ValueError):
            line = ""
        return line.strip() or "election process ended"


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored while the child is forked: it inherits the disposition through
    exec, so no Ctrl-C can end it before its own main ignores them for good."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _child_main(stdin: IO[str], stdout: IO[str]) -> int:
    """The child: acquire, tell the parent, renew until lost or told to release, or the parent is gone."""
    # NB: a terminal's Ctrl-C and a SIGTERM sent to the process group reach the child too; it must
    # outlive them to release the lease when the parent says so (or stop when the parent is gone).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    hello: dict[str, Any] = json.loads(stdin.readline() or "{}")
    if not hello:
        return 0  # the parent ended before telling us anything
    settings = ElectionSettings(**hello["settings"])
    elector = LeaderElector(leasing.Credentials.from_json(hello["credentials"]), settings)
    stop = threading.Event()
    release = threading.Event()

    def tell(message: str) -> None:
        # The parent may be gone (EPIPE): then we are stopping anyway.
        with contextlib.suppress(OSError, ValueError):
            stdout.write(message + "\n")
            stdout.flush()

    def watch_parent() -> None:
        # NB: readline returns "" when the parent dies (SIGKILL closes its end of the pipe):
        # the child then stops renewing, and the lease expires as a killed leader's should.
        with contextlib.suppress(OSError, ValueError):
            if stdin.readline().strip() == _RELEASE:
                release.set()
        stop.set()

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    if not elector.acquire_until(stop):
        return 0
    tell(_ACQUIRED)
    elector.renew_in_thread(stop, lambda: tell(_LOST), exit_when_stuck=False)
    if release.is_set():
        elector.release()
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.stdin, sys.stdout))

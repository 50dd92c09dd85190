"""Leader election on a `coordination.k8s.io/v1` Lease.

Of several operator replicas exactly one acts: the one holding the Lease.  The
decisions are in `planning/leadership.py`; this module reads and writes the
Lease with optimistic concurrency (resourceVersion), so two replicas racing for
a free lease cannot both win.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import socket
import uuid
from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ocp_gpu.planning import leadership

logger = logging.getLogger("ocp_gpu.leader")

LEASE_NAME = "ocp-gpu-operator-leader"


@dataclasses.dataclass(frozen=True)
class ElectionSettings:
    namespace: str
    name: str = LEASE_NAME
    identity: str = dataclasses.field(
        default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    )
    # client-go's defaults are 15/10/2 s; we renew less often to keep writes low.
    lease_duration_s: int = 15
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


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
        self._api = client.CoordinationV1Api(api_client)
        self._settings = settings
        self._clock = clock
        self._last_renewed: datetime.datetime | None = None
        self._observed: tuple[leadership.LeaseRecord | None, str | None] = (None, None)

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
        """Renew until leadership is lost; then return (the caller must stop acting)."""
        while True:
            await asyncio.sleep(self._settings.retry_period_s)
            try:
                await asyncio.to_thread(self._try_acquire_or_renew)
            except Exception:  # a transient API failure: retried until the deadline
                logger.warning("lease renewal failed", exc_info=True)
            now = self._clock()
            if self._last_renewed is None or leadership.is_lease_lost(
                self._last_renewed, now, self._settings.renew_deadline_s
            ):
                logger.error("lost leadership lease %s/%s", self._settings.namespace, self._settings.name)
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

    def _read(self) -> tuple[leadership.LeaseRecord | None, str | None]:
        try:
            lease = self._api.read_namespaced_lease(self._settings.name, self._settings.namespace)
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
        self._api.create_namespaced_lease(self._settings.namespace, self._body(record, None))

    def _write(self, record: leadership.LeaseRecord, version: str | None) -> None:
        self._api.replace_namespaced_lease(
            self._settings.name, self._settings.namespace, self._body(record, version)
        )


def _micro(stamp: datetime.datetime | None) -> datetime.datetime | None:
    # NB: Lease times are MicroTime; the client serialises datetimes with
    # microseconds, which the API accepts.
    return stamp

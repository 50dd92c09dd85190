"""Reading and writing one `coordination.k8s.io/v1` Lease over the standard library's HTTP client.

The leader election (`kube/electing.py`) runs in a child process that only ever GETs, POSTs
and PUTs one Lease on a timer.  It speaks the three requests through the operator's own
transport (`kube/sending.py`, one connection), with the credentials the operator's
kubeconfig loader resolved (`kube/configuring.py`) and handed over as plain data; an exec
credential plugin is run by the child itself (`kube/authenticating.py`).

NB: this module, `kube/electing.py`, `kube/sending.py`, `kube/authenticating.py` and
`planning/leadership.py` must import nothing outside the standard library (the
import-linter contract "the election child stays light" and tests/unit/test_leasing.py
check it).
"""

from __future__ import annotations

import datetime
import json
import threading
from typing import Any

from ocp_gpu.kube import authenticating, sending
from ocp_gpu.planning import leadership

LEASES_GROUP_PATH = "/apis/coordination.k8s.io/v1"

# The same data the operator's own client is built from (kept under this name for callers).
Credentials = authenticating.Credentials


class LeaseApiError(Exception):
    """The API server answered with an error status (409 conflict, 404 absent, …)."""

    def __init__(self, status: int, reason: str, body: str = "") -> None:
        super().__init__(f"HTTP {status} {reason}: {body[:300]}")
        self.status = status
        self.reason = reason


class LeaseApi:
    """GET, POST and PUT of Leases on one persistent connection (one request at a time)."""

    def __init__(self, credentials: authenticating.Credentials) -> None:
        self._client = sending.ApiClient(credentials, pool_size=1)
        # NB: one request at a time on the one connection (a release may race a renewal).
        self._lock = threading.Lock()

    def read(
        self, namespace: str, name: str, timeout: float, default_duration_s: int
    ) -> tuple[leadership.LeaseRecord | None, str | None]:
        """The Lease's record and resourceVersion; (None, None) when it does not exist."""
        try:
            lease = self._request("GET", _lease_path(namespace, name), None, timeout)
        except LeaseApiError as error:
            if error.status == 404:
                return None, None
            raise
        return record_of(lease, default_duration_s), lease["metadata"].get("resourceVersion")

    def create(self, namespace: str, name: str, record: leadership.LeaseRecord, timeout: float) -> str:
        """Create the Lease; its new resourceVersion."""
        body = lease_body(namespace, name, record, None)
        created = self._request("POST", f"{LEASES_GROUP_PATH}/namespaces/{namespace}/leases", body, timeout)
        return str(created["metadata"]["resourceVersion"])

    def replace(
        self, namespace: str, name: str, record: leadership.LeaseRecord, version: str | None, timeout: float
    ) -> str:
        """Write the Lease over `version` (409 when someone wrote since); its new resourceVersion."""
        body = lease_body(namespace, name, record, version)
        written = self._request("PUT", _lease_path(namespace, name), body, timeout)
        return str(written["metadata"]["resourceVersion"])

    def close(self) -> None:
        with self._lock:
            self._client.close()

    def _request(self, method: str, path: str, body: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        with self._lock:
            response = self._client.send(method, path, body=payload, headers=headers, timeout=timeout)
        text = response.data.decode(errors="replace")
        if response.status >= 400:
            raise LeaseApiError(response.status, response.reason, text)
        result: dict[str, Any] = json.loads(text)
        return result


def _lease_path(namespace: str, name: str) -> str:
    return f"{LEASES_GROUP_PATH}/namespaces/{namespace}/leases/{name}"


# --- Lease <-> LeaseRecord ------------------------------------------------------


def record_of(lease: dict[str, Any], default_duration_s: int) -> leadership.LeaseRecord:
    """The election's view of a Lease object (JSON); a Lease without a duration gets ours."""
    spec = lease.get("spec") or {}
    return leadership.LeaseRecord(
        holder=spec.get("holderIdentity") or None,
        renewed_at=parse_micro_time(spec.get("renewTime")),
        acquired_at=parse_micro_time(spec.get("acquireTime")),
        duration_s=int(spec.get("leaseDurationSeconds") or default_duration_s),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


def lease_body(
    namespace: str, name: str, record: leadership.LeaseRecord, version: str | None
) -> dict[str, Any]:
    """The Lease object to write for `record` (over `version`, or a new one when None)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "ocp-gpu"},
    }
    if version is not None:
        metadata["resourceVersion"] = version
    spec: dict[str, Any] = {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.duration_s,
        "acquireTime": format_micro_time(record.acquired_at),
        "renewTime": format_micro_time(record.renewed_at),
        "leaseTransitions": record.transitions,
    }
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        # NB: a None field is left out, as the kubernetes client serialises it.
        "spec": {key: value for key, value in spec.items() if value is not None},
    }


def format_micro_time(stamp: datetime.datetime | None) -> str | None:
    """A Lease's MicroTime: RFC 3339 in UTC with microseconds (`2026-11-24T04:35:50.123456Z`)."""
    if stamp is None:
        return None
    return stamp.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(value: str | None) -> datetime.datetime | None:
    """The inverse of format_micro_time; also takes whole seconds and offsets (`+00:00`)."""
    if not value:
        return None
    stamp = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.UTC)

"""We test these aspects of the leader Lease's renewals (kube/electing.py) on the local control plane:

- while we hold the Lease, a renewal writes over our last write without reading the Lease
  first (no GET in steady state: issue 13), and renewTime still advances;
- when someone else wrote the Lease meanwhile, that write conflicts (409), nothing of theirs
  is overwritten, and the elector reads the Lease and stands by.
"""

from __future__ import annotations

import datetime

import pytest
from kubernetes import client

from ocp_gpu.kube import clients, electing

pytestmark = pytest.mark.e2e


class CountingElector(electing.LeaderElector):
    """The real elector; counts its reads of the Lease (each is a GET on the apiserver)."""

    reads = 0

    def _read(self) -> tuple[object, str | None]:  # type: ignore[override]
        self.reads += 1
        return super()._read()


def test_renewals_do_not_read_and_a_foreign_write_is_never_overwritten(
    kube: client.ApiClient, api: clients.ApiClient, namespace: str
) -> None:
    settings = electing.ElectionSettings(
        namespace=namespace, identity="renewer", lease_duration_s=15, renew_deadline_s=10, retry_period_s=2
    )
    elector = CountingElector(clients.lease_credentials(api), settings)
    leases = client.CoordinationV1Api(kube)
    assert elector._try_acquire_or_renew()
    acquired = leases.read_namespaced_lease(electing.LEASE_NAME, namespace).spec.renew_time
    assert elector.reads == 1

    for _ in range(3):
        assert elector._try_acquire_or_renew()
    renewed = leases.read_namespaced_lease(electing.LEASE_NAME, namespace)
    assert elector.reads == 1, "a renewal read the Lease"
    assert renewed.spec.holder_identity == "renewer"
    assert renewed.spec.renew_time > acquired

    # Another replica takes the Lease (as after an expiry): our next replace conflicts.
    renewed.spec.holder_identity = "someone-else"
    renewed.spec.renew_time = datetime.datetime.now(datetime.UTC)
    leases.replace_namespaced_lease(electing.LEASE_NAME, namespace, renewed)
    # The conflict makes it read the Lease, see a live holder and stand by.
    assert not elector._try_acquire_or_renew()
    assert elector.reads == 2
    assert leases.read_namespaced_lease(electing.LEASE_NAME, namespace).spec.holder_identity == "someone-else"
    # Standing by, every try reads (it holds nothing to write over).
    assert not elector._try_acquire_or_renew()
    assert elector.reads == 3
    assert leases.read_namespaced_lease(electing.LEASE_NAME, namespace).spec.holder_identity == "someone-else"

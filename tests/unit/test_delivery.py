"""We test these aspects of "not delivered yet" versus "absent" (ocp_gpu/planning/delivery.py, no API):

- the gate: a view is complete only when every watched kind has been listed once;
- a watched singleton: NOT_DELIVERED until its kind is listed, then its object or None (absent);
- the driver-toolkit ImageStream not delivered yet is UNREADABLE (nothing known), never ABSENT;
- the runtime: registering a singleton's watch makes it NOT_DELIVERED, and its kind's first
  complete listing settles what was not seen as absent; the gate opens once every kind is listed;
- a driver pass on a view with an undelivered singleton changes nothing.
"""

from __future__ import annotations

import asyncio
import datetime

import pytest

from ocp_gpu.kube import object_watches
from ocp_gpu.model import apis, driver_snapshot
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.planning import delivery, platforms
from ocp_gpu.planning.drivers import dtk_images
from ocp_gpu.reconcilers import driver_reconciler, object_views, runtime

STREAM = {"metadata": {"name": "driver-toolkit"}, "spec": {"tags": []}, "status": {}}
NOW = datetime.datetime(2026, 11, 24, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("watched", "delivered", "missing"),
    [
        ({"nodes", "pods"}, {"nodes", "pods"}, ()),
        ({"nodes", "imagestreams.image.openshift.io"}, {"nodes"}, ("imagestreams.image.openshift.io",)),
        ({"nodes"}, set(), ("nodes",)),
        (set(), set(), ()),
        # a kind delivered but no longer watched holds nothing back
        ({"nodes"}, {"nodes", "proxies.config.openshift.io"}, ()),
    ],
    ids=["all-listed", "imagestream-pending", "nothing-listed", "nothing-watched", "extra-delivered"],
)
def test_the_gate(watched: set[str], delivered: set[str], missing: tuple[str, ...]) -> None:
    assert delivery.undelivered_kinds(watched, delivered) == missing
    assert delivery.is_view_complete(watched, delivered) is (not missing)


@pytest.mark.parametrize(
    ("singleton", "delivered", "settled"),
    [
        (delivery.NOT_DELIVERED, False, None),
        (None, True, None),
        (STREAM, True, STREAM),
    ],
    ids=["pending-becomes-absent", "absent-stays-absent", "present-stays"],
)
def test_a_singleton_settles_when_its_kind_is_listed(
    singleton: delivery.Singleton, delivered: bool, settled: delivery.Singleton
) -> None:
    assert delivery.is_delivered(singleton) is delivered
    assert delivery.settle(singleton) == settled
    assert delivery.is_delivered(delivery.settle(singleton))
    assert delivery.present(singleton) == (STREAM if singleton is STREAM else None)


def test_an_undelivered_imagestream_is_unreadable_not_absent() -> None:
    pending = dtk_images.resolve_driver_toolkit_stream(delivery.NOT_DELIVERED)
    assert pending.state is driver_snapshot.StreamState.UNREADABLE and not pending.known
    assert "not listed yet" in pending.reason
    absent = dtk_images.resolve_driver_toolkit_stream(None)
    assert absent.state is driver_snapshot.StreamState.ABSENT and absent.known


def test_the_listings_settle_singletons_and_open_the_gate() -> None:
    rt = runtime.Runtime(api_client=None, namespace="ns", env={})
    rt.view.watch("", "nodes")
    stream = object_views.SingletonView(rt, "image.openshift.io", "imagestreams", "dtk_imagestream")
    proxy = object_views.SingletonView(rt, "config.openshift.io", "proxies", "cluster_proxy")
    assert rt.view.dtk_imagestream is delivery.NOT_DELIVERED
    assert rt.view.cluster_proxy is delivery.NOT_DELIVERED
    # the Proxy's listing holds the object; no ImageStream exists
    proxy.listed([object_watches.RawFacts("cluster", STREAM)])
    stream.listed([])
    assert not rt.view.listed.is_set(), "the nodes are not listed yet"
    rt.view.mark_delivered("", "nodes")
    assert rt.view.listed.is_set()
    assert rt.view.delivered == {"nodes", "imagestreams.image.openshift.io", "proxies.config.openshift.io"}
    assert rt.view.dtk_imagestream is None and rt.view.cluster_proxy == STREAM
    # a later deletion is "absent", and a later listing changes nothing about delivery
    proxy.gone("cluster")
    proxy.listed([])
    assert rt.view.cluster_proxy is None and rt.view.listed.is_set()


def test_a_driver_pass_before_delivery_changes_nothing() -> None:
    rt = runtime.Runtime(api_client=None, namespace="ns", env={})
    rt.view.dtk_imagestream = delivery.NOT_DELIVERED
    openshift = platforms.detect_platform({apis.CONFIG_GROUP, apis.IMAGE_GROUP})
    outcome = asyncio.run(
        driver_reconciler.reconcile_drivers(
            rt, rt.view.snapshot(), {}, policy_parser.parse_policy({}), openshift, NOW
        )
    )
    assert outcome.plan is None and outcome.problem is None
    assert outcome.errors == {"watches": "not listed yet: the driver-toolkit ImageStream"}

"""We test these aspects of the operator's watches (ocp_gpu/watches.py, kube/object_watches.py), no API:

- every kind the operator reads is watched exactly once, through our own stream (kube/watching.py),
  on OpenShift or vanilla, with or without the NVIDIADriver API; each counts in the start-up
  barrier (no pass before its listing);
- the server filters: owned kinds by the managed-by label, in the operand namespace when
  namespaced; revisions by the driver component label; the OpenShift singletons by name;
- a refusal is logged by its reason and message (not cut JSON);
- what each view keeps and whom it wakes: an owned object's record (a pass re-applies what
  differs), a singleton NOT_DELIVERED until listed, a ClusterPolicy's status-only change as
  progress, an NVIDIADriver change as a policy change.
"""

from __future__ import annotations

import json

import pytest

from ocp_gpu import watches
from ocp_gpu.kube import object_watches, owning, reading, watching
from ocp_gpu.model import apis, labels
from ocp_gpu.planning import delivery
from ocp_gpu.reconcilers import object_views, runtime

ALL_GROUPS = frozenset(
    {apis.IMAGE_GROUP, apis.CONFIG_GROUP, "monitoring.coreos.com", "security.openshift.io"}
)
OWNED = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"


def _runtime(
    groups: frozenset[str] = frozenset(), nvidia_driver_api: bool = False, gpu_cluster_api: bool = False
) -> runtime.Runtime:
    rt = runtime.Runtime(api_client=None, namespace="ns", env={})  # type: ignore[arg-type]
    rt.view.api_groups = groups
    rt.view.nvidia_driver_api = nvidia_driver_api
    rt.view.gpu_cluster_api = gpu_cluster_api
    return rt


def _login(renew: bool) -> object:
    raise AssertionError("no watch runs in these tests")


@pytest.mark.parametrize("groups", [frozenset(), ALL_GROUPS], ids=["vanilla", "openshift"])
@pytest.mark.parametrize("nvidia_driver_api", [False, True], ids=["no-nvidiadriver", "nvidiadriver"])
@pytest.mark.parametrize("gpu_cluster_api", [False, True], ids=["no-gpucluster", "gpucluster"])
def test_every_kind_once_each_in_the_barrier(
    groups: frozenset[str], nvidia_driver_api: bool, gpu_cluster_api: bool
) -> None:
    rt = _runtime(groups, nvidia_driver_api, gpu_cluster_api)
    built = watches.build_watches(rt, _login)  # type: ignore[arg-type]
    owned = {kind.plural for kind in owning.watched_kinds(groups)}
    expected = {"pods", "nodes", "controllerrevisions", "clusterpolicies", *owned}
    if apis.IMAGE_GROUP in groups:
        expected.add("imagestreams")
    if apis.CONFIG_GROUP in groups:
        expected |= {"clusterversions", "proxies"}
    if nvidia_driver_api:
        expected.add("nvidiadrivers")
    if gpu_cluster_api:
        expected.add("gpuclusters")
    assert set(built) == expected
    paths = [watch._path for watch in built.values()]
    assert len(paths) == len(set(paths)), "a kind watched twice"
    # every watch's kind holds the first pass back until it is listed
    assert len(rt.view.watched) == len(built) and not rt.view.listed.is_set()
    if apis.IMAGE_GROUP in groups:
        assert rt.view.dtk_imagestream is delivery.NOT_DELIVERED


def test_the_server_filters() -> None:
    built = watches.build_watches(_runtime(ALL_GROUPS), _login)  # type: ignore[arg-type]
    assert built["configmaps"]._path == "/api/v1/namespaces/ns/configmaps"
    assert built["configmaps"]._selector == OWNED
    assert built["clusterroles"]._path == "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    assert built["servicemonitors"]._path == "/apis/monitoring.coreos.com/v1/namespaces/ns/servicemonitors"
    revisions = built["controllerrevisions"]
    assert revisions._path == "/apis/apps/v1/namespaces/ns/controllerrevisions"
    assert revisions._selector == f"{labels.COMPONENT}={labels.DRIVER_COMPONENT}"
    stream = built["imagestreams"]
    assert stream._path == f"/apis/{apis.IMAGE_GROUP}/v1/namespaces/openshift/imagestreams"
    assert stream._field_selector == f"metadata.name={labels.DTK_IMAGESTREAM_NAME}"
    assert built["clusterversions"]._field_selector == "metadata.name=version"
    assert built["proxies"]._field_selector == "metadata.name=cluster"
    assert (
        built["clusterpolicies"]._path
        == f"/apis/{apis.POLICY_GROUP}/{apis.POLICY_VERSION}/{apis.POLICY_PLURAL}"
    )


def test_owned_objects_are_kept_and_a_deletion_reapplies() -> None:
    rt = _runtime()
    kind = next(kind for kind in owning.OWNED_KINDS if kind.kind == "ConfigMap")
    view = object_views.OwnedView(rt, kind)
    body = {"metadata": {"name": "cm", "namespace": "ns", "annotations": {}, "labels": {}}}
    view.listed([object_watches.owned_facts(body)])
    ident = owning.ident("ConfigMap", "ns", "cm")
    assert rt.view.owned == {ident: owning.observed_object(body)}
    rt.scheduler.take_changes()
    view.seen(object_watches.owned_facts(body))
    assert not rt.scheduler.wake.is_set(), "the same record wakes nothing"
    view.gone("cm")
    assert ident not in rt.view.owned and rt.scheduler.substantive.is_set()


def test_a_policy_status_alone_is_progress() -> None:
    rt = _runtime()
    view = object_views.PolicyView(rt, apis.POLICY_GROUP, apis.POLICY_PLURAL)
    body = {"metadata": {"name": "p", "uid": "u", "generation": 1}, "spec": {"driver": {}}}
    view.listed([reading.cluster_policy(body)])
    assert rt.scheduler.take_changes().policies
    view.seen(reading.cluster_policy({**body, "status": {"state": "ready"}}))
    assert rt.scheduler.take_changes().progress_only
    view.seen(reading.cluster_policy({**body, "metadata": {**body["metadata"], "generation": 2}}))
    changes = rt.scheduler.take_changes()
    assert changes.policies and not changes.progress_only
    view.gone("p")
    assert not rt.view.policies and rt.scheduler.take_changes().policies


def test_a_singleton_keeps_no_managed_fields() -> None:
    rt = _runtime(ALL_GROUPS)
    view = object_views.SingletonView(rt, apis.CONFIG_GROUP, "proxies", "cluster_proxy")
    body = {"metadata": {"name": "cluster", "managedFields": [{"manager": "x"}]}, "spec": {"httpProxy": "p"}}
    view.listed([object_watches.singleton_facts(body)])
    assert rt.view.cluster_proxy == {
        "metadata": {"name": "cluster"},
        "spec": {"httpProxy": "p"},
        "status": {},
    }
    rt.scheduler.take_changes()
    # another manager's write changes managedFields alone: nothing we keep
    view.seen(object_watches.singleton_facts({**body, "metadata": {"name": "cluster", "managedFields": []}}))
    assert not rt.scheduler.wake.is_set()


def test_a_refusal_is_logged_by_its_reason_and_message() -> None:
    long_message = 'imagestreams.image.openshift.io "driver-toolkit" is forbidden: ' + "x" * 300
    body = json.dumps({"kind": "Status", "message": long_message, "reason": "Forbidden", "code": 403})
    assert str(watching.StatusError(403, body)).startswith("403: Forbidden: imagestreams.image.openshift.io")
    assert str(watching.StatusError(502, "<html>bad gateway</html>")) == "502: <html>bad gateway</html>"

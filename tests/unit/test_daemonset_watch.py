"""We test these aspects of our DaemonSets' watch without a server (the stream is
kube/watching.py's; on a real API server: tests/e2e/test_pod_watch.py):

- one DaemonSet object becomes both records the view keeps, once per event
  (`daemonset_watch.daemonset_facts`): the planning/status record and the owned-object record
  (applied hash, controller owner, component);
- the DaemonSet view (reconcilers/daemonset_view): driver DaemonSets are kept apart from the
  other operands'; pod counts moving is rollout progress (no substantive wake-up), a new
  DaemonSet or a changed template is not; a changed applied hash marks the owned objects; a
  deletion forgets both records and wakes a pass; a re-list forgets DaemonSets deleted meanwhile;
  a complete listing opens the start-up barrier only with kopf's kinds listed too.
"""

from __future__ import annotations

from typing import Any

from ocp_gpu.kube import daemonset_watch, owning
from ocp_gpu.model import labels
from ocp_gpu.reconcilers import daemonset_view, runtime

DRIVER = "nvidia-driver-daemonset-416.94.202407030122-0"
PLUGIN = "nvidia-device-plugin-daemonset"


def daemonset(
    name: str,
    *,
    driver: bool = False,
    ready: int = 0,
    desired: int = 3,
    image: str = "nvcr.io/nvidia/driver:550",
    applied: str = "h1",
) -> dict[str, Any]:
    component = labels.DRIVER_COMPONENT if driver else "nvidia-device-plugin"
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "generation": 1,
            "labels": {labels.COMPONENT: component, labels.MANAGED_BY: labels.MANAGED_BY_VALUE},
            "annotations": {labels.APPLIED_HASH: applied},
            "ownerReferences": [{"kind": "ClusterPolicy", "name": "p", "uid": "u1", "controller": True}],
            "managedFields": [{"manager": "kube-controller-manager"}],
        },
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}},
        "status": {
            "observedGeneration": 1,
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": desired,
            "numberReady": ready,
            "updatedNumberScheduled": desired,
        },
    }


def facts(**kwargs: Any) -> daemonset_watch.DaemonSetFacts:
    name = kwargs.pop("name", PLUGIN)
    return daemonset_watch.daemonset_facts(daemonset(name, **kwargs))


def _runtime() -> runtime.Runtime:
    return runtime.Runtime(api_client=None, namespace="ns", env={})  # type: ignore[arg-type]


def _clear(rt: runtime.Runtime) -> None:
    rt.scheduler.take_changes()
    rt.scheduler.take_upgrade_marks()


def _ident(name: str) -> owning.ObjectIdent:
    return owning.ident("DaemonSet", "ns", name)


def test_one_daemonset_becomes_both_records() -> None:
    seen = facts(name=DRIVER, driver=True, ready=2)
    assert seen.name == DRIVER and seen.daemonset.number_ready == 2
    assert seen.daemonset.image == "nvcr.io/nvidia/driver:550"
    assert seen.observed == owning.ObservedObject("h1", "u1", labels.DRIVER_COMPONENT)
    watch = daemonset_watch.DaemonSetWatch(lambda renew: None, "ns", daemonset_view.DaemonSetView(_runtime()))  # type: ignore[arg-type,return-value]
    assert watch._path == "/apis/apps/v1/namespaces/ns/daemonsets"
    assert watch._selector == f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"


def test_driver_daemonsets_are_kept_apart_and_owned() -> None:
    rt = _runtime()
    view = daemonset_view.DaemonSetView(rt)
    view.seen(facts(name=DRIVER, driver=True))
    view.seen(facts(name=PLUGIN))
    assert set(rt.view.driver_daemonsets) == {DRIVER} and set(rt.view.operand_daemonsets) == {PLUGIN}
    assert set(rt.view.owned) == {_ident(DRIVER), _ident(PLUGIN)}
    assert rt.scheduler.substantive.is_set(), "a DaemonSet seen for the first time wakes a pass"


def test_pod_counts_moving_is_progress_a_new_template_is_not() -> None:
    rt = _runtime()
    view = daemonset_view.DaemonSetView(rt)
    view.seen(facts(ready=0))
    _clear(rt)
    view.seen(facts(ready=1))
    marks = rt.scheduler
    assert marks.wake.is_set() and not marks.substantive.is_set() and marks.upgrade_wake.is_set()
    _clear(rt)
    # the same record again (a resync): nothing
    view.seen(facts(ready=1))
    assert not rt.scheduler.wake.is_set() and not rt.scheduler.upgrade_wake.is_set()
    view.seen(facts(ready=1, image="nvcr.io/nvidia/driver:570"))
    assert rt.scheduler.substantive.is_set()


def test_a_changed_applied_hash_marks_the_owned_objects() -> None:
    rt = _runtime()
    view = daemonset_view.DaemonSetView(rt)
    view.seen(facts())
    _clear(rt)
    view.seen(facts(applied="edited"))
    assert rt.scheduler.substantive.is_set() and rt.view.owned[_ident(PLUGIN)].applied_hash == "edited"


def test_a_deletion_forgets_both_records_and_wakes_a_pass() -> None:
    rt = _runtime()
    view = daemonset_view.DaemonSetView(rt)
    view.seen(facts(name=DRIVER, driver=True))
    _clear(rt)
    view.gone(DRIVER)
    assert not rt.view.driver_daemonsets and not rt.view.owned
    assert rt.scheduler.substantive.is_set() and rt.scheduler.upgrade_wake.is_set()
    _clear(rt)
    view.gone(DRIVER)
    assert not rt.scheduler.wake.is_set()


def test_a_re_list_forgets_daemonsets_deleted_meanwhile_and_opens_the_barrier() -> None:
    rt = _runtime()
    rt.view.watch("", "nodes")
    view = daemonset_view.DaemonSetView(rt)
    view.listed([facts(name=DRIVER, driver=True), facts(name=PLUGIN)])
    assert not rt.view.listed.is_set(), "the DaemonSets alone do not make the view complete"
    rt.view.mark_delivered("", "nodes")
    assert rt.view.listed.is_set()
    # an owned DaemonSet the pass recorded from its apply answer, then deleted meanwhile
    rt.view.owned[_ident("nvidia-dcgm")] = owning.ObservedObject("h", "u1")
    view.listed([facts(name=PLUGIN)])
    assert set(rt.view.operand_daemonsets) == {PLUGIN} and not rt.view.driver_daemonsets
    assert set(rt.view.owned) == {_ident(PLUGIN)}

"""We test these aspects of the operand pod watch without a server:

- one pod object becomes every fact the operator keeps of it, once (`pod_watch.pod_facts`):
  an operand's readiness, a validator pod, a driver pod (either mode) and its image pull;
  the strings pods repeat (namespace, app, node, DaemonSet, revision, image, driver key, the
  selector labels) are one copy across records decoded from separate events;
- what a watch event or an HTTP status asks for (planning/watch_resumption): keep, forget,
  bookmark, list again on 410 Gone (also as an ERROR event), log in again on 401, retry;
  the backoff doubles up to its cap;
- a watch response's lines decode as they arrive, split across chunks anywhere;
- the pod view (reconcilers/pod_view): a complete listing opens the start-up barrier only
  with kopf's kinds listed too, a re-list forgets pods deleted meanwhile, only a change
  wakes a loop, a driver pod turning Ready on a node in pod-restart-required is urgent;
- every object's managedFields are cut from an event or a list page before decoding
  (kube/watching.without_managed_fields), and what decodes is the object without them, even
  with the bytes the cut looks for inside keys and values; what cannot be cut safely (another
  field order, no spec, a bookmark, an error) decodes whole.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ocp_gpu.kube import pod_watch, watching
from ocp_gpu.model import labels, nodes, operand_types
from ocp_gpu.planning import watch_resumption
from ocp_gpu.planning.watch_resumption import Step
from ocp_gpu.reconcilers import pod_view, runtime
from ocp_gpu.rendering.operands import operand_catalog


def pod(
    name: str,
    app: str,
    node: str = "n1",
    *,
    ready: bool = False,
    extra_labels: dict[str, str] | None = None,
    waiting: str = "",
    version: str = "1",
) -> dict[str, Any]:
    statuses = [
        {
            "name": "nvidia-driver-ctr",
            "ready": ready,
            "restartCount": 0,
            "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}},
        }
    ]
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": version,
            # NB: every driver pod carries the component label (its app may be its DaemonSet's name)
            "labels": {
                labels.APP: app,
                **({labels.COMPONENT: labels.DRIVER_COMPONENT} if app == labels.DRIVER_APP else {}),
                **(extra_labels or {}),
            },
            "ownerReferences": [{"kind": "DaemonSet", "name": f"{app}-ds", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:550"}],
        },
        "status": {
            "phase": "Running" if ready else "Pending",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": statuses,
        },
    }


# --- one pod, every fact -----------------------------------------------------------------------


def test_an_operand_pod_is_only_an_operand_pod() -> None:
    facts = pod_watch.pod_facts(pod("p1", operand_catalog.DEVICE_PLUGIN.app, "n7", ready=True))
    assert facts.operand == operand_types.OperandPod("p1", operand_catalog.DEVICE_PLUGIN.app, "n7", True)
    assert (facts.validator, facts.driver, facts.pull) == (None, None, None)


def test_a_validator_pod_is_also_the_upgrade_s_validator_pod() -> None:
    facts = pod_watch.pod_facts(pod("v1", operand_catalog.OPERATOR_VALIDATOR.app, "n2", ready=True))
    assert facts.validator is not None
    assert (facts.validator.node, facts.validator.ready) == ("n2", True)
    assert facts.driver is None


@pytest.mark.parametrize(
    "driver_labels",
    [
        {labels.APP: labels.DRIVER_APP, labels.COMPONENT: labels.DRIVER_COMPONENT},
        {
            labels.APP: "nvidia-driver-daemonset-416.94.202407030122-0",
            labels.COMPONENT: labels.DRIVER_COMPONENT,
        },
        {labels.APP: labels.DRIVER_APP, labels.COMPONENT: labels.DRIVER_COMPONENT, labels.NVIDIA_DRIVER: "a"},
    ],
    ids=["policy mode", "DTK (app: its DaemonSet's name, NVIDIA's selector)", "NVIDIADriver pools"],
)
def test_a_driver_pod_carries_its_upgrade_record_and_its_pull(driver_labels: dict[str, str]) -> None:
    body = pod("d1", labels.DRIVER_APP, "n3", extra_labels=driver_labels, waiting="ImagePullBackOff")
    facts = pod_watch.pod_facts(body)
    assert facts.driver is not None and facts.pull is not None
    assert (facts.driver.node, facts.driver.ready, facts.driver.daemonset) == (
        "n3",
        False,
        "nvidia-driver-daemonset-ds",
    )
    assert facts.driver.waiting_reason == "ImagePullBackOff"
    assert facts.pull.pull_failing and facts.pull.image == "nvcr.io/nvidia/driver:550"
    assert not facts.operand.ready


def test_records_of_separate_events_share_every_repeated_string() -> None:
    # Two driver pods on one node (the old one terminating), each decoded from its own event
    # text, so every string starts as its own copy (issue 13: 15,000 pods at 5,000 nodes).
    extra = {
        labels.DRIVER_KEY: "416.94.202407030122-0",
        labels.DRIVER_STRATEGY: "dtk",
        "controller-revision-hash": "5d8f7c9b4",
        labels.COMPONENT: labels.DRIVER_COMPONENT,
    }
    first, second = (
        pod_watch.pod_facts(json.loads(json.dumps(pod(name, labels.DRIVER_APP, "gpu-1", extra_labels=extra))))
        for name in ("d1", "d2")
    )
    assert first.driver is not None and second.driver is not None
    assert first.pull is not None and second.pull is not None
    shared = [
        (first.driver.ref.namespace, second.driver.ref.namespace),
        (first.driver.node, second.driver.node),
        (first.operand.node, second.driver.node),
        (first.operand.app, second.operand.app),
        (first.driver.daemonset, second.driver.daemonset),
        (first.driver.revision_hash, second.driver.revision_hash),
        (first.driver.waiting_reason, second.driver.waiting_reason),
        (first.driver.selector_labels, second.driver.selector_labels),
        (first.pull.image, second.pull.image),
        (first.pull.key, second.pull.key),
        (first.pull.strategy, second.pull.strategy),
    ]
    assert [a is b for a, b in shared] == [True] * len(shared), shared
    # Shared, yet the same pairs as before.
    assert first.driver.selector_labels == (
        (labels.APP, labels.DRIVER_APP),
        (labels.COMPONENT, labels.DRIVER_COMPONENT),
    )
    # Each keeps its own name.
    assert (first.operand.name, second.operand.name) == ("d1", "d2")
    validators = [
        pod_watch.pod_facts(
            json.loads(json.dumps(pod(name, operand_catalog.OPERATOR_VALIDATOR.app, "gpu-1")))
        )
        for name in ("v1", "v2")
    ]
    assert validators[0].validator is not None and validators[1].validator is not None
    assert validators[0].validator.node is validators[1].validator.node is first.driver.node
    assert validators[0].validator.ref.namespace is first.driver.ref.namespace


def test_a_terminating_ready_pod_is_not_ready() -> None:
    body = pod("p1", operand_catalog.DEVICE_PLUGIN.app, ready=True)
    body["metadata"]["deletionTimestamp"] = "2026-11-24T08:00:00Z"
    assert not pod_watch.pod_facts(body).operand.ready


# --- what the stream asks for ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "step"),
    [
        ({"type": "ADDED", "object": {}}, Step.KEEP),
        ({"type": "MODIFIED", "object": {}}, Step.KEEP),
        ({"type": "DELETED", "object": {}}, Step.FORGET),
        ({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}, Step.BOOKMARK),
        ({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}, Step.RELIST),
        ({"type": "ERROR", "object": {"kind": "Status", "code": 500}}, Step.RETRY),
        ({"type": "ERROR", "object": {}}, Step.RETRY),
        ({"type": "SOMETHING-NEW", "object": {}}, Step.SKIP),
    ],
)
def test_each_watch_event_asks_for_one_step(event: dict[str, Any], step: Step) -> None:
    assert watch_resumption.step_for_event(event) is step


@pytest.mark.parametrize(
    ("status", "step"),
    [(410, Step.RELIST), (401, Step.RENEW), (403, Step.RETRY), (429, Step.RETRY), (503, Step.RETRY)],
)
def test_each_failed_request_asks_for_one_step(status: int, step: Step) -> None:
    assert watch_resumption.step_for_status(status) is step


def test_retries_back_off_doubling_up_to_the_cap() -> None:
    delays = [watch_resumption.retry_delay(n) for n in range(0, 12)]
    assert delays[0] == 0.0
    assert delays[1] == watch_resumption.FIRST_RETRY_S
    assert delays[2] == 2 * watch_resumption.FIRST_RETRY_S
    assert all(a <= b for a, b in itertools.pairwise(delays))
    assert max(delays) == watch_resumption.MAX_RETRY_S


# --- the watch response's lines ----------------------------------------------------------------


class _Chunks:
    """What `event_lines` reads of an aiohttp StreamReader: its chunks as they arrive."""

    def __init__(self, *chunks: bytes) -> None:
        self._chunks = chunks

    async def _iter(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk

    def iter_any(self) -> AsyncIterator[bytes]:
        return self._iter()


async def _decoded(*chunks: bytes) -> list[Any]:
    return [line async for line in watching.event_lines(_Chunks(*chunks))]  # type: ignore[arg-type]


def test_lines_split_across_chunks_anywhere_decode_whole() -> None:
    stream = b'{"type":"ADDED","object":{"a":1}}\n{"type":"BOOKMARK","object":{}}\n\n{"type":"DELETED"}\n'
    whole = asyncio.run(_decoded(stream))
    assert [event["type"] for event in whole] == ["ADDED", "BOOKMARK", "DELETED"]
    for cut in range(1, len(stream)):
        assert asyncio.run(_decoded(stream[:cut], stream[cut:])) == whole
    assert asyncio.run(_decoded(*(stream[i : i + 1] for i in range(len(stream))))) == whole


def test_a_line_longer_than_any_reader_buffer_decodes() -> None:
    big = b'{"type":"ADDED","object":{"note":"' + b"x" * 300_000 + b'"}}\n'
    (event,) = asyncio.run(_decoded(big[:70_000], big[70_000:]))
    assert len(event["object"]["note"]) == 300_000


# --- the pod view ------------------------------------------------------------------------------


def _runtime() -> runtime.Runtime:
    return runtime.Runtime(api_client=None, namespace="ns", env={})  # type: ignore[arg-type]


def test_the_barrier_waits_for_both_the_other_kinds_and_the_pod_listing() -> None:
    rt = _runtime()
    rt.view.watch("", "nodes")
    view = pod_view.PodView(rt)
    # the other watches listed their kinds, the pods are not yet.
    rt.view.mark_delivered("", "nodes")
    assert not rt.view.listed.is_set()
    view.listed([])
    assert rt.view.listed.is_set()

    rt = _runtime()
    rt.view.watch("", "nodes")
    view = pod_view.PodView(rt)
    view.listed([pod_watch.pod_facts(pod("p1", operand_catalog.DEVICE_PLUGIN.app))])
    assert not rt.view.listed.is_set(), "the pods alone do not make the view complete"
    rt.view.mark_delivered("", "nodes")
    assert rt.view.listed.is_set()


def test_a_re_list_forgets_pods_deleted_while_no_watch_was_open() -> None:
    rt = _runtime()
    view = pod_view.PodView(rt)
    driver = pod("d1", labels.DRIVER_APP, waiting="ErrImagePull")
    view.listed(
        [pod_watch.pod_facts(driver), pod_watch.pod_facts(pod("p1", operand_catalog.DEVICE_PLUGIN.app))]
    )
    assert set(rt.view.operand_pods) == {"d1", "p1"} and set(rt.view.driver_pods) == {"d1"}
    assert "d1" in rt.view.pull_failing_since
    view.listed([pod_watch.pod_facts(pod("p1", operand_catalog.DEVICE_PLUGIN.app))])
    assert set(rt.view.operand_pods) == {"p1"}
    assert not rt.view.driver_pods and not rt.view.driver_pod_pulls and not rt.view.pull_failing_since


def test_only_a_change_wakes_a_loop() -> None:
    rt = _runtime()
    view = pod_view.PodView(rt)
    plugin = pod("p1", operand_catalog.DEVICE_PLUGIN.app)
    view.seen(pod_watch.pod_facts(plugin))
    assert rt.scheduler.wake.is_set()
    rt.scheduler.wake.clear()
    rt.scheduler.upgrade_wake.clear()
    # the same facts again (a resync, a change to a field the record leaves out): nothing
    plugin["metadata"]["resourceVersion"] = "2"
    view.seen(pod_watch.pod_facts(plugin))
    assert not rt.scheduler.wake.is_set() and not rt.scheduler.upgrade_wake.is_set()
    view.seen(pod_watch.pod_facts(pod("p1", operand_catalog.DEVICE_PLUGIN.app, ready=True)))
    assert rt.scheduler.wake.is_set() and rt.view.operand_pods["p1"].ready
    rt.scheduler.wake.clear()
    view.gone("p1")
    assert rt.scheduler.wake.is_set() and not rt.view.operand_pods
    rt.scheduler.wake.clear()
    view.gone("p1")
    assert not rt.scheduler.wake.is_set()


def test_a_driver_pod_turning_ready_on_a_node_waiting_for_it_is_urgent() -> None:
    rt = _runtime()
    view = pod_view.PodView(rt)
    rt.view.node_facts[nodes.NodeName("n1")] = nodes.NodeFacts(
        name=nodes.NodeName("n1"),
        labels={labels.UPGRADE_STATE: "pod-restart-required"},
        os_image="",
        kernel_version="",
        unschedulable=False,
        gpus=1,
    )
    view.seen(pod_watch.pod_facts(pod("d1", labels.DRIVER_APP, "n1")))
    rt.scheduler.take_upgrade_marks()
    view.seen(pod_watch.pod_facts(pod("d1", labels.DRIVER_APP, "n1", ready=True)))
    assert rt.scheduler.upgrade_urgent.is_set() and rt.scheduler.upgrade_wake.is_set()


class _FailingOnce:
    """A PodSink whose first listing raises (a bug of ours on an odd pod)."""

    def __init__(self) -> None:
        self.listings = 0

    def listed(self, facts: Any) -> None:
        self.listings += 1
        if self.listings == 1:
            raise TypeError("an odd pod")

    def seen(self, facts: Any) -> None:
        pass

    def gone(self, name: str) -> None:
        pass


def test_a_bug_on_one_event_lists_again_instead_of_ending_the_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = _FailingOnce()
    watch = pod_watch.PodWatch(lambda renew: None, "ns", sink, apps=operand_catalog.POD_APPS)  # type: ignore[arg-type,return-value]
    lists = 0

    async def fake_list() -> None:
        nonlocal lists
        lists += 1
        watch.lists += 1
        sink.listed([])
        watch.resource_version = "1"

    async def fake_watch() -> None:
        # The second listing went through: stop here (the watch would stay open).
        raise asyncio.CancelledError

    monkeypatch.setattr(watch, "_list", fake_list)
    monkeypatch.setattr(watch, "_watch", fake_watch)
    monkeypatch.setattr(watch_resumption, "FIRST_RETRY_S", 0.0)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(watch.run())
    assert lists == 2 and sink.listings == 2


def test_a_watch_ending_at_once_with_nothing_backs_off(monkeypatch: pytest.MonkeyPatch) -> None:
    watch = pod_watch.PodWatch(lambda renew: None, "ns", _FailingOnce(), apps=operand_catalog.POD_APPS)  # type: ignore[arg-type,return-value]
    watch.resource_version = "1"
    delays: list[int] = []
    ends = iter([0, 0, 0, 5, 0])

    async def fake_watch() -> int:
        try:
            return next(ends)
        except StopIteration:
            raise asyncio.CancelledError from None

    def recorded(failures: int) -> float:
        delays.append(failures)
        return 0.0

    monkeypatch.setattr(watch, "_watch", fake_watch)
    monkeypatch.setattr(watch_resumption, "retry_delay", recorded)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(watch.run())
    # three empty ends back off longer each time; a stream with events resets the count
    assert delays == [1, 2, 3, 1]


# --- managedFields cut before decoding (kube/watching.without_managed_fields) -------------------


def _go_order(obj: dict[str, Any]) -> bytes:
    """As the API server writes a built-in kind: compact, metadata's managedFields last."""
    return json.dumps(obj, separators=(",", ":")).encode()


MANAGED = [
    {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-24T10:00:00Z",
        "fieldsType": "FieldsV1",
        # keys that hold brackets, quotes and the very bytes the cut looks for, escaped
        "fieldsV1": {
            "f:metadata": {"f:finalizers": {'v:"a]},\\"spec\\":[x]"': {}, ".": {}}},
            "f:spec": {'k:{"name":"c"}': {".": {}, "f:image": {}}},
        },
    },
    {"manager": "kwok", "operation": "Update", "subresource": "status", "fieldsV1": {"f:status": {}}},
]


def _pod_with_fields(name: str) -> dict[str, Any]:
    body = pod(name, operand_catalog.DEVICE_PLUGIN.app)
    body["metadata"]["annotations"] = {"note": ',"managedFields":[ ]},"spec": in a value'}
    body["metadata"]["finalizers"] = ['a]},"spec":[x]']
    body["metadata"]["managedFields"] = MANAGED
    return {"kind": "Pod", "apiVersion": "v1", **body}


def _stripped(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _stripped(v) for k, v in obj.items() if k != "managedFields"}
    if isinstance(obj, list):
        return [_stripped(v) for v in obj]
    return obj


def test_an_event_decodes_as_it_was_without_its_managed_fields() -> None:
    event = {"type": "MODIFIED", "object": _pod_with_fields("p1")}
    raw = _go_order(event)
    cut = watching.without_managed_fields(raw)
    assert len(cut) < len(raw) - 200
    assert json.loads(cut) == _stripped(event)
    assert watching.decode(raw) == _stripped(event)
    assert pod_watch.pod_facts(watching.decode(raw)["object"]) == pod_watch.pod_facts(event["object"])


def test_a_list_page_loses_every_item_s_managed_fields() -> None:
    page = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "7", "continue": "x"},
        "items": [
            _pod_with_fields("p1"),
            _pod_with_fields("p2"),
            pod("p3", operand_catalog.DEVICE_PLUGIN.app),
        ],
    }
    assert watching.decode(_go_order(page)) == _stripped(page)


def test_what_cannot_be_cut_safely_decodes_whole() -> None:
    # A custom resource (keys sorted: managedFields is not last in metadata), no spec at all,
    # a bookmark, an ERROR event: each decodes exactly as json.loads does.
    custom = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"annotations": {"a": "b"}, "managedFields": MANAGED, "name": "cp", "uid": "u"},
        "spec": {"driver": {}},
    }
    no_spec = {"kind": "ConfigMap", "metadata": {"name": "c", "managedFields": MANAGED}, "data": {"a": "]},"}}
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}}
    error = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    for obj in (custom, no_spec, bookmark, error):
        raw = json.dumps({"type": "ADDED", "object": obj}, separators=(",", ":"), sort_keys=True).encode()
        assert watching.decode(raw) == json.loads(raw)


class Recorded:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def listed(self, facts: Any) -> None:
        self.events.append(("listed", sorted(f.name for f in facts)))

    def seen(self, facts: Any) -> None:
        self.events.append(("seen", facts.name))

    def gone(self, name: str) -> None:
        self.events.append(("gone", name))


def test_only_operand_pods_reach_the_sink_a_dtk_driver_pod_among_them() -> None:
    # the watch's selector (`app` exists) lets every pod with an app label through
    recorded = Recorded()
    only = pod_watch.OperandsOnly(recorded, operand_catalog.POD_APPS)
    dtk = {
        labels.APP: "nvidia-driver-daemonset-416.94.202407030122-0",
        labels.COMPONENT: labels.DRIVER_COMPONENT,
    }
    driver = pod_watch.pod_facts(pod("d1", labels.DRIVER_APP, extra_labels=dtk))
    other = pod_watch.pod_facts(pod("x1", "something-else"))
    only.listed([driver, other])
    only.seen(driver)
    only.seen(other)
    only.gone("d1")
    assert recorded.events == [("listed", ["d1"]), ("seen", "d1"), ("gone", "x1"), ("gone", "d1")]

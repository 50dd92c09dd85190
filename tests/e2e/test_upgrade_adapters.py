"""We test these aspects of the upgrade adapters (ocp_gpu/kube/upgrading.py) on the local control plane:

- eviction: a PodDisruptionBudget that allows no disruption makes `evict_pod` return False and
  leaves the pod alone; an allowed eviction returns True and the pod goes; a pod already gone is fine;
- revisions: the current revision of a real DaemonSet (its pods scheduled by the real controller on
  kwok nodes) matches its pods' controller-revision-hash; after a template change (OnDelete) the new
  revision differs from the old pods' hash, the planner calls them outdated, and a deleted pod comes
  back current;
- `set_upgrade_state` writes the label and annotations in one patch, posts the `GPUDriverUpgrade`
  Event with the seed's exact message and logs under `controllers.Upgrade`; `cordon` carries its
  annotations; `upgrade_node` reads all of it back;
- the pod records: GPU requests (nvidia.com/gpu and nvidia.com/mig-*), controller, emptyDir, found
  through the `spec.nodeName` field selector, and the same records for many nodes from one paged
  LIST of every bound pod (`list_pods_on_nodes`, continue tokens followed);
- following a node's pods (`pod_following.PodFollower`) from a LIST's resourceVersion
  (`list_pods_on_node_at`): a deleted pod's going is seen and the pods left are the node's;
  a pod that stays makes it give up in time; a watch refused makes it fail (the task then
  reads instead);
- one node driven through the whole state machine by `read_upgrade_snapshot`, `plan_upgrades` and
  `apply_node_plan` alone: GPU pods deleted, other pods untouched, the driver pod restarted, the
  node cordoned and uncordoned, the seed's Event sequence.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from kubernetes import client

from ocp_gpu.kube import clients, connecting, pod_following, requesting, upgrading
from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.upgrade_observations import UpgradeState
from ocp_gpu.planning.upgrades import upgrade_pipeline, upgrade_plan
from ocp_gpu_harness import polling
from tests.unit._upgrades import policy

from .conftest import STEP_S, Run

pytestmark = pytest.mark.e2e

T = TypeVar("T")
S = UpgradeState


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Poll ``check`` until it returns something truthy (`harness/polling.py`: an exception is
    "not yet", the timeout names the last value and exception)."""
    return polling.wait_for(check, timeout, what=what, interval=0.1)


def bare_pod(
    node: str, name: str, pod_labels: dict[str, str] | None = None, resources: dict[str, str] | None = None
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.example/app:1"}
    if resources:
        container["resources"] = {"limits": resources, "requests": resources}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": pod_labels or {"app": name}},
        "spec": {"nodeName": node, "containers": [container]},
    }


@pytest.fixture
def node(run: Run) -> str:
    """One GPU node of the test's run."""
    (name,) = run.gpu_nodes(gpus=2)
    return name


def driver_selector(run: Run) -> str:
    """What the adapters are given to find the run's driver pods."""
    return f"{upgrading.DRIVER_SELECTOR},{run.node_selector}"


def driver_daemonset(run: dict[str, str], version: str = "1") -> dict[str, Any]:
    template_labels = {labels.APP: labels.DRIVER_APP, labels.COMPONENT: labels.DRIVER_COMPONENT, **run}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-driver-daemonset-test", "labels": template_labels},
        "spec": {
            "selector": {"matchLabels": template_labels},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {
                    "nodeSelector": run,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "driver",
                            "image": "registry.example/driver:1",
                            "env": [{"name": "V", "value": version}],
                        }
                    ],
                },
            },
        },
    }


def is_ready(pod: Any) -> bool:
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or [])
    )


def ready_driver_pods(kube: client.ApiClient, namespace: str, count: int) -> Callable[[], list[Any] | None]:
    core = client.CoreV1Api(kube)

    def check() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace, label_selector=upgrading.DRIVER_SELECTOR).items
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        return live if len(live) == count and all(is_ready(p) for p in live) else None

    return check


def events_for(kube: client.ApiClient, node: str) -> list[Any]:
    """The node's GPUDriverUpgrade Events in the order they were posted (timestamps have seconds only)."""
    items = (
        client.CoreV1Api(kube)
        .list_namespaced_event("default", field_selector=f"involvedObject.name={node}")
        .items
    )
    return sorted(
        (e for e in items if e.reason == upgrade_observations.EVENT_REASON),
        key=lambda e: int(e.metadata.resource_version),
    )


# --- eviction ------------------------------------------------------------------------------------


def test_eviction_blocked_by_a_pdb_returns_false(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    node: str,
) -> None:
    core, policy_api = client.CoreV1Api(kube), client.PolicyV1Api(kube)
    guarded = core.create_namespaced_pod(namespace, bare_pod(node, "guarded"))
    free = core.create_namespaced_pod(namespace, bare_pod(node, "free"))
    policy_api.create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": "guarded"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    wait_for(
        "both pods Ready",
        lambda: all(is_ready(core.read_namespaced_pod(n, namespace)) for n in ("guarded", "free")),
    )
    wait_for(
        "the PDB to count its pod",
        lambda: (
            policy_api.read_namespaced_pod_disruption_budget("guarded", namespace).status.current_healthy == 1
        ),
    )

    assert upgrading.evict_pod(api, namespace, "guarded", guarded.metadata.uid) is False
    assert core.read_namespaced_pod("guarded", namespace).metadata.deletion_timestamp is None

    assert upgrading.evict_pod(api, namespace, "free", free.metadata.uid) is True
    wait_for(
        "the evicted pod to go",
        lambda: not core.list_namespaced_pod(namespace, field_selector="metadata.name=free").items,
    )
    # Gone already: nothing to refuse.
    assert upgrading.evict_pod(api, namespace, "free", free.metadata.uid) is True
    upgrading.delete_pod(api, namespace, "free", free.metadata.uid)


# --- revisions -------------------------------------------------------------------------------------


def test_current_revision_matches_pods_and_moves_on_a_template_change(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    run: Run,
) -> None:
    nodes = run.gpu_nodes(2, gpus=2)
    apps = client.AppsV1Api(kube)
    apps.create_namespaced_daemon_set(namespace, driver_daemonset(run.labels))
    pods = wait_for("2 Ready driver pods", ready_driver_pods(kube, namespace, 2), STEP_S)
    selector = driver_selector(run)

    revisions = upgrading.list_controller_revisions(api, namespace, selector)
    old_hash = revisions["nvidia-driver-daemonset-test"]
    assert {p.metadata.labels[upgrade_observations.POD_REVISION_LABEL] for p in pods} == {old_hash}
    records = upgrading.list_driver_pods(api, namespace, selector)
    assert sorted(r.node for r in records) == sorted(nodes)
    assert all(
        r.ready and r.revision_hash == old_hash and r.daemonset == "nvidia-driver-daemonset-test"
        for r in records
    )

    apps.patch_namespaced_daemon_set(
        "nvidia-driver-daemonset-test", namespace, driver_daemonset(run.labels, version="2")
    )
    new_hash = wait_for(
        "a new ControllerRevision",
        lambda: (
            (
                h := upgrading.list_controller_revisions(api, namespace, selector)[
                    "nvidia-driver-daemonset-test"
                ]
            )
            != old_hash
            and h
        ),
    )
    assert new_hash != old_hash
    # OnDelete: the pods stay as they were, and the planner sees them outdated.
    snap = upgrading.read_upgrade_snapshot(
        api, namespace, policy(), node_selector=run.node_selector, driver_selector=selector
    )
    assert snap.daemonsets["nvidia-driver-daemonset-test"].current_hash == new_hash
    assert {upgrade_plan.check_driver(n, snap).check for n in snap.nodes} == {
        upgrade_plan.DriverCheck.OUTDATED
    }

    victim = records[0]
    upgrading.delete_pod(api, namespace, victim.ref.name, victim.ref.uid)

    def replaced() -> bool:
        fresh = [r for r in upgrading.list_driver_pods(api, namespace, selector) if r.node == victim.node]
        return (
            len(fresh) == 1
            and fresh[0].ref.uid != victim.ref.uid
            and fresh[0].revision_hash == new_hash
            and fresh[0].ready
        )

    wait_for("a current driver pod on the node", replaced, STEP_S)


# --- labels, annotations, events ----------------------------------------------------------------------


def test_set_upgrade_state_writes_label_event_and_log(
    kube: client.ApiClient,
    api: clients.ApiClient,
    run: Run,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (node,) = run.gpu_nodes(gpus=2)
    caplog.set_level(logging.INFO, logger=labels.UPGRADE_LOGGER)
    started = upgrade_observations.format_timestamp(datetime.datetime.now(datetime.UTC))
    upgrading.set_upgrade_state(
        api, node, S.POD_DELETION_REQUIRED, {upgrade_observations.POD_DELETION_START: started}
    )

    body = client.CoreV1Api(kube).read_node(node)
    assert body.metadata.labels[labels.UPGRADE_STATE] == "pod-deletion-required"
    assert body.metadata.annotations[upgrade_observations.POD_DELETION_START] == started
    events = wait_for("the GPUDriverUpgrade event", lambda: events_for(kube, node))
    assert [e.message for e in events] == ["Successfully updated node state label to [pod-deletion-required]"]
    assert events[0].involved_object.kind == "Node"
    assert events[0].involved_object.uid == body.metadata.uid
    assert events[0].type == "Normal"
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (
            labels.UPGRADE_LOGGER,
            f"Successfully updated node state label to [pod-deletion-required] node={node}",
        )
    ]

    upgrading.cordon(api, node, True, {upgrade_observations.CORDONED_BY_UPGRADE: "true"})
    upgrading.annotate(
        api, node, {upgrade_observations.POD_DELETION_START: None, labels.UPGRADE_ENABLED_ANNOTATION: "true"}
    )
    record = upgrading.upgrade_node(
        client.ApiClient().sanitize_for_serialization(client.CoreV1Api(kube).read_node(node))
    )
    assert record.state is S.POD_DELETION_REQUIRED
    assert record.unschedulable and record.cordoned_by_upgrade and record.upgrade_enabled and record.ready
    assert dict(record.timers) == {}
    assert not record.initially_unschedulable and not record.skip


# --- pod records -----------------------------------------------------------------------------------------


def test_pods_on_node(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    node, other = run.gpu_nodes(2, gpus=2)
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, bare_pod(node, "gpu", resources={"nvidia.com/gpu": "1"}))
    scratch = bare_pod(node, "scratch")
    scratch["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    core.create_namespaced_pod(namespace, scratch)
    core.create_namespaced_pod(namespace, bare_pod(other, "elsewhere", resources={"nvidia.com/gpu": "1"}))

    pods = {p.ref.name: p for p in upgrading.list_pods_on_node(api, node)}
    assert set(pods) == {"gpu", "scratch"}
    assert pods["gpu"].requests_gpu and not pods["gpu"].uses_empty_dir
    assert not pods["scratch"].requests_gpu and pods["scratch"].uses_empty_dir
    assert pods["gpu"].controller_kind is None and pods["gpu"].ref.uid

    # Many nodes at once: one paged LIST of the bound pods finds the same records (pages of one
    # pod here, so the continue token is followed); a node without pods gets an empty tuple.
    monkeypatch.setattr(requesting, "LIST_PAGE", 1)
    many = upgrading.list_pods_on_nodes(api, [node, other, f"{node}-absent"])
    assert {name: sorted(p.ref.name for p in found) for name, found in many.items()} == {
        node: ["gpu", "scratch"],
        other: ["elsewhere"],
        f"{node}-absent": [],
    }
    assert {p.ref.name: p for p in many[node]} == pods


def test_following_a_nodes_pods_until_a_deleted_one_is_gone(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    node: str,
) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, bare_pod(node, "gpu", resources={"nvidia.com/gpu": "1"}))
    core.create_namespaced_pod(namespace, bare_pod(node, "other"))
    pods, version = upgrading.list_pods_on_node_at(api, node)
    by_name = {p.ref.name: p for p in pods}
    assert set(by_name) == {"gpu", "other"} and version
    listed = pod_following.Followed(pods, version)

    async def follow(
        since: pod_following.Followed, gone: str, timeout: float
    ) -> pod_following.Followed | None:
        follower = pod_following.PodFollower(lambda renew: connecting.connection_info(api, renew=renew))
        try:
            done = functools.partial(upgrade_pipeline.are_gone, [by_name[gone].ref])
            return await follower.follow(node, since, done, timeout)
        finally:
            await follower.close()

    # A pod that stays: given up on in time (the passes read from then on).
    began = time.monotonic()
    assert asyncio.run(follow(listed, "other", 1.0)) is None
    # Gave up near its 1 s: budget 10 s for that plus the session's log-in and the watch request
    # (tens of milliseconds quiet, ten times that loaded), far below the 20 s a follow is given below.
    assert time.monotonic() - began < 10.0

    # NB: deleted after the LIST: the watch from its version still sees it go (kwok removes it).
    upgrading.delete_pod(api, namespace, "gpu", by_name["gpu"].ref.uid)
    followed = asyncio.run(follow(listed, "gpu", 20.0))
    assert followed is not None
    assert [p.ref.name for p in followed.pods] == ["other"]
    assert followed.version and followed.version != version
    # What a fresh read shows.
    assert {p.ref.uid for p in upgrading.list_pods_on_node(api, node)} == {by_name["other"].ref.uid}

    # A watch the API server refuses (a version it cannot parse): it fails, and the caller reads instead.
    with pytest.raises(pod_following.FollowFailed):
        asyncio.run(follow(pod_following.Followed(pods, "not-a-version"), "other", 5.0))


@pytest.mark.parametrize(("resource", "gpu"), [("nvidia.com/mig-1g.5gb", True), ("example.com/fpga", False)])
def test_gpu_resource_detection(resource: str, gpu: bool) -> None:
    # The converter alone (no API): the resources NVIDIA's filter looks for.
    body = bare_pod("n1", "p", resources={resource: "1"})
    assert upgrading.workload_pod(body).requests_gpu is gpu


# --- one node through the state machine, with the adapters only --------------------------------


def test_one_node_through_the_state_machine(
    kube: client.ApiClient,
    api: clients.ApiClient,
    namespace: str,
    run: Run,
    node: str,
) -> None:
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    apps.create_namespaced_daemon_set(namespace, driver_daemonset(run.labels))
    wait_for("the driver pod", ready_driver_pods(kube, namespace, 1), STEP_S)
    core.create_namespaced_pod(namespace, bare_pod(node, "trainer", resources={"nvidia.com/gpu": "1"}))
    core.create_namespaced_pod(namespace, bare_pod(node, "web"))
    wait_for(
        "workloads Ready",
        lambda: all(is_ready(core.read_namespaced_pod(n, namespace)) for n in ("trainer", "web")),
    )
    selector = driver_selector(run)
    node_selector = run.node_selector
    # force: the trainer is a bare pod.
    upgrade_policy = policy(force=True)

    def one_pass() -> upgrade_plan.NodePlan:
        snap = upgrading.read_upgrade_snapshot(
            api, namespace, upgrade_policy, node_selector=node_selector, driver_selector=selector
        )
        plan = upgrade_plan.plan_upgrades(snap, upgrade_policy, datetime.datetime.now(datetime.UTC))
        # As reconcilers.upgrade_reconciler does: the busy nodes' steps, each through apply_node_plan
        # (an ApiException fails the test).
        for node_plan in upgrading.busy_plans(plan.nodes):
            for step in node_plan.steps:
                upgrading.apply_node_plan(api, step)
        return plan.nodes[0]

    first = one_pass()
    assert first.transition is S.UPGRADE_DONE
    apps.patch_namespaced_daemon_set(
        "nvidia-driver-daemonset-test", namespace, driver_daemonset(run.labels, version="2")
    )
    wait_for("the new revision", lambda: one_pass().transition is S.UPGRADE_REQUIRED)
    deadline = time.monotonic() + 90
    while core.read_node(node).metadata.labels.get(labels.UPGRADE_STATE) != "upgrade-done":
        assert time.monotonic() < deadline, f"stuck: {one_pass()}"
        one_pass()
        time.sleep(0.2)

    body = core.read_node(node)
    assert not body.spec.unschedulable
    assert upgrade_observations.CORDONED_BY_UPGRADE not in (body.metadata.annotations or {})
    assert body.metadata.annotations[labels.UPGRADE_ENABLED_ANNOTATION] == "true"
    assert not core.list_namespaced_pod(namespace, field_selector="metadata.name=trainer").items
    assert core.read_namespaced_pod("web", namespace).metadata.deletion_timestamp is None
    messages = [e.message.split("[")[1].rstrip("]") for e in events_for(kube, node)]
    assert messages == [
        "upgrade-done",
        "upgrade-required",
        "cordon-required",
        "wait-for-jobs-required",
        "pod-deletion-required",
        "pod-restart-required",
        "uncordon-required",
        "upgrade-done",
    ]

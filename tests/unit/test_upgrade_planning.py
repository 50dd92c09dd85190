"""We test these aspects of `planning.upgrades.upgrade_plan.plan_upgrades` (the driver upgrade controller's
decisions):

- the driver check: outdated means the pod's controller-revision-hash differs from its
  DaemonSet's current revision; missing pods, orphans and unknown revisions never read as outdated;
- pause (`autoUpgrade: false`): every state × every driver situation × every cordon: nothing moves,
  nothing is done, only `nvidia.com/gpu-driver-upgrade-enabled` is removed; with the controller on
  the annotation is set once and a steady node costs no write;
- each state's edges and work, with named matrices over the policy options that matter to it:
  waitForCompletion (selector, timeout), gpuPodDeletion (force × deleteEmptyDir × drain), drain
  (force, deleteEmptyDir, selector, timeout), validation (deployed or not, Ready or not, 600 s),
  pod restart (outdated, terminating, starting, failing), uncordon and upgrade-failed recovery;
- cordons: the admin's cordon is recorded and never lifted; the upgrade's own cordon is marked in
  the same patch and lifted at the end, also after a failure and a relabel;
- timers: written with the transition into a timed state, removed on leaving, started lazily on a
  node labelled by hand;
- the budget: maxParallelUpgrades (0 = unlimited), maxUnavailable (count or percentage, cordoned and
  NotReady nodes count), failed nodes hold their slot, admin-cordoned nodes go first;
- upgrade day: a node whose pod comes from another RHCOS DaemonSet is not upgraded and not looped;
  mid-flight it skips ahead; one node's missing pod, unknown revision or unread pods never block others;
- skip label, the why-waiting strings (which pod, which budget, which timeout), Event messages,
  the six metrics, which nodes' pods the reader must list, label selectors;
- invariants (hypothesis): the budget is never exceeded; an admin's cordon is never lifted; with
  healthy pods every node reaches upgrade-done in a bounded number of passes; pause freezes every
  label; skip is honoured; a node switching RHCOS DaemonSets is not looped.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import UpgradePolicy
from ocp_gpu.model.upgrade_observations import (
    DriverRevision,
    UpgradeNode,
    UpgradeSnapshot,
    UpgradeState,
    ValidatorPod,
    WorkloadPod,
)
from ocp_gpu.planning.upgrades import upgrade_plan
from ocp_gpu.planning.upgrades.upgrade_plan import (
    Cordon,
    DeleteDriverPod,
    DeletePods,
    DriverCheck,
    EvictPods,
    Uncordon,
)
from tests.unit._upgrades import (
    ADMIN,
    ADMIN_UNRECORDED,
    CORDONS,
    CURRENT,
    DRIVERS,
    FAILING,
    MISSING,
    NEW_RHCOS,
    NO_REVISION,
    NONE,
    NOW,
    ORPHAN,
    OURS,
    OUTDATED,
    STARTING,
    TERMINATING,
    S,
    World,
    node,
    plan_one,
    pod,
    policy,
    snapshot,
    unavailable_after,
    validator,
)

ENABLED = labels.UPGRADE_ENABLED_ANNOTATION
LATER = NOW + datetime.timedelta(hours=1)

# --- named matrices -------------------------------------------------------------------------------

all_states = pytest.mark.parametrize("state", list(UpgradeState), ids=lambda s: s.value or "unknown")
in_progress_states = pytest.mark.parametrize(
    "state", sorted(upgrade_plan.IN_PROGRESS, key=list(UpgradeState).index), ids=lambda s: s.value
)
idle_states = pytest.mark.parametrize(
    "state", [S.UNKNOWN, S.UPGRADE_DONE, S.UPGRADE_REQUIRED], ids=["unknown", "done", "required"]
)
preparing_states = pytest.mark.parametrize(
    "state",
    [S.CORDON_REQUIRED, S.WAIT_FOR_JOBS_REQUIRED, S.POD_DELETION_REQUIRED, S.DRAIN_REQUIRED],
    ids=lambda s: s.value,
)
all_drivers = pytest.mark.parametrize("driver", DRIVERS)
all_cordons = pytest.mark.parametrize("cordon", CORDONS)
drain_switch = pytest.mark.parametrize("drain", [False, True], ids=["drain-off", "drain-on"])
deletion_options = pytest.mark.parametrize(
    ("force", "delete_empty_dir"),
    [(False, False), (True, False), (False, True), (True, True)],
    ids=["default", "force", "deleteEmptyDir", "force+deleteEmptyDir"],
)
# (controller, uses emptyDir) of a GPU pod, and which gpuPodDeletion options it needs.
gpu_pod_kinds = pytest.mark.parametrize(
    ("controller", "empty_dir", "needs_force", "needs_empty_dir"),
    [
        ("ReplicaSet", False, False, False),
        ("Job", False, False, False),
        (None, False, True, False),
        ("StatefulSet", True, False, True),
        (None, True, True, True),
    ],
    ids=["replicaset", "job", "bare", "emptydir", "bare+emptydir"],
)
validator_situations = pytest.mark.parametrize(
    ("validators", "validated"),
    [
        (None, True),
        ([], False),
        ([validator(ready=True)], True),
        ([validator(ready=False)], False),
        ([validator(ready=True), validator(ready=False)], False),
    ],
    ids=["not-deployed", "no-pod", "ready", "not-ready", "one-not-ready"],
)
# (cordon, whether finishing lifts it)
finish_cordons = pytest.mark.parametrize(
    ("cordon", "lifted"),
    [(OURS, True), (ADMIN, False), (ADMIN_UNRECORDED, False), (NONE, False)],
    ids=["ours", "admin", "admin-unrecorded", "schedulable"],
)


def moved(plan: upgrade_plan.NodePlan) -> UpgradeState | None:
    return plan.transition


# --- the driver check -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "check"),
    [
        (OUTDATED, DriverCheck.OUTDATED),
        (TERMINATING, DriverCheck.OUTDATED),
        (CURRENT, DriverCheck.READY),
        (NEW_RHCOS, DriverCheck.READY),
        (STARTING, DriverCheck.STARTING),
        (FAILING, DriverCheck.FAILING),
        (MISSING, DriverCheck.MISSING),
        (NO_REVISION, DriverCheck.NO_REVISION),
        (ORPHAN, DriverCheck.NO_REVISION),
    ],
)
def test_driver_check(driver: str, check: DriverCheck) -> None:
    n = node(driver=driver)
    assert upgrade_plan.check_driver(n, snapshot(n)).check is check


def test_a_daemonset_without_revisions_is_not_outdated() -> None:
    n = node(driver=OUTDATED)
    snap = dataclasses.replace(snapshot(n), daemonsets={})
    status = upgrade_plan.check_driver(n, snap)
    assert status.check is DriverCheck.NO_REVISION
    assert "no known current revision" in status.detail


def test_the_live_pod_counts_during_a_hand_over() -> None:
    old = node(driver=TERMINATING)
    new = node(driver=CURRENT)
    both = dataclasses.replace(new, driver_pods=old.driver_pods + new.driver_pods)
    assert upgrade_plan.check_driver(both, snapshot(both)).check is DriverCheck.READY


# --- pause and the upgrade-enabled annotation -----------------------------------------------------


@all_states
@all_drivers
@all_cordons
def test_pause_freezes_every_node(state: UpgradeState, driver: str, cordon: str) -> None:
    n = node(state=state, driver=driver, cordon=cordon, started=NOW - datetime.timedelta(days=1))
    result = plan_one(n, policy(auto=False), now=LATER)
    assert result.transition is None
    assert result.actions == ()
    assert dict(result.annotations) == {ENABLED: None}
    assert result.waiting.startswith("paused")


def test_pause_writes_nothing_once_the_annotation_is_gone() -> None:
    result = plan_one(node(state=S.POD_DELETION_REQUIRED, enabled=False), policy(auto=False))
    assert dict(result.annotations) == {}


@all_states
def test_the_controller_claims_eviction_on_every_node(state: UpgradeState) -> None:
    result = plan_one(node(state=state, enabled=False, driver=CURRENT, cordon=OURS))
    assert result.annotations[ENABLED] == "true"


@pytest.mark.parametrize("driver", [CURRENT, NEW_RHCOS, MISSING])
def test_a_steady_node_costs_no_write(driver: str) -> None:
    result = plan_one(node(state=S.UPGRADE_DONE, driver=driver))
    assert (result.transition, result.actions, dict(result.annotations)) == (None, (), {})


# --- unknown and upgrade-done ---------------------------------------------------------------------


@pytest.mark.parametrize("state", [S.UNKNOWN, S.UPGRADE_DONE], ids=["unknown", "done"])
@pytest.mark.parametrize(
    ("driver", "skip", "expected"),
    [
        (OUTDATED, False, S.UPGRADE_REQUIRED),
        (TERMINATING, False, S.UPGRADE_REQUIRED),
        # as NVIDIA's: outdated and skipped is upgrade-required (it waits there), never upgrade-done
        (OUTDATED, True, S.UPGRADE_REQUIRED),
        (MISSING, False, None),
        (NO_REVISION, False, None),
        (ORPHAN, False, None),
    ],
    ids=["outdated", "terminating", "skipped", "missing", "no-revision", "orphan"],
)
def test_idle_nodes(state: UpgradeState, driver: str, skip: bool, expected: UpgradeState | None) -> None:
    result = plan_one(node(state=state, driver=driver, skip=skip))
    assert moved(result) is expected
    assert result.actions == ()


@pytest.mark.parametrize("driver", [CURRENT, STARTING, FAILING, NEW_RHCOS])
def test_an_unprocessed_node_with_a_current_pod_is_done(driver: str) -> None:
    assert moved(plan_one(node(driver=driver))) is S.UPGRADE_DONE


@pytest.mark.parametrize("state", [S.UNKNOWN, S.UPGRADE_DONE], ids=["unknown", "done"])
def test_idle_nodes_say_why_they_wait(state: UpgradeState) -> None:
    skipped = plan_one(node(state=S.UPGRADE_REQUIRED, skip=True))
    assert skipped.transition is None
    assert "skipped: nvidia.com/gpu-driver-upgrade.skip=true" in skipped.waiting
    assert plan_one(node(state=state, driver=MISSING)).waiting == "no driver pod on the node"
    assert "no known current revision" in plan_one(node(state=state, driver=NO_REVISION)).waiting


def test_a_done_node_with_the_upgrades_cordon_is_uncordoned_in_place() -> None:
    # The label was set to upgrade-done by hand mid-upgrade: lift our cordon, forget it, stay done.
    result = plan_one(node(state=S.UPGRADE_DONE, driver=CURRENT, cordon=OURS))
    assert result.transition is None
    assert result.actions == (Uncordon(),)
    assert dict(result.annotations) == {upgrade_observations.CORDONED_BY_UPGRADE: None}


def test_an_unlabelled_node_with_the_upgrades_cordon_is_uncordoned_on_the_way_to_done() -> None:
    result = plan_one(node(state=S.UNKNOWN, driver=CURRENT, cordon=OURS))
    assert (result.transition, result.actions) == (S.UPGRADE_DONE, (Uncordon(),))
    assert result.annotations[upgrade_observations.CORDONED_BY_UPGRADE] is None


# --- upgrade-required and the budget --------------------------------------------------------------


@pytest.mark.parametrize(
    ("parallel", "unavailable", "in_progress", "required", "starts"),
    [
        (1, "100%", 0, 3, 1),
        (1, "100%", 1, 3, 0),
        (3, "100%", 1, 4, 2),
        (0, "100%", 2, 5, 5),
        (0, 2, 0, 5, 2),
        (0, "25%", 0, 8, 2),
        (0, "30%", 0, 8, 3),
        (5, 1, 0, 5, 1),
        (5, "0%", 0, 5, 0),
        (2, "100%", 0, 0, 0),
    ],
    ids=lambda value: str(value),
)
def test_slots(parallel: int, unavailable: int | str, in_progress: int, required: int, starts: int) -> None:
    nodes = [node(f"busy{i}", S.POD_RESTART_REQUIRED, cordon=OURS) for i in range(in_progress)]
    nodes += [node(f"wait{i}", S.UPGRADE_REQUIRED) for i in range(required)]
    result = upgrade_plan.plan_upgrades(
        snapshot(*nodes), policy(parallel=parallel, unavailable=unavailable), NOW
    )
    started = [p.node for p in result.nodes if p.transition is S.CORDON_REQUIRED]
    assert len(started) == starts
    assert started == sorted(started)
    assert result.budget.starts == tuple(started)


def test_failed_nodes_hold_their_slot() -> None:
    nodes = [node("bad", S.UPGRADE_FAILED, cordon=OURS), node("next", S.UPGRADE_REQUIRED)]
    result = upgrade_plan.plan_upgrades(
        snapshot(*nodes), policy(parallel=1, unavailable="100%"), NOW
    ).by_node()
    assert result[NodeName("next")].transition is None
    assert result[NodeName("next")].waiting == (
        "waiting for an upgrade slot: 1 of maxParallelUpgrades 1 taken (bad)"
    )


def test_the_budget_reason_names_a_few_nodes() -> None:
    nodes = [node(f"busy{i}", S.POD_RESTART_REQUIRED, cordon=OURS) for i in range(5)]
    nodes.append(node("next", S.UPGRADE_REQUIRED))
    result = upgrade_plan.plan_upgrades(
        snapshot(*nodes), policy(parallel=5, unavailable="100%"), NOW
    ).by_node()
    assert result[NodeName("next")].waiting == (
        "waiting for an upgrade slot: 5 of maxParallelUpgrades 5 taken (busy0, busy1, busy2 and 2 more)"
    )


@pytest.mark.parametrize("why", ["cordoned", "not-ready"])
def test_unavailable_nodes_count_against_max_unavailable(why: str) -> None:
    down = node(
        "down",
        S.UPGRADE_DONE,
        driver=CURRENT,
        cordon=ADMIN_UNRECORDED if why == "cordoned" else NONE,
        ready=why == "cordoned",
    )
    nodes = [down, node("a", S.UPGRADE_REQUIRED), node("b", S.UPGRADE_DONE, driver=CURRENT)]
    result = upgrade_plan.plan_upgrades(snapshot(*nodes), policy(parallel=0, unavailable=1), NOW).by_node()
    assert result[NodeName("a")].transition is None
    assert result[NodeName("a")].waiting == (
        "waiting for an upgrade slot: 1 of 3 GPU nodes unavailable, maxUnavailable 1 allows 1"
    )


def test_admin_cordoned_nodes_go_first_and_need_no_unavailability_room() -> None:
    nodes = [
        node("a-free", S.UPGRADE_REQUIRED),
        node("z-cordoned", S.UPGRADE_REQUIRED, cordon=ADMIN_UNRECORDED),
        node("y-cordoned", S.UPGRADE_REQUIRED, cordon=ADMIN_UNRECORDED),
    ]
    result = upgrade_plan.plan_upgrades(snapshot(*nodes), policy(parallel=0, unavailable=2), NOW)
    # Two nodes are already unavailable: only they may start, and they need no room.
    assert result.budget.starts == ("y-cordoned", "z-cordoned")


def test_cordon_required_counts_as_unavailable() -> None:
    nodes = [node("a", S.CORDON_REQUIRED), node("b", S.UPGRADE_REQUIRED), node("c", S.UPGRADE_DONE)]
    result = upgrade_plan.plan_upgrades(snapshot(*nodes), policy(parallel=0, unavailable=1), NOW)
    assert result.budget.starts == ()


def test_an_invalid_max_unavailable_starts_nothing() -> None:
    result = upgrade_plan.plan_upgrades(
        snapshot(node(state=S.UPGRADE_REQUIRED)), policy(unavailable="lots"), NOW
    )
    assert result.budget.starts == ()


@pytest.mark.parametrize(
    ("driver", "skip", "cordon", "expected", "actions"),
    [
        (OUTDATED, False, NONE, S.CORDON_REQUIRED, ()),
        (OUTDATED, True, NONE, None, ()),
        (TERMINATING, False, NONE, None, ()),
        (MISSING, False, NONE, None, ()),
        (NO_REVISION, False, NONE, None, ()),
        (CURRENT, False, NONE, S.UPGRADE_DONE, ()),
        (NEW_RHCOS, False, NONE, S.UPGRADE_DONE, ()),
        (CURRENT, False, OURS, S.UPGRADE_DONE, (Uncordon(),)),
        (CURRENT, False, ADMIN, S.UPGRADE_DONE, ()),
        (CURRENT, True, NONE, S.UPGRADE_DONE, ()),
    ],
    ids=[
        "outdated",
        "skipped",
        "terminating",
        "missing",
        "no-revision",
        "current",
        "new-rhcos",
        "current-our-cordon",
        "current-admin-cordon",
        "current-skipped",
    ],
)
def test_upgrade_required(
    driver: str, skip: bool, cordon: str, expected: UpgradeState | None, actions: tuple[object, ...]
) -> None:
    result = plan_one(node(state=S.UPGRADE_REQUIRED, driver=driver, skip=skip, cordon=cordon))
    assert (moved(result), result.actions) == (expected, actions)


def test_skipped_nodes_never_start() -> None:
    result = plan_one(node(state=S.UPGRADE_REQUIRED, skip=True), policy(parallel=0, unavailable="100%"))
    assert result.transition is None
    assert result.waiting == "skipped: nvidia.com/gpu-driver-upgrade.skip=true"


# --- cordon-required ------------------------------------------------------------------------------


@all_cordons
def test_cordon_required(cordon: str) -> None:
    result = plan_one(node(state=S.CORDON_REQUIRED, cordon=cordon))
    assert result.transition is S.WAIT_FOR_JOBS_REQUIRED
    expected = (Cordon({upgrade_observations.CORDONED_BY_UPGRADE: "true"}),) if cordon == NONE else ()
    assert result.actions == expected


@pytest.mark.parametrize(
    ("cordon", "recorded"),
    [(NONE, False), (ADMIN_UNRECORDED, True), (ADMIN, True), (OURS, False)],
    ids=["schedulable", "admin-cordoned-while-waiting", "admin-recorded", "ours-from-a-failed-run"],
)
def test_entering_cordon_required_records_an_admins_cordon(cordon: str, recorded: bool) -> None:
    result = plan_one(node(state=S.UPGRADE_REQUIRED, cordon=cordon))
    assert result.transition is S.CORDON_REQUIRED
    assert result.annotations.get(upgrade_observations.INITIAL_UNSCHEDULABLE) == (
        "true" if recorded else None
    )


# --- wait-for-jobs-required -----------------------------------------------------------------------

JOB = {"app": "training"}


@pytest.mark.parametrize(
    ("selector", "pods", "expected"),
    [
        ("", [pod("t", pod_labels=JOB)], S.POD_DELETION_REQUIRED),
        ("app=training", [], S.POD_DELETION_REQUIRED),
        ("app=training", [pod("t", pod_labels=JOB)], None),
        ("app=training", [pod("t", pod_labels=JOB, phase="Pending")], None),
        ("app=training", [pod("t", pod_labels=JOB, phase="Succeeded")], S.POD_DELETION_REQUIRED),
        ("app=training", [pod("t", pod_labels=JOB, phase="Failed")], S.POD_DELETION_REQUIRED),
        ("app=training", [pod("t", pod_labels={"app": "web"})], S.POD_DELETION_REQUIRED),
        ("app in (training, eval)", [pod("t", pod_labels=JOB)], None),
    ],
    ids=["no-selector", "no-pods", "running", "pending", "succeeded", "failed", "other-pods", "set-based"],
)
def test_wait_for_jobs(selector: str, pods: list, expected: UpgradeState | None) -> None:
    result = plan_one(node(state=S.WAIT_FOR_JOBS_REQUIRED), policy(wait_selector=selector), pods=pods)
    assert moved(result) is expected
    assert result.actions == ()


@pytest.mark.parametrize(
    ("timeout", "waited", "expected"),
    [(0, 10**6, None), (60, 59, None), (60, 61, S.POD_DELETION_REQUIRED)],
    ids=["forever", "before", "after"],
)
def test_wait_for_jobs_timeout(timeout: int, waited: int, expected: UpgradeState | None) -> None:
    n = node(state=S.WAIT_FOR_JOBS_REQUIRED, started=NOW - datetime.timedelta(seconds=waited))
    result = plan_one(
        n, policy(wait_selector="app=training", wait_timeout=timeout), pods=[pod("t", pod_labels=JOB)]
    )
    assert moved(result) is expected


def test_waiting_for_jobs_names_the_pods_and_the_timeout() -> None:
    n = node(state=S.WAIT_FOR_JOBS_REQUIRED, started=NOW - datetime.timedelta(seconds=50))
    result = plan_one(
        n, policy(wait_selector="app=training", wait_timeout=300), pods=[pod("t", pod_labels=JOB)]
    )
    assert result.waiting == (
        "waiting for 1 pod(s) matching 'app=training' to complete: work/t (timeout 5m00s, 4m10s left)"
    )
    forever = plan_one(n, policy(wait_selector="app=training"), pods=[pod("t", pod_labels=JOB)])
    assert forever.waiting.endswith("(no timeout: waitForCompletion.timeoutSeconds is 0)")


def test_an_invalid_wait_selector_holds_the_node_and_says_so() -> None:
    result = plan_one(node(state=S.WAIT_FOR_JOBS_REQUIRED), policy(wait_selector="app in training"))
    assert result.transition is None
    assert "waitForCompletion.podSelector 'app in training' is invalid" in result.waiting


# --- pod-deletion-required ------------------------------------------------------------------------


@gpu_pod_kinds
@deletion_options
@drain_switch
def test_pod_deletion_matrix(
    controller: str | None,
    empty_dir: bool,
    needs_force: bool,
    needs_empty_dir: bool,
    force: bool,
    delete_empty_dir: bool,
    drain: bool,
) -> None:
    gpu = pod("gpu", controller=controller, empty_dir=empty_dir)
    result = plan_one(
        node(state=S.POD_DELETION_REQUIRED),
        policy(force=force, empty_dir=delete_empty_dir, drain=drain),
        pods=[gpu, pod("web", gpu=False, controller=None, empty_dir=True)],
    )
    deletable = (force or not needs_force) and (delete_empty_dir or not needs_empty_dir)
    if deletable:
        # Only the GPU pod, never the other one.
        assert (result.transition, result.actions) == (None, (DeletePods((gpu.ref,)),))
        assert result.waiting.startswith("deleting 1 GPU pod(s): work/gpu (timeout 5m00s")
    else:
        # NVIDIA: a GPU pod that may not be deleted fails the step before anything is deleted.
        assert result.actions == ()
        assert result.transition is (S.DRAIN_REQUIRED if drain else S.UPGRADE_FAILED)


@pytest.mark.parametrize(
    ("pods", "expected", "deleted"),
    [
        ([], S.POD_RESTART_REQUIRED, ()),
        ([pod("web", gpu=False)], S.POD_RESTART_REQUIRED, ()),
        ([pod("done", phase="Succeeded")], S.POD_RESTART_REQUIRED, ()),
        ([pod("going", terminating=True)], None, ()),
        ([pod("going", terminating=True), pod("gpu")], None, ("gpu",)),
    ],
    ids=["none", "no-gpu", "finished-gpu", "terminating", "terminating-and-live"],
)
def test_pod_deletion_progress(pods: list, expected: UpgradeState | None, deleted: tuple[str, ...]) -> None:
    result = plan_one(node(state=S.POD_DELETION_REQUIRED), pods=pods)
    assert moved(result) is expected
    refs = tuple(p.ref for p in pods if p.ref.name in deleted)
    assert result.actions == ((DeletePods(refs),) if refs else ())


@pytest.mark.parametrize("controller", ["DaemonSet", "mirror"])
def test_gpu_daemonset_and_static_pods_cannot_be_deleted(controller: str) -> None:
    gpu = pod("gpu", controller=None if controller == "mirror" else controller)
    if controller == "mirror":
        gpu = dataclasses.replace(gpu, mirror=True)
    result = plan_one(node(state=S.POD_DELETION_REQUIRED), policy(force=True), pods=[gpu])
    assert result.transition is S.UPGRADE_FAILED


@pytest.mark.parametrize("resource_kind", ["gpu", "mig"])
def test_mig_pods_are_gpu_pods(resource_kind: str) -> None:
    # The reader sets requests_gpu for nvidia.com/gpu* and nvidia.com/mig-*; here both look the same.
    assert upgrade_observations.is_gpu_resource(
        "nvidia.com/gpu" if resource_kind == "gpu" else "nvidia.com/mig-3g.20gb"
    )


@drain_switch
@pytest.mark.parametrize(
    ("timeout", "waited", "expired"), [(300, 299, False), (300, 301, True), (0, 10**6, False)]
)
def test_pod_deletion_timeout(drain: bool, timeout: int, waited: int, expired: bool) -> None:
    n = node(state=S.POD_DELETION_REQUIRED, started=NOW - datetime.timedelta(seconds=waited))
    result = plan_one(n, policy(drain=drain, deletion_timeout=timeout), pods=[pod("gpu", terminating=True)])
    expected = (S.DRAIN_REQUIRED if drain else S.UPGRADE_FAILED) if expired else None
    assert result.transition is expected


def test_pods_not_read_hold_only_that_node() -> None:
    n1 = node("n1", S.POD_DELETION_REQUIRED)
    n2 = node("n2", S.UPGRADE_REQUIRED)
    snap = dataclasses.replace(snapshot(n1, n2), pods={})
    result = upgrade_plan.plan_upgrades(snap, policy(parallel=0, unavailable="100%"), NOW).by_node()
    assert result[NodeName("n1")].transition is None
    assert result[NodeName("n1")].waiting == "the pods on this node were not read this pass"
    assert result[NodeName("n2")].transition is S.CORDON_REQUIRED


# --- drain-required -------------------------------------------------------------------------------


def test_drain_disabled_goes_back_to_pod_deletion() -> None:
    assert plan_one(node(state=S.DRAIN_REQUIRED), policy(drain=False)).transition is S.POD_DELETION_REQUIRED


def test_drain_evicts_what_kubectl_drain_would() -> None:
    pods = [
        pod("gpu"),
        pod("web", gpu=False),
        pod("ds", gpu=False, controller="DaemonSet"),
        dataclasses.replace(pod("static", gpu=False, controller="Node"), mirror=True),
        pod("operator", gpu=False, pod_labels={"nvidia.com/gpu-driver-upgrade-drain.skip": "true"}),
        pod("leaving", terminating=True),
    ]
    result = plan_one(node(state=S.DRAIN_REQUIRED), policy(drain=True), pods=pods)
    assert result.transition is None
    assert result.actions == (EvictPods((pods[0].ref, pods[1].ref)),)
    assert "a PodDisruptionBudget may be refusing evictions" in result.waiting


@pytest.mark.parametrize(
    ("selector", "evicted"),
    [("", ("gpu", "web")), ("tier=batch", ("gpu",)), ("tier!=batch", ("web",))],
    ids=["all", "selected", "negated"],
)
def test_drain_pod_selector(selector: str, evicted: tuple[str, ...]) -> None:
    pods = [pod("gpu", pod_labels={"tier": "batch"}), pod("web", gpu=False)]
    result = plan_one(node(state=S.DRAIN_REQUIRED), policy(drain=True, drain_selector=selector), pods=pods)
    assert result.actions == (EvictPods(tuple(p.ref for p in pods if p.ref.name in evicted)),)


@pytest.mark.parametrize(
    ("controller", "empty_dir", "phase", "drain_force", "drain_empty_dir", "blocked"),
    [
        (None, False, "Running", False, False, True),
        (None, False, "Running", True, False, False),
        ("ReplicaSet", True, "Running", False, False, True),
        ("ReplicaSet", True, "Running", False, True, False),
        (None, True, "Succeeded", False, False, False),
    ],
    ids=["bare", "bare-forced", "emptydir", "emptydir-allowed", "finished"],
)
def test_drain_options(
    controller: str | None,
    empty_dir: bool,
    phase: str,
    drain_force: bool,
    drain_empty_dir: bool,
    blocked: bool,
) -> None:
    the_pod = pod("p", gpu=False, controller=controller, empty_dir=empty_dir, phase=phase)
    result = plan_one(
        node(state=S.DRAIN_REQUIRED),
        policy(drain=True, drain_force=drain_force, drain_empty_dir=drain_empty_dir),
        pods=[the_pod],
    )
    if blocked:
        assert (result.transition, result.actions) == (S.UPGRADE_FAILED, ())
    else:
        assert (result.transition, result.actions) == (None, (EvictPods((the_pod.ref,)),))


@pytest.mark.parametrize(
    ("timeout", "waited", "expired"), [(300, 299, False), (300, 301, True), (0, 10**6, False)]
)
def test_drain_timeout(timeout: int, waited: int, expired: bool) -> None:
    n = node(state=S.DRAIN_REQUIRED, started=NOW - datetime.timedelta(seconds=waited))
    result = plan_one(n, policy(drain=True, drain_timeout=timeout), pods=[pod("pdb-protected")])
    assert result.transition is (S.UPGRADE_FAILED if expired else None)


def test_drained_when_only_unselected_pods_remain() -> None:
    pods = [pod("ds", controller="DaemonSet"), pod("web", gpu=False, pod_labels={"tier": "web"})]
    result = plan_one(
        node(state=S.DRAIN_REQUIRED), policy(drain=True, drain_selector="tier=batch"), pods=pods
    )
    assert result.transition is S.POD_RESTART_REQUIRED


# --- pod-restart-required -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "expected", "restart"),
    [
        (OUTDATED, None, True),
        (TERMINATING, None, False),
        (MISSING, None, False),
        (NO_REVISION, None, False),
        (STARTING, None, False),
        (FAILING, S.UPGRADE_FAILED, False),
    ],
)
def test_pod_restart(driver: str, expected: UpgradeState | None, restart: bool) -> None:
    n = node(state=S.POD_RESTART_REQUIRED, driver=driver, cordon=OURS)
    result = plan_one(n)
    assert moved(result) is expected
    pod_ref = n.driver_pods[0].ref if n.driver_pods else None
    assert result.actions == ((DeleteDriverPod(pod_ref),) if restart else ())


@pytest.mark.parametrize("driver", [CURRENT, NEW_RHCOS])
@finish_cordons
@pytest.mark.parametrize("validator_deployed", [True, False], ids=["validator", "no-validator"])
def test_pod_restart_done(driver: str, cordon: str, lifted: bool, validator_deployed: bool) -> None:
    validators = [validator()] if validator_deployed else None
    result = plan_one(node(state=S.POD_RESTART_REQUIRED, driver=driver, cordon=cordon), validators=validators)
    if validator_deployed:
        assert result.transition is S.VALIDATION_REQUIRED
    else:
        assert result.transition is (S.UNCORDON_REQUIRED if lifted else S.UPGRADE_DONE)


def test_pod_restart_says_what_the_new_pod_waits_for() -> None:
    result = plan_one(node(state=S.POD_RESTART_REQUIRED, driver=FAILING.replace("failing", "starting")))
    assert result.waiting == "driver pod nvidia-driver-n1 is not Ready yet (timeout 10m00s, 10m00s left)"
    outdated = plan_one(node(state=S.POD_RESTART_REQUIRED, driver=OUTDATED))
    assert outdated.waiting.endswith("is at 7c9a5d): restarting it (timeout 10m00s, 10m00s left)")


@finish_cordons
@pytest.mark.parametrize("driver", [STARTING, MISSING, OUTDATED, TERMINATING])
def test_pod_restart_times_out_into_upgrade_failed(driver: str, cordon: str, lifted: bool) -> None:
    """A driver pod that never becomes current and Ready (image pull failing) does not strand the node."""
    waiting = node(
        state=S.POD_RESTART_REQUIRED,
        driver=driver,
        cordon=cordon,
        started=NOW - datetime.timedelta(seconds=599),
    )
    assert plan_one(waiting).transition is None
    stuck = node(
        state=S.POD_RESTART_REQUIRED,
        driver=driver,
        cordon=cordon,
        started=NOW - datetime.timedelta(seconds=601),
    )
    result = plan_one(stuck)
    assert result.transition is S.UPGRADE_FAILED
    # The cordon is left as it is: lifted only once the node recovers, an admin's never.
    assert not any(isinstance(action, upgrade_plan.Uncordon) for action in result.actions)
    shorter = dataclasses.replace(policy(), pod_restart_timeout_seconds=30)
    assert plan_one(
        node(state=S.POD_RESTART_REQUIRED, driver=driver, started=NOW - datetime.timedelta(seconds=31)),
        shorter,
    ).transition is (S.UPGRADE_FAILED)


def test_pod_restart_timer_starts_when_missing() -> None:
    unlabelled_timer = dataclasses.replace(node(state=S.POD_RESTART_REQUIRED, driver=STARTING), timers={})
    result = plan_one(unlabelled_timer)
    assert result.transition is None
    assert upgrade_observations.POD_RESTART_START in result.annotations


# --- validation-required --------------------------------------------------------------------------


@validator_situations
@finish_cordons
def test_validation(
    validators: list[ValidatorPod] | None, validated: bool, cordon: str, lifted: bool
) -> None:
    result = plan_one(node(state=S.VALIDATION_REQUIRED, driver=CURRENT, cordon=cordon), validators=validators)
    if validated:
        assert result.transition is (S.UNCORDON_REQUIRED if lifted else S.UPGRADE_DONE)
    else:
        assert result.transition is None
        assert "(timeout 10m00s, 10m00s left)" in result.waiting


@pytest.mark.parametrize(("waited", "expired"), [(600, False), (601, True)])
def test_validation_timeout(waited: int, expired: bool) -> None:
    n = node(state=S.VALIDATION_REQUIRED, started=NOW - datetime.timedelta(seconds=waited))
    result = plan_one(n, validators=[validator(ready=False)])
    assert result.transition is (S.UPGRADE_FAILED if expired else None)


# --- uncordon-required ----------------------------------------------------------------------------


@finish_cordons
def test_uncordon(cordon: str, lifted: bool) -> None:
    result = plan_one(node(state=S.UNCORDON_REQUIRED, driver=CURRENT, cordon=cordon))
    assert result.transition is S.UPGRADE_DONE
    assert result.actions == ((Uncordon(),) if lifted else ())
    # The run is over: its cordon records go.
    if cordon == OURS:
        assert result.annotations[upgrade_observations.CORDONED_BY_UPGRADE] is None
    if cordon == ADMIN:
        assert result.annotations[upgrade_observations.INITIAL_UNSCHEDULABLE] is None


# --- upgrade-failed -------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", [OUTDATED, STARTING, FAILING, MISSING, NO_REVISION])
def test_failed_nodes_wait_for_the_admin(driver: str) -> None:
    result = plan_one(node(state=S.UPGRADE_FAILED, driver=driver, cordon=OURS))
    assert (result.transition, result.actions) == (None, ())
    assert result.waiting.endswith(
        "relabel the node nvidia.com/gpu-driver-upgrade-state=upgrade-required to retry"
    )


@validator_situations
@finish_cordons
def test_failed_nodes_recover_when_healthy(
    validators: list[ValidatorPod] | None, validated: bool, cordon: str, lifted: bool
) -> None:
    result = plan_one(node(state=S.UPGRADE_FAILED, driver=CURRENT, cordon=cordon), validators=validators)
    if validated:
        assert result.transition is (S.UNCORDON_REQUIRED if lifted else S.UPGRADE_DONE)
    else:
        assert result.transition is None


def test_relabelled_failed_node_keeps_the_upgrades_cordon_liftable() -> None:
    """Failed with our cordon, relabelled upgrade-required: the cordon is not mistaken for the admin's."""
    n = node(state=S.UPGRADE_REQUIRED, cordon=OURS)
    to_cordon = plan_one(n)
    assert to_cordon.transition is S.CORDON_REQUIRED
    assert upgrade_observations.INITIAL_UNSCHEDULABLE not in to_cordon.annotations


# --- upgrade day and isolation --------------------------------------------------------------------


@preparing_states
@drain_switch
def test_a_pod_replaced_mid_flight_skips_ahead(state: UpgradeState, drain: bool) -> None:
    result = plan_one(
        node(state=state, driver=NEW_RHCOS, cordon=OURS), policy(drain=drain), pods=[pod("gpu")]
    )
    assert result.transition is S.POD_RESTART_REQUIRED
    assert result.actions == ()


@all_states
def test_a_pod_from_another_rhcos_daemonset_is_never_restarted(state: UpgradeState) -> None:
    result = plan_one(
        node(state=state, driver=NEW_RHCOS, cordon=OURS), pods=[pod("gpu")], validators=[validator()]
    )
    assert result.transition not in (S.UPGRADE_REQUIRED, S.CORDON_REQUIRED, S.UPGRADE_FAILED)
    assert not any(isinstance(action, DeleteDriverPod | DeletePods | EvictPods) for action in result.actions)


def test_one_broken_daemonset_does_not_block_the_others() -> None:
    broken = node("broken", S.UPGRADE_DONE, driver=NO_REVISION)
    unscheduled = node("unscheduled", S.UPGRADE_DONE, driver=MISSING)
    fine = node("fine", S.UPGRADE_DONE, driver=OUTDATED)
    snap = snapshot(broken, unscheduled, fine)
    snap = dataclasses.replace(
        snap,
        daemonsets={
            **snap.daemonsets,
            "nvidia-driver-daemonset-unknown": DriverRevision(
                daemonset="nvidia-driver-daemonset-unknown", current_hash=None, unscheduled=3
            ),
        },
    )
    result = upgrade_plan.plan_upgrades(snap, policy(), NOW).by_node()
    assert result[NodeName("fine")].transition is S.UPGRADE_REQUIRED
    assert result[NodeName("broken")].transition is None
    assert "no known current revision" in result[NodeName("broken")].waiting
    assert result[NodeName("unscheduled")].waiting == "no driver pod on the node"


# --- timers ---------------------------------------------------------------------------------------


def test_entering_a_timed_state_starts_its_timer_and_drops_the_others() -> None:
    stale = {upgrade_observations.WAIT_FOR_COMPLETION_START: NOW - datetime.timedelta(minutes=5)}
    n = node(state=S.WAIT_FOR_JOBS_REQUIRED, timers=stale)
    result = plan_one(n)
    assert result.transition is S.POD_DELETION_REQUIRED
    assert dict(result.annotations) == {
        upgrade_observations.WAIT_FOR_COMPLETION_START: None,
        upgrade_observations.POD_DELETION_START: upgrade_observations.format_timestamp(NOW),
    }


def test_a_hand_labelled_timed_state_starts_its_timer_lazily() -> None:
    n = dataclasses.replace(node(state=S.VALIDATION_REQUIRED), timers={})
    result = plan_one(n, validators=[validator(ready=False)])
    assert result.transition is None
    assert dict(result.annotations) == {
        upgrade_observations.VALIDATION_START: upgrade_observations.format_timestamp(NOW)
    }
    assert "(timeout 10m00s, starting now)" in result.waiting


def test_a_running_timer_is_not_rewritten() -> None:
    soon = NOW + datetime.timedelta(seconds=60)
    result = plan_one(node(state=S.VALIDATION_REQUIRED), validators=[validator(ready=False)], now=soon)
    assert dict(result.annotations) == {}


# --- events and metrics ---------------------------------------------------------------------------


def test_event_messages() -> None:
    result = plan_one(node(state=S.UPGRADE_REQUIRED))
    assert result.event_message == "Successfully updated node state label to [cordon-required]"
    assert plan_one(node(state=S.UPGRADE_REQUIRED, skip=True)).event_message is None


def test_summarize() -> None:
    nodes = [
        node("done", S.UPGRADE_DONE, driver=CURRENT),
        node("failed", S.UPGRADE_FAILED, cordon=OURS),
        node("restart", S.POD_RESTART_REQUIRED, cordon=OURS),
        node("next", S.UPGRADE_REQUIRED),
        node("skipped", S.UPGRADE_REQUIRED, skip=True),
        node("fresh", S.UNKNOWN),
    ]
    result = upgrade_plan.plan_upgrades(snapshot(*nodes), policy(parallel=3, unavailable="100%"), NOW)
    assert upgrade_plan.summarize(result) == upgrade_plan.UpgradeCounts(
        auto_upgrade_enabled=1, in_progress=2, done=1, failed=1, available=0, pending=1
    )
    paused = upgrade_plan.plan_upgrades(snapshot(*nodes), policy(auto=False), NOW)
    assert upgrade_plan.summarize(paused) == upgrade_plan.UpgradeCounts(
        auto_upgrade_enabled=0, in_progress=1, done=1, failed=1, available=0, pending=1
    )


@pytest.mark.parametrize(
    ("selector", "expected"),
    [("", ("deleting", "draining")), ("app=training", ("waiting", "deleting", "draining"))],
)
def test_nodes_needing_pods(selector: str, expected: tuple[str, ...]) -> None:
    nodes = [
        node("waiting", S.WAIT_FOR_JOBS_REQUIRED),
        node("deleting", S.POD_DELETION_REQUIRED),
        node("draining", S.DRAIN_REQUIRED),
        node("restarting", S.POD_RESTART_REQUIRED),
        node("done", S.UPGRADE_DONE),
    ]
    assert upgrade_plan.nodes_needing_pods(nodes, policy(wait_selector=selector)) == expected
    assert upgrade_plan.nodes_needing_pods(nodes, policy(auto=False)) == ()


# --- label selectors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "pod_labels", "matches"),
    [
        ("", {}, True),
        ("app=a", {"app": "a"}, True),
        ("app==a", {"app": "b"}, False),
        ("app!=a", {}, True),
        ("app", {"app": ""}, True),
        ("!app", {"app": "a"}, False),
        ("app in (a,b),tier", {"app": "b", "tier": "x"}, True),
        ("app notin (a,b)", {}, True),
        ("gen>3", {"gen": "4"}, True),
        ("gen<3", {"gen": "x"}, False),
        (
            upgrade_observations.DRAIN_SKIP_SELECTOR,
            {"nvidia.com/gpu-driver-upgrade-drain.skip": "true"},
            False,
        ),
    ],
)
def test_selector_matches(selector: str, pod_labels: dict[str, str], matches: bool) -> None:
    assert upgrade_plan.selector_matches(selector, pod_labels) is matches


# --- invariants (hypothesis) ----------------------------------------------------------------------

hypothesis_settings = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

policies = st.builds(
    policy,
    auto=st.just(True),
    parallel=st.integers(0, 3),
    unavailable=st.one_of(st.integers(1, 4), st.sampled_from(["1%", "25%", "50%", "100%"])),
    wait_selector=st.sampled_from(["", "app=training"]),
    wait_timeout=st.sampled_from([0, 30]),
    force=st.booleans(),
    empty_dir=st.booleans(),
    drain=st.booleans(),
)


@st.composite
def any_node(draw: st.DrawFn, name: str) -> UpgradeNode:
    # Biased towards outdated nodes waiting for a slot: where the budget is decided.
    return node(
        name,
        draw(st.one_of(st.just(S.UPGRADE_REQUIRED), st.sampled_from(list(UpgradeState)))),
        driver=draw(st.one_of(st.just(OUTDATED), st.sampled_from(DRIVERS))),
        cordon=draw(st.sampled_from(CORDONS)),
        ready=draw(st.booleans()),
        skip=draw(st.booleans()),
        enabled=draw(st.booleans()),
        started=NOW - datetime.timedelta(seconds=draw(st.integers(0, 1000))),
    )


@st.composite
def clusters(draw: st.DrawFn) -> UpgradeSnapshot:
    """Any cluster at all: every state, driver situation, cordon, pod kind and validator situation."""
    count = draw(st.integers(1, 8))
    nodes = [draw(any_node(f"n{i}")) for i in range(count)]
    pods = [
        pod(
            f"p{i}-{j}",
            f"n{i}",
            gpu=draw(st.booleans()),
            controller=draw(st.sampled_from([None, "Job", "DaemonSet"])),
            empty_dir=draw(st.booleans()),
            pod_labels={"app": "training"},
        )
        for i in range(count)
        for j in range(draw(st.integers(0, 2)))
    ]
    validators = draw(st.sampled_from([None, "ready", "not-ready"]))
    return snapshot(
        *nodes,
        pods=pods,
        validators=None
        if validators is None
        else [validator(f"n{i}", validators == "ready") for i in range(count)],
    )


def _holding(states: Iterable[UpgradeState]) -> int:
    return sum(state in upgrade_plan.HOLDS_SLOT for state in states)


def _unavailable(snap: UpgradeSnapshot) -> int:
    return sum(n.unschedulable or not n.ready or n.state is S.CORDON_REQUIRED for n in snap.nodes)


@hypothesis_settings
@given(clusters(), policies)
def test_the_budget_is_never_exceeded(snap: UpgradeSnapshot, upgrade_policy: UpgradePolicy) -> None:
    result = upgrade_plan.plan_upgrades(snap, upgrade_policy, LATER)
    if upgrade_policy.max_parallel_upgrades:
        before = _holding(n.state for n in snap.nodes)
        after = _holding(p.state_after for p in result.nodes)
        assert after <= max(before, upgrade_policy.max_parallel_upgrades)
    assert unavailable_after(snap, result) <= max(_unavailable(snap), result.budget.max_unavailable)


@hypothesis_settings
@given(clusters(), policies)
def test_never_an_admins_uncordon_and_skip_is_honoured(
    snap: UpgradeSnapshot, upgrade_policy: UpgradePolicy
) -> None:
    result = upgrade_plan.plan_upgrades(snap, upgrade_policy, LATER)
    for n, plan in zip(snap.nodes, result.nodes, strict=True):
        assert plan.node == n.name
        if any(isinstance(action, Uncordon) for action in plan.actions):
            # Only the upgrade's own cordon is ever lifted.
            assert n.cordoned_by_upgrade and not n.initially_unschedulable
        if n.skip and n.state in (S.UNKNOWN, S.UPGRADE_DONE, S.UPGRADE_REQUIRED):
            # A skipped node never starts an upgrade (an outdated one says upgrade-required).
            assert plan.transition in (None, S.UPGRADE_DONE, S.UPGRADE_REQUIRED)


@hypothesis_settings
@given(clusters(), policies)
def test_pause_freezes_every_label(snap: UpgradeSnapshot, upgrade_policy: UpgradePolicy) -> None:
    result = upgrade_plan.plan_upgrades(snap, dataclasses.replace(upgrade_policy, auto_upgrade=False), LATER)
    for plan in result.nodes:
        assert plan.transition is None
        assert plan.actions == ()
        assert set(plan.annotations) <= {ENABLED}
    assert upgrade_plan.summarize(result).auto_upgrade_enabled == 0


@st.composite
def healthy_worlds(draw: st.DrawFn) -> tuple[World, UpgradePolicy]:
    """A cluster whose pods behave: workloads are deletable under any policy, jobs finish, new driver
    pods get Ready; nodes start in any state, some cordoned by their admin, some skipped."""
    count = draw(st.integers(1, 6))
    nodes: dict[NodeName, UpgradeNode] = {}
    pods: dict[NodeName, list[WorkloadPod]] = {}
    for i in range(count):
        name = NodeName(f"n{i}")
        state = draw(st.sampled_from(list(UpgradeState)))
        cordon = draw(st.sampled_from(CORDONS))
        if cordon == OURS and state not in upgrade_plan.HOLDS_SLOT:
            # The upgrade's marker outside a run exists only after a hand edit; keep the world plain.
            cordon = NONE
        # Skipped nodes that are mid-upgrade finish; only idle ones may carry the label here.
        skip = draw(st.booleans()) and state in (S.UNKNOWN, S.UPGRADE_DONE, S.UPGRADE_REQUIRED)
        driver = draw(st.sampled_from([OUTDATED, CURRENT, NEW_RHCOS]))
        nodes[name] = node(name, state, driver=driver, cordon=cordon, skip=skip)
        pods[name] = [
            pod(f"{name}-gpu{j}", name, controller="ReplicaSet", pod_labels={"app": "training"})
            for j in range(draw(st.integers(0, 2)))
        ] + [pod(f"{name}-web", name, gpu=False, controller="ReplicaSet")]
    # NB: admin-cordoned nodes stay unavailable for good; leave room for at least one more.
    admin_cordoned = sum(n.unschedulable and not n.cordoned_by_upgrade for n in nodes.values())
    upgrade_policy = dataclasses.replace(
        draw(policies), max_unavailable=admin_cordoned + draw(st.integers(1, 3))
    )
    world = World(nodes=nodes, pods=pods, validator_deployed=draw(st.booleans()))
    return world, upgrade_policy


def _run(
    world: World,
    upgrade_policy: UpgradePolicy,
    passes: int,
    on_pass: Callable[[World, int], None] | None = None,
) -> None:
    """Plan and apply `passes` times, checking the budget and the admin's cordons after each pass."""
    admin_cordoned: set[NodeName] = set()
    for number in range(passes):
        if on_pass:
            on_pass(world, number)
        admin_cordoned |= {
            name for name, n in world.nodes.items() if n.unschedulable and not n.cordoned_by_upgrade
        }
        snap = world.snapshot(upgrade_policy)
        plan = upgrade_plan.plan_upgrades(snap, upgrade_policy, world.now)
        if upgrade_policy.max_parallel_upgrades:
            assert _holding(p.state_after for p in plan.nodes) <= max(
                _holding(n.state for n in snap.nodes), upgrade_policy.max_parallel_upgrades
            )
        assert unavailable_after(snap, plan) <= max(_unavailable(snap), plan.budget.max_unavailable)
        world.apply(plan)
        for name in admin_cordoned:
            assert world.nodes[name].unschedulable, f"the admin's cordon on {name} was lifted"
        world.finish_jobs()
        for name, n in world.nodes.items():
            if n.state is S.UPGRADE_FAILED:
                # The seed's recovery: the admin relabels upgrade-required.
                world.admin_relabel(name, S.UPGRADE_REQUIRED)


def _bound(world: World) -> int:
    # About eleven passes per node when they go one by one, plus the first pass.
    return 12 * (len(world.nodes) + 1)


def _assert_settled(world: World, initial: Mapping[NodeName, UpgradeState]) -> None:
    for name, n in world.nodes.items():
        if n.skip:
            assert n.state in (initial[name], S.UPGRADE_DONE, S.UPGRADE_REQUIRED), name
        else:
            assert n.state is S.UPGRADE_DONE, (name, n)
            assert not n.cordoned_by_upgrade and not n.timers


@hypothesis_settings
@given(healthy_worlds())
def test_with_healthy_pods_every_node_reaches_upgrade_done(
    world_and_policy: tuple[World, UpgradePolicy],
) -> None:
    world, upgrade_policy = world_and_policy
    initial = {name: n.state for name, n in world.nodes.items()}
    _run(world, upgrade_policy, _bound(world))
    _assert_settled(world, initial)
    # And then it stays: not one write in steady state.
    last = upgrade_plan.plan_upgrades(world.snapshot(upgrade_policy), upgrade_policy, world.now)
    assert all((p.transition, p.actions, dict(p.annotations)) == (None, (), {}) for p in last.nodes)


@hypothesis_settings
@given(healthy_worlds(), st.data())
def test_a_node_switching_rhcos_daemonsets_is_not_looped(
    world_and_policy: tuple[World, UpgradePolicy], data: st.DataObject
) -> None:
    world, upgrade_policy = world_and_policy
    initial = {name: n.state for name, n in world.nodes.items()}
    switches = data.draw(
        st.dictionaries(st.integers(0, 30), st.sampled_from(sorted(world.nodes)), max_size=4)
    )

    def upgrade_day(w: World, number: int) -> None:
        if number in switches:
            w.move_to_new_rhcos(switches[number])

    _run(world, upgrade_policy, _bound(world) + 31, upgrade_day)
    _assert_settled(world, initial)
    # A fresh, current pod is not an upgrade: no node goes round twice.
    assert all(entries <= 1 for entries in world.upgrade_required_entries.values())


@pytest.mark.parametrize("state", [S.UNKNOWN, S.UPGRADE_DONE, S.UPGRADE_REQUIRED])
@pytest.mark.parametrize("driver", [MISSING, OUTDATED, CURRENT])
def test_an_opted_out_node_is_neither_upgraded_nor_counted(state: UpgradeState, driver: str) -> None:
    """deploy.driver=false: no driver to upgrade; never counted (or left labelled) upgrade-done."""
    opted = dataclasses.replace(node("n1", state, driver=driver), driver_opted_out=True)
    other = node("n2", S.UPGRADE_DONE, driver=CURRENT)
    result = upgrade_plan.plan_upgrades(snapshot(opted, other), policy(), NOW)
    plans = result.by_node()
    assert plans[NodeName("n1")].transition is None and plans[NodeName("n1")].actions == ()
    assert not plans[NodeName("n1")].managed and "opted out" in plans[NodeName("n1")].waiting
    counts = upgrade_plan.summarize(result)
    assert (counts.done, counts.pending, counts.in_progress) == (1, 0, 0)
    assert result.budget.total == 1


def test_a_node_opted_out_mid_upgrade_still_finishes_its_cordon() -> None:
    mid = dataclasses.replace(
        node("n1", S.UNCORDON_REQUIRED, driver=MISSING, cordon=OURS), driver_opted_out=True
    )
    result = plan_one(mid)
    assert result.managed and result.transition is S.UPGRADE_DONE
    assert any(isinstance(action, Uncordon) for action in result.actions)

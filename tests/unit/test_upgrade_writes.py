"""We test how `kube.upgrading.apply_node_plan` turns one node's plan into API calls (no server):

- a cordon (or uncordon) and the transition it leads to are one merge patch: spec.unschedulable, the
  state label, the cordon's and the transition's annotations together, then the Event;
- a plan with other actions runs them in order, then writes the transition on its own;
- with `announcing=False` the Event is not posted but handed back, and `Announcer` posts each
  node's Events in the order of its transitions (off the pass's path).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ocp_gpu.kube import upgrading
from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.upgrade_observations import PodRef, UpgradeState
from ocp_gpu.planning.upgrades import upgrade_plan


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, Any]]:
    seen: list[tuple[str, str, Any]] = []

    def request(api: Any, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        seen.append((method, path, kwargs.get("body")))
        return {"metadata": {"uid": "u1"}}

    monkeypatch.setattr(upgrading.requesting, "request", request)
    monkeypatch.setattr(upgrading.reporting, "post_event", lambda *a, **k: seen.append(("EVENT", a[3], None)))
    return seen


def plan(
    transition: UpgradeState, *actions: upgrade_plan.Action, **annotations: str | None
) -> upgrade_plan.NodePlan:
    return upgrade_plan.NodePlan(
        NodeName("n1"),
        UpgradeState.CORDON_REQUIRED,
        upgrade_plan.DriverStatus(upgrade_plan.DriverCheck.OUTDATED, None, ""),
        transition,
        actions,
        {key.replace("_", "-"): value for key, value in annotations.items()},
    )


def test_cordon_and_transition_are_one_patch(calls: list[tuple[str, str, Any]]) -> None:
    cordon = upgrade_plan.Cordon({upgrade_observations.CORDONED_BY_UPGRADE: "true"})
    upgrading.apply_node_plan(None, plan(UpgradeState.WAIT_FOR_JOBS_REQUIRED, cordon, timer="1"))
    (patch, event) = calls
    assert patch[0] == "PATCH" and patch[1] == "/api/v1/nodes/n1"
    assert patch[2] == {
        "spec": {"unschedulable": True},
        "metadata": {
            "labels": {labels.UPGRADE_STATE: "wait-for-jobs-required"},
            "annotations": {upgrade_observations.CORDONED_BY_UPGRADE: "true", "timer": "1"},
        },
    }
    assert event[0] == "EVENT" and "wait-for-jobs-required" in event[1]


def test_uncordon_and_done_are_one_patch(calls: list[tuple[str, str, Any]]) -> None:
    upgrading.apply_node_plan(None, plan(UpgradeState.UPGRADE_DONE, upgrade_plan.Uncordon()))
    (patch, _) = calls
    assert patch[2]["spec"] == {"unschedulable": False}
    assert patch[2]["metadata"]["labels"] == {labels.UPGRADE_STATE: "upgrade-done"}


def test_other_actions_run_first_then_the_transition(calls: list[tuple[str, str, Any]]) -> None:
    gpu_pod = PodRef(namespace="work", name="p1", uid="x")
    upgrading.apply_node_plan(
        None, plan(UpgradeState.POD_RESTART_REQUIRED, upgrade_plan.DeletePods((gpu_pod,)))
    )
    assert [(method, path) for method, path, _ in calls] == [
        ("DELETE", "/api/v1/namespaces/work/pods/p1"),
        ("PATCH", "/api/v1/nodes/n1"),
        ("EVENT", upgrade_observations.event_message(UpgradeState.POD_RESTART_REQUIRED)),
    ]
    assert "spec" not in calls[1][2]


def test_not_announcing_hands_the_event_back(calls: list[tuple[str, str, Any]]) -> None:
    applied = upgrading.apply_node_plan(
        None, plan(UpgradeState.UPGRADE_DONE, upgrade_plan.Uncordon()), announcing=False
    )
    assert [method for method, _, _ in calls] == ["PATCH"]
    assert applied.announcement == upgrading.Announcement("n1", "u1", UpgradeState.UPGRADE_DONE, None)
    applied = upgrading.apply_node_plan(
        None, plan(UpgradeState.POD_RESTART_REQUIRED, upgrade_plan.DeletePods(())), announcing=False
    )
    assert [method for method, _, _ in calls] == ["PATCH", "PATCH"]
    assert (
        applied.announcement is not None and applied.announcement.state is UpgradeState.POD_RESTART_REQUIRED
    )


def test_announcer_keeps_each_nodes_order(monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[tuple[str, UpgradeState]] = []
    lock = threading.Lock()

    def announce(api: Any, said: upgrading.Announcement) -> None:
        # Slow first Events: a node's later Event must still wait for its earlier ones.
        time.sleep(0.01 if said.state is UpgradeState.UPGRADE_REQUIRED else 0)
        with lock:
            posted.append((said.node, said.state))

    monkeypatch.setattr(upgrading, "announce", announce)
    order = [UpgradeState.UPGRADE_REQUIRED, UpgradeState.CORDON_REQUIRED, UpgradeState.WAIT_FOR_JOBS_REQUIRED]
    announcer = upgrading.Announcer(None, threads=2)
    nodes = [f"n{i}" for i in range(6)]
    for state in order:
        for node in nodes:
            announcer.post(upgrading.Announcement(node, "", state, None))
    announcer.close()
    assert len(posted) == len(order) * len(nodes)
    for node in nodes:
        assert [state for name, state in posted if name == node] == order


def test_announcer_survives_an_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def announce(api: Any, said: upgrading.Announcement) -> None:
        raise RuntimeError("connection reset")

    monkeypatch.setattr(upgrading, "announce", announce)
    announcer = upgrading.Announcer(None, threads=1)
    announcer.post(upgrading.Announcement("n1", "", UpgradeState.UPGRADE_DONE, None))
    announcer.close()
    assert "could not post the upgrade-done Event of node n1" in caplog.text

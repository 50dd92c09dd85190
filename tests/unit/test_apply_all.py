"""We test these aspects of kube/applying.apply_all (how a pass's manifests reach the cluster):

- every manifest that needs a write is applied once, in stages: what other objects name
  (ServiceAccounts, Roles, ConfigMaps, ...) first, then the role bindings (the API server checks
  the role they bind exists), then the workloads (DaemonSets, Deployments); no stage starts before
  the one before it has ended;
- within a stage the applies run together (at most APPLY_CONCURRENCY at once);
- a manifest the watch shows applied as rendered is not applied at all.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ocp_gpu.kube import applying, owning

OWNER = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cluster-policy", "uid": "u1"}


def manifest(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "ns"}}


def ledger() -> applying.Ledger:
    return applying.Ledger(owned={}, applied={}, removed=set(), adopted=set())


def test_stages_in_order_each_stage_together(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, str]] = []
    running = 0
    most = 0

    async def fake_apply(*args: Any) -> None:
        nonlocal running, most
        kind = args[3]["kind"]
        running += 1
        most = max(most, running)
        events.append(("start", kind))
        await asyncio.sleep(0.01)
        events.append(("end", kind))
        running -= 1

    monkeypatch.setattr(applying, "apply_if_changed", fake_apply)
    manifests = [
        manifest("DaemonSet", "ds"),
        manifest("RoleBinding", "rb"),
        manifest("ServiceAccount", "sa"),
        manifest("Role", "role"),
        manifest("ClusterRoleBinding", "crb"),
        manifest("ConfigMap", "cm"),
        manifest("Deployment", "deploy"),
    ]
    asyncio.run(applying.apply_all(None, ledger(), OWNER, ((m, None) for m in manifests), {}))  # type: ignore[arg-type]

    starts = [kind for what, kind in events if what == "start"]
    assert sorted(starts) == sorted(m["kind"] for m in manifests)
    stage_of = [applying.apply_stage(kind) for what, kind in events]
    # every event of a stage comes before every event of the next: no stage starts early
    assert stage_of == sorted(stage_of), events
    # the three of stage 0 ran together
    assert most == 3


def test_current_manifests_are_not_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    applied: list[str] = []

    async def fake_apply(*args: Any) -> None:
        applied.append(args[3]["metadata"]["name"])

    monkeypatch.setattr(applying, "apply_if_changed", fake_apply)
    current, changed = manifest("ConfigMap", "current"), manifest("ConfigMap", "changed")
    records = ledger()
    monkeypatch.setattr(
        owning, "is_current", lambda record, wanted, uid: record is not None and record == "as rendered"
    )
    records.owned[owning.manifest_ident(current)] = "as rendered"  # type: ignore[assignment]
    asyncio.run(applying.apply_all(None, records, OWNER, [(current, None), (changed, None)], {}))  # type: ignore[arg-type]
    assert applied == ["changed"]


def test_stages() -> None:
    assert [applying.apply_stage(k) for k in ("ServiceAccount", "RoleBinding", "DaemonSet")] == [0, 1, 2]
    assert applying.apply_stage("ClusterRoleBinding") == 1 and applying.apply_stage("Deployment") == 2
    assert applying.apply_stage("RuntimeClass") == 0


def record_applies(monkeypatch: pytest.MonkeyPatch, others_take_s: float) -> list[str]:
    """The names applied, in the order their applies end; the other operands' ("other-*") take
    `others_take_s` each, the driver's a millisecond."""
    finished: list[str] = []

    async def fake_apply(*args: Any) -> None:
        name = args[3]["metadata"]["name"]
        await asyncio.sleep(others_take_s if name.startswith("other") else 0.001)
        finished.append(name)

    monkeypatch.setattr(applying, "apply_if_changed", fake_apply)
    return finished


def gated_ledger() -> applying.Ledger:
    """A ledger with the process's two gates, as reconcilers/runtime.Runtime.ledger gives it."""
    return applying.Ledger(
        owned={},
        applied={},
        removed=set(),
        adopted=set(),
        gate=asyncio.Semaphore(applying.APPLY_CONCURRENCY),
        driver_gate=asyncio.Semaphore(applying.DRIVER_LANE_CONCURRENCY),
    )


async def the_driver_after_the_others(others: int, driver: list[dict[str, Any]], driver_lane: bool) -> None:
    """`others` operand applies take every place of the shared gate first; then the driver's."""
    records = gated_ledger()
    queued = [(manifest("ServiceAccount", f"other-{i}"), None) for i in range(others)]
    operands = asyncio.ensure_future(applying.apply_all(None, records, OWNER, queued, {}))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    await applying.apply_all(None, records, OWNER, [(m, None) for m in driver], {}, driver_lane=driver_lane)  # type: ignore[arg-type]
    await operands


def test_the_drivers_lane_is_never_queued_behind_the_other_operands(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every place of the shared gate held by other operands' applies: the driver's objects still
    go at once through their own lane, and so their stages do not wait for the others'."""
    finished = record_applies(monkeypatch, others_take_s=0.2)
    driver = [
        manifest("ServiceAccount", "driver"),
        manifest("RoleBinding", "driver"),
        manifest("DaemonSet", "ds"),
    ]
    asyncio.run(the_driver_after_the_others(3 * applying.APPLY_CONCURRENCY, driver, driver_lane=True))
    assert finished[:3] == ["driver", "driver", "ds"], finished


def test_without_the_lane_the_driver_waits_behind_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through the shared gate: the driver's apply waits for a place (what the lane is for)."""
    finished = record_applies(monkeypatch, others_take_s=0.05)
    asyncio.run(
        the_driver_after_the_others(
            applying.APPLY_CONCURRENCY, [manifest("DaemonSet", "ds")], driver_lane=False
        )
    )
    assert finished.index("ds") >= applying.APPLY_CONCURRENCY, finished

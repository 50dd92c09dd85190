"""We test these aspects of `ocp-gpu status` without a cluster (live: tests/e2e/test_status_live.py):

- the rows, a pure function of the planner's verdict (`status_rows` over `plan_upgrades`):
  why a node waits on the parallel budget and on maxUnavailable (naming the nodes holding
  slots), on a job (which pod, which selector, which timeout and time left), on GPU pod
  deletion with its timeout and what the next pass deletes, on an expired timeout (next:
  upgrade-failed), on an outdated driver pod (next: upgrade-required; restarting it); a
  skipped node; a paused policy; the operator halted (driver disabled, invalid spec, an
  ignored policy) shows no "next" and counts the labels as they are;
- the driver DaemonSet: through its pod, else the one whose nodeSelector picks the node, else
  none; current is yes/no/unknown (no revision) and "-" without a pod; a stale NFD label;
- the six metrics in the header are `summarize(plan)`; `-o json` shape (keys, types, one row per
  node, round trip); plain text is aligned under its header; the rich table renders;
- the ClusterPolicy chosen: the oldest, or `--policy-name` (an ignored one is shown as such);
- `main` against a fake API: only GET requests, the namespace from the policy's status or
  `--namespace`; exit 1 naming the cause for a missing CRD, no ClusterPolicy, an unknown
  name, an unreachable server; `--watch` prints a document per refresh, survives a failed
  read, and exits 0 on Ctrl-C; the `ocp-gpu status` subcommand is wired.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ocp_gpu import cli
from ocp_gpu.commands import status_command
from ocp_gpu.kube import clients, reading, requesting, upgrading
from ocp_gpu.kube.requesting import ApiException
from ocp_gpu.model import labels, operand_types, resource_claims, upgrade_observations
from ocp_gpu.model.nodes import NodeFacts, NodeName
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.model.upgrade_observations import UpgradeNode, UpgradeSnapshot
from ocp_gpu.planning.upgrades import upgrade_plan
from ocp_gpu.rendering.operands import operand_catalog
from tests.unit._upgrades import (
    CURRENT,
    CURRENT_HASH,
    DS,
    MISSING,
    NO_REVISION,
    NOW,
    ONE_UPGRADING_TWO_WAITING,
    OURS,
    OUTDATED,
    STARTING,
    S,
    node,
    pod,
    snapshot,
)

RHCOS = "416.94.202407030122-0"
OTHER_RHCOS = "417.94.202410090854-0"
DS_SELECTORS: Mapping[str, Mapping[str, str]] = {
    DS: {labels.deploy_label("driver"): "true", labels.OSTREE_VERSION: RHCOS},
}


# --- builders ------------------------------------------------------------------------------------


def node_view(name: str, rhcos: str | None = RHCOS, os_image_rhcos: str | None = None) -> NodeFacts:
    """A GPU node's labels as NFD and the operator write them (RHCOS, or Ubuntu with rhcos=None)."""
    found = {labels.NFD_NVIDIA_PCI: "true", labels.deploy_label("driver"): "true"}
    if rhcos:
        found |= {labels.OSTREE_VERSION: rhcos, labels.OS_ID: "rhcos", labels.OS_VERSION_ID: "4.16"}
        image = f"Red Hat Enterprise Linux CoreOS {os_image_rhcos or rhcos} (Plow)"
    else:
        found |= {labels.OS_ID: "ubuntu", labels.OS_VERSION_ID: "22.04"}
        image = "Ubuntu 22.04.4 LTS"
    return NodeFacts(
        name=NodeName(name), labels=found, os_image=image, kernel_version="", unschedulable=False, gpus=1
    )


def policy_view(
    upgrade_policy: Mapping[str, Any] | None = None,
    *,
    driver: Mapping[str, Any] | None = None,
    conditions: Sequence[status_command.ConditionView] = (),
    active: bool = True,
) -> status_command.PolicyView:
    spec = {"driver": {**(driver or {}), "upgradePolicy": dict(upgrade_policy or {})}}
    return status_command.PolicyView(
        name="cluster-policy",
        generation=2,
        observed_generation=2,
        state="ready",
        namespace="nvidia-gpu-operator",
        conditions=tuple(conditions)
        or (
            status_command.ConditionView("Ready", "True", "Reconciled", "3 GPU node(s)"),
            status_command.ConditionView("Error", "False", "Reconciled", ""),
        ),
        spec=spec,
        active=active,
    )


def report_of(
    snap: UpgradeSnapshot,
    upgrade_policy: Mapping[str, Any] | None = None,
    *,
    views: Mapping[str, NodeFacts] | None = None,
    selectors: Mapping[str, Mapping[str, str]] = DS_SELECTORS,
    now: datetime.datetime = NOW,
    **policy_args: Any,
) -> status_command.StatusReport:
    nodes = views if views is not None else {n.name: node_view(n.name) for n in snap.nodes}
    inputs = status_command.StatusInputs(
        policy=policy_view(upgrade_policy, **policy_args),
        namespace="nvidia-gpu-operator",
        snapshot=snap,
        nodes={NodeName(name): view for name, view in nodes.items()},
        daemonset_selectors=selectors,
    )
    return status_command.status_report(inputs, now)


def rows_by_node(report: status_command.StatusReport) -> dict[str, status_command.StatusRow]:
    return {row.node: row for row in report.rows}


def ago(seconds: int) -> datetime.datetime:
    return NOW - datetime.timedelta(seconds=seconds)


# --- why a node waits -------------------------------------------------------------------------------


def test_nodes_wait_on_the_parallel_budget_while_one_is_in_flight() -> None:
    snap = snapshot(
        node("n1", S.POD_RESTART_REQUIRED, driver=STARTING, cordon=OURS),
        node("n2", S.UPGRADE_REQUIRED),
        node("n3", S.UPGRADE_REQUIRED),
    )
    report = report_of(snap, {"maxParallelUpgrades": 1, "maxUnavailable": "100%"})
    rows = rows_by_node(report)
    assert rows["n1"].waiting == "driver pod nvidia-driver-n1 is not Ready yet (timeout 10m00s, 10m00s left)"
    assert (rows["n1"].current, rows["n1"].ready, rows["n1"].next) == (True, False, None)
    for name in ("n2", "n3"):
        assert rows[name].waiting == "waiting for an upgrade slot: 1 of maxParallelUpgrades 1 taken (n1)"
        assert (rows[name].current, rows[name].ready, rows[name].next) == (False, True, None)
        assert rows[name].pod_revision != rows[name].daemonset_revision == CURRENT_HASH
    assert report.counts == upgrade_plan.UpgradeCounts(
        auto_upgrade_enabled=1, in_progress=1, done=0, failed=0, available=0, pending=2
    )


def test_a_node_waits_on_max_unavailable_naming_the_numbers() -> None:
    snap = snapshot(
        node("n1", S.POD_RESTART_REQUIRED, driver=STARTING, cordon=OURS),
        node("n2", S.UPGRADE_REQUIRED),
        node("n3", S.UPGRADE_DONE, driver=CURRENT),
        node("n4", S.UPGRADE_DONE, driver=CURRENT),
    )
    report = report_of(snap, {"maxParallelUpgrades": 0, "maxUnavailable": "25%"})
    assert rows_by_node(report)["n2"].waiting == (
        "waiting for an upgrade slot: 1 of 4 GPU nodes unavailable, maxUnavailable 25% allows 1"
    )
    assert "maxParallelUpgrades 0 (unlimited), maxUnavailable 25% (= 1 of 4 GPU nodes)" in "\n".join(
        status_command.header_lines(report)
    )


def test_a_node_granted_a_slot_shows_next_cordon_required() -> None:
    snap = snapshot(node("n1", S.UPGRADE_REQUIRED), node("n2", S.UPGRADE_REQUIRED))
    rows = rows_by_node(report_of(snap, {"maxParallelUpgrades": 1, "maxUnavailable": "100%"}))
    assert (rows["n1"].next, rows["n1"].waiting) == ("cordon-required", "")
    assert rows["n2"].waiting == "waiting for an upgrade slot: 1 of maxParallelUpgrades 1 taken (n1)"
    assert status_command.row_cells(rows["n1"])[-1] == "next: cordon-required"


def test_a_node_waits_for_its_job_naming_pod_selector_timeout_and_time_left() -> None:
    job = pod("train-0", "n1", gpu=False, controller="Job", pod_labels={"job": "batch"})
    snap = snapshot(node("n1", S.WAIT_FOR_JOBS_REQUIRED, started=ago(100), cordon=OURS), pods=[job])
    report = report_of(snap, {"waitForCompletion": {"podSelector": "job=batch", "timeoutSeconds": 600}})
    (row,) = report.rows
    assert row.waiting == (
        "waiting for 1 pod(s) matching 'job=batch' to complete: work/train-0 (timeout 10m00s, 8m20s left)"
    )
    assert row.next is None and row.unschedulable
    assert status_command.row_cells(row)[6] == "wait-for-jobs-required [cordoned]"


def test_a_job_wait_without_timeout_says_so() -> None:
    job = pod("train-0", "n1", gpu=False, pod_labels={"job": "batch"})
    snap = snapshot(node("n1", S.WAIT_FOR_JOBS_REQUIRED, cordon=OURS), pods=[job])
    (row,) = report_of(snap, {"waitForCompletion": {"podSelector": "job=batch"}}).rows
    assert row.waiting.endswith("(no timeout: waitForCompletion.timeoutSeconds is 0)")


def test_gpu_pod_deletion_names_the_pods_the_timeout_and_the_next_passes_action() -> None:
    gpu_pod = pod("train-0", "n1")
    snap = snapshot(node("n1", S.POD_DELETION_REQUIRED, started=ago(60), cordon=OURS), pods=[gpu_pod])
    (row,) = report_of(snap, {"gpuPodDeletion": {"timeoutSeconds": 300}}).rows
    assert row.waiting == "deleting 1 GPU pod(s): work/train-0 (timeout 5m00s, 4m00s left)"
    assert row.actions == ("delete GPU pods work/train-0",)
    assert status_command.row_cells(row, wide=True)[-2] == "delete GPU pods work/train-0"


def test_an_expired_timeout_shows_the_transition_to_upgrade_failed() -> None:
    blocked = pod("train-0", "n1", controller=None)  # no controller, force false: may not be deleted
    snap = snapshot(node("n1", S.POD_DELETION_REQUIRED, started=ago(400), cordon=OURS), pods=[blocked])
    (row,) = report_of(snap, {"gpuPodDeletion": {"timeoutSeconds": 300}}).rows
    assert (row.next, row.waiting) == ("upgrade-failed", "")
    report = report_of(snap, {"gpuPodDeletion": {"timeoutSeconds": 300}})
    # The metrics count the labels as the pass leaves them.
    assert report.counts.failed == 1 and report.counts.in_progress == 0


def test_an_outdated_driver_pod_is_flagged_and_restarted() -> None:
    snap = snapshot(
        node("n1", S.UPGRADE_DONE, driver=OUTDATED),
        node("n2", S.POD_RESTART_REQUIRED, driver=OUTDATED, cordon=OURS),
    )
    rows = rows_by_node(report_of(snap, {"maxParallelUpgrades": 0, "maxUnavailable": "100%"}))
    assert (rows["n1"].current, rows["n1"].next, rows["n1"].driver_check) == (
        False,
        "upgrade-required",
        "outdated",
    )
    assert rows["n1"].driver_detail == (
        f"driver pod nvidia-driver-n1 is outdated (revision 1a2b3c, {DS} is at {CURRENT_HASH})"
    )
    assert f"{DS} is at {CURRENT_HASH}): restarting it (timeout" in rows["n2"].waiting
    assert rows["n2"].actions == ("delete driver pod nvidia-gpu-operator/nvidia-driver-n2",)
    assert status_command.row_cells(rows["n2"])[4] == "no"


def test_a_skipped_node_says_so_and_stays() -> None:
    # As NVIDIA's: an outdated skipped node is upgrade-required (never upgrade-done), and stays there.
    moving = snapshot(node("n1", S.UPGRADE_DONE, driver=OUTDATED, skip=True))
    (row,) = report_of(moving).rows
    assert row.skipped and row.next == "upgrade-required"
    snap = snapshot(node("n1", S.UPGRADE_REQUIRED, driver=OUTDATED, skip=True))
    (row,) = report_of(snap).rows
    assert row.skipped and row.next is None
    assert row.waiting.endswith(f"skipped: {labels.UPGRADE_SKIP}=true")
    assert status_command.row_cells(row)[6] == "upgrade-required [skip]"


def test_paused_freezes_every_node_and_the_metrics_say_so() -> None:
    snap = snapshot(
        node("n1", S.WAIT_FOR_JOBS_REQUIRED, cordon=OURS), node("n2", S.UPGRADE_REQUIRED), read_pods=False
    )
    report = report_of(snap, {"autoUpgrade": False})
    for row in report.rows:
        assert (row.next, row.waiting) == (None, "paused: driver.upgradePolicy.autoUpgrade is false")
    assert report.counts.auto_upgrade_enabled == 0 and report.counts.available == 0
    assert "upgrades: autoUpgrade false" in "\n".join(status_command.header_lines(report))


halting = pytest.mark.parametrize(
    ("policy_args", "reason"),
    [
        ({"driver": {"enabled": False}}, "driver.enabled is false"),
        (
            {
                "conditions": (
                    status_command.ConditionView("Ready", "False", "InvalidSpec", "spec.driver.version: bad"),
                    status_command.ConditionView("Error", "True", "InvalidSpec", "spec.driver.version: bad"),
                )
            },
            "the ClusterPolicy's spec is invalid, the operator applies nothing: spec.driver.version: bad",
        ),
        ({"active": False}, "ClusterPolicy cluster-policy is ignored by the operator"),
    ],
    ids=["driver-disabled", "invalid-spec", "ignored-policy"],
)


@halting
def test_a_halted_operator_shows_no_next_and_counts_the_labels_as_they_are(
    policy_args: dict[str, Any], reason: str
) -> None:
    snap = snapshot(
        node("n1", S.UPGRADE_REQUIRED),
        node("n2", S.UPGRADE_DONE, driver=OUTDATED),
        node("n3", S.UPGRADE_DONE, driver=CURRENT),
    )
    report = report_of(snap, {"maxParallelUpgrades": 1, "maxUnavailable": "100%"}, **policy_args)
    assert reason in report.halted
    rows = rows_by_node(report)
    for name in ("n1", "n2"):
        assert rows[name].next is None and rows[name].actions == ()
        assert rows[name].waiting.startswith("no upgrade pass: ") and reason in rows[name].waiting
    # Nothing to do on n3: nothing to explain either.
    assert rows["n3"].waiting == ""
    assert (report.counts.in_progress, report.counts.pending, report.counts.done) == (0, 1, 2)
    # n1 would have been granted the slot; no pass runs, so the slot is still free.
    assert report.budget.starts == () and report.counts.available == 1
    assert f"  no upgrade pass: {report.halted}" in status_command.header_lines(report)


# --- the driver DaemonSet and pod ---------------------------------------------------------------------


def test_the_daemonset_comes_from_the_pod_else_from_the_selector_else_none() -> None:
    snap = snapshot(
        node("n1", S.UPGRADE_DONE, driver=CURRENT),
        node("n2", S.UNKNOWN, driver=MISSING),
        node("n3", S.UNKNOWN, driver=MISSING),
    )
    # NB: n1's labels now name another RHCOS build: its running pod still tells its DaemonSet.
    views = {"n1": node_view("n1", OTHER_RHCOS), "n2": node_view("n2"), "n3": node_view("n3", None)}
    rows = rows_by_node(report_of(snap, views=views))
    assert (rows["n1"].daemonset, rows["n1"].daemonset_via) == (DS, "pod")
    assert (rows["n2"].daemonset, rows["n2"].daemonset_via) == (DS, "selector")
    assert (rows["n3"].daemonset, rows["n3"].daemonset_via) == (None, "")
    assert rows["n2"].waiting == "no driver pod on the node"
    assert (rows["n2"].current, rows["n2"].ready, rows["n2"].driver_pod) == (None, None, None)
    cells = status_command.row_cells(rows["n2"])
    assert cells[2:6] == (f"{DS} (no pod)", "-", "-", "-")
    assert status_command.row_cells(rows["n3"])[1:3] == ("ubuntu22.04", "-")


def test_a_pod_whose_daemonset_has_no_known_revision_is_neither_current_nor_outdated() -> None:
    snap = snapshot(node("n1", S.UPGRADE_DONE, driver=NO_REVISION))
    (row,) = report_of(snap).rows
    assert row.current is None and row.driver_check == "no-revision"
    assert status_command.row_cells(row)[4] == "?"


def test_a_node_missing_from_the_node_list_still_gets_its_row() -> None:
    # The node appeared between the snapshot's list and the status command's own.
    snap = snapshot(node("n1", S.UNKNOWN, driver=MISSING))
    (row,) = report_of(snap, views={}).rows
    assert (row.rhcos, row.os, row.daemonset) == (None, None, None)
    assert status_command.row_cells(row)[1] == "?"


def test_a_stale_nfd_label_shows_the_running_rhcos() -> None:
    snap = snapshot(node("n1", S.UPGRADE_DONE, driver=CURRENT))
    (row,) = report_of(snap, views={"n1": node_view("n1", RHCOS, os_image_rhcos=OTHER_RHCOS)}).rows
    assert (row.rhcos, row.os_image_rhcos) == (RHCOS, OTHER_RHCOS)
    assert status_command.row_cells(row)[1] == f"{RHCOS} (osImage {OTHER_RHCOS})"


def test_node_selector_matching() -> None:
    assert status_command.is_selected({}, {})
    assert status_command.is_selected({"a": "1"}, {"a": "1", "b": "2"})
    assert not status_command.is_selected({"a": "1"}, {"a": "2"})
    assert not status_command.is_selected({"a": "1"}, {})


def test_rows_are_sorted_by_node_and_one_per_node() -> None:
    snap = snapshot(*(node(name, S.UPGRADE_DONE, driver=CURRENT) for name in ("n3", "n1", "n2")))
    assert [row.node for row in report_of(snap).rows] == ["n1", "n2", "n3"]


# --- output --------------------------------------------------------------------------------------------


ROW_KEYS = {
    "node",
    "rhcos",
    "os",
    "os_image_rhcos",
    "daemonset",
    "daemonset_via",
    "driver_pod",
    "pod_revision",
    "daemonset_revision",
    "current",
    "ready",
    "driver_check",
    "driver_detail",
    "state",
    "next",
    "actions",
    "operands",
    "mig_config",
    "mig_state",
    "workload",
    "waiting",
    "skipped",
    "unschedulable",
    "gpu_owner",
    "dra_published",
    "dra_allocated",
}


def mid_upgrade_report() -> status_command.StatusReport:
    job = pod("train-0", "n1", gpu=False, pod_labels={"job": "batch"})
    snap = snapshot(
        node("n1", S.WAIT_FOR_JOBS_REQUIRED, started=ago(30), cordon=OURS),
        node("n2", S.UPGRADE_REQUIRED),
        node("n3", S.UPGRADE_REQUIRED),
        pods=[job],
    )
    return report_of(
        snap,
        {
            "maxParallelUpgrades": 1,
            "maxUnavailable": "100%",
            "waitForCompletion": {"podSelector": "job=batch", "timeoutSeconds": 600},
        },
    )


def test_json_output_shape() -> None:
    document = status_command.report_json(mid_upgrade_report())
    assert json.loads(json.dumps(document)) == document
    assert set(document) == {
        "time",
        "policy",
        "namespace",
        "upgradePolicy",
        "halted",
        "metrics",
        "budget",
        "nodes",
        "nvidiaDrivers",
        "gpuClusters",
        "newer_than_default",
    }
    assert document["nvidiaDrivers"] == [] and document["gpuClusters"] == []
    assert document["time"] == "2025-03-01T12:00:00Z"
    assert document["policy"] == {
        "name": "cluster-policy",
        "active": True,
        "state": "ready",
        "generation": 2,
        "observedGeneration": 2,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "3 GPU node(s)"},
            {"type": "Error", "status": "False", "reason": "Reconciled", "message": ""},
        ],
        "ignored": [],
    }
    assert document["upgradePolicy"] == {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "maxUnavailable": "100%",
    }
    assert document["metrics"] == ONE_UPGRADING_TWO_WAITING
    assert document["budget"] == {
        "nodes": 3,
        "max_unavailable_nodes": 3,
        "holding": ["n1"],
        "unavailable": ["n1"],
        "starts": [],
        "blocked_by": "waiting for an upgrade slot: 1 of maxParallelUpgrades 1 taken (n1)",
    }
    assert [row["node"] for row in document["nodes"]] == ["n1", "n2", "n3"]
    for row in document["nodes"]:
        assert set(row) == ROW_KEYS
        assert isinstance(row["actions"], list)
    n1 = document["nodes"][0]
    assert n1["state"] == "wait-for-jobs-required" and n1["next"] is None
    assert n1["waiting"].endswith("work/train-0 (timeout 10m00s, 9m30s left)")
    assert document["nodes"][1]["current"] is False and document["nodes"][1]["ready"] is True


def test_plain_text_is_aligned_under_its_header() -> None:
    report = mid_upgrade_report()
    for wide in (False, True):
        lines = status_command.plain_text(report, wide=wide).splitlines()
        columns = status_command.WIDE_COLUMNS if wide else status_command.COLUMNS
        header = lines[len(status_command.header_lines(report))]
        starts: list[int] = []
        for column in columns:
            starts.append(header.index(column, starts[-1] + 1 if starts else 0))
        for line, row in zip(lines[-3:], report.rows, strict=True):
            for start, cell in zip(starts, status_command.row_cells(row, wide), strict=True):
                assert line[start:].startswith(cell), (line, cell)
    assert status_command.plain_text(report).splitlines()[0] == (
        "ClusterPolicy cluster-policy: state ready, generation 2 (observed 2), namespace nvidia-gpu-operator"
    )
    assert (
        "  auto_upgrade_enabled=1 in_progress=1 done=0 failed=0 available=0 pending=2"
        in status_command.plain_text(report)
    )


def test_no_gpu_node_is_said_plainly() -> None:
    report = report_of(snapshot())
    assert f"(no GPU node: none is labelled {upgrading.GPU_NODE_SELECTOR})" in status_command.plain_text(
        report
    )


def test_a_status_never_written_or_not_yet_observed_is_said() -> None:
    report = mid_upgrade_report()
    fresh = dataclasses.replace(report.policy, state="", observed_generation=0, conditions=())
    assert status_command.header_lines(dataclasses.replace(report, policy=fresh))[0].startswith(
        "ClusterPolicy cluster-policy: state (no status yet: is the operator running?), generation 2 "
        "(observed never)"
    )
    behind = dataclasses.replace(report.policy, generation=3)
    assert "  the operator has not yet reported on generation 3" in status_command.header_lines(
        dataclasses.replace(report, policy=behind)
    )


def test_the_rich_table_renders_the_same_cells_and_folds_rather_than_crops() -> None:
    report = mid_upgrade_report()
    out = io.StringIO()
    Console(file=out, width=400, force_terminal=False).print(status_command.rich_table(report, wide=True))
    text = out.getvalue()
    for column in status_command.WIDE_COLUMNS:
        assert column in text
    assert "waiting for an upgrade slot: 1 of maxParallelUpgrades 1 taken (n1)" in text
    assert "auto_upgrade_enabled=1" in text
    # On a narrow terminal every character of every cell is still there, folded onto more lines.
    # NB: 18 columns (one per operand, GPUS, WORKLOAD): below ~190 characters the last header
    # itself folds.
    for width in (190, 240):
        narrow = io.StringIO()
        Console(file=narrow, width=width, force_terminal=False).print(status_command.rich_table(report))
        lines = narrow.getvalue().splitlines()
        assert max(len(line) for line in lines) <= width
        assert _table_cells(lines, status_command.COLUMNS) == [
            tuple(cell.replace(" ", "") for cell in status_command.row_cells(row)) for row in report.rows
        ]


def _table_cells(lines: list[str], columns: Sequence[str]) -> list[tuple[str, ...]]:
    """Each row's cells as rendered (folded lines joined, spaces dropped), read back by column offset."""
    top = next(i for i, line in enumerate(lines) if line.startswith(columns[0]))
    starts: list[int] = []
    for column in columns:
        starts.append(lines[top].index(column, starts[-1] + 1 if starts else 0))
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    groups: list[list[str]] = []
    for line in lines[top + 1 :]:
        if line[: starts[1]].strip():
            # A node name in the first column starts a row; the lines below it continue it.
            groups.append([])
        groups[-1].append(line)
    return [
        tuple("".join(line[start:end] for line in group).replace(" ", "") for start, end in bounds)
        for group in groups
    ]


# --- which ClusterPolicy -----------------------------------------------------------------------------


def policy_object(name: str, created: str, **status_fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": name, "creationTimestamp": created, "generation": 1},
        "spec": {},
        "status": status_fields,
    }


def test_the_oldest_policy_is_shown_unless_one_is_named() -> None:
    items = [
        policy_object("newer", "2025-02-01T00:00:00Z"),
        policy_object("cluster-policy", "2025-01-01T00:00:00Z"),
    ]
    chosen = status_command.choose_policy(items, None, "https://api")
    assert (chosen.name, chosen.active, chosen.ignored) == ("cluster-policy", True, ("newer",))
    named = status_command.choose_policy(items, "newer", "https://api")
    assert (named.name, named.active, named.ignored) == ("newer", False, ("newer",))
    assert "is ignored by the operator" in status_command.upgrade_policy_of(named)[1]


def test_no_policy_or_an_unknown_name_is_an_error_naming_what_exists() -> None:
    with pytest.raises(status_command.StatusError, match="https://api has no ClusterPolicy: create one"):
        status_command.choose_policy([], None, "https://api")
    with pytest.raises(
        status_command.StatusError, match=r"no ClusterPolicy named 'nope' \(found: cluster-policy\)"
    ):
        status_command.choose_policy(
            [policy_object("cluster-policy", "2025-01-01T00:00:00Z")], "nope", "https://api"
        )


# --- main, against a fake API ---------------------------------------------------------------------------

NS = "gpu-ns"


def node_object(name: str, extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    view = node_view(name)
    return {
        "metadata": {"name": name, "labels": {**view.labels, **(extra_labels or {})}, "annotations": {}},
        "spec": {},
        "status": {
            "nodeInfo": {"osImage": view.os_image},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def driver_pod_object(node_name: str, revision: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{DS}-{node_name}",
            "namespace": NS,
            "uid": f"uid-{node_name}",
            "labels": {labels.APP: labels.DRIVER_APP, upgrade_observations.POD_REVISION_LABEL: revision},
            "ownerReferences": [{"kind": "DaemonSet", "name": DS, "controller": True}],
        },
        "spec": {"nodeName": node_name},
        "status": {"phase": "Running", "containerStatuses": [{"ready": True}]},
    }


class FakeApi:
    """Answers GETs like an API server holding one policy, two GPU nodes and their driver pods."""

    def __init__(self, policies: list[dict[str, Any]] | None = None, crd: bool = True) -> None:
        self.credentials = argparse.Namespace(server="https://fake:6443")
        self.crd = crd
        self.policies = (
            policies
            if policies is not None
            else [
                {
                    **policy_object("cluster-policy", "2025-01-01T00:00:00Z", state="ready", namespace=NS),
                    "spec": {
                        "driver": {"upgradePolicy": {"maxParallelUpgrades": 1, "maxUnavailable": "100%"}}
                    },
                }
            ]
        )
        self.requests: list[tuple[str, str]] = []
        self.fail_after: int | None = None
        # ResourceSlices and ResourceClaims by plural; None: resource.k8s.io/v1 not served.
        self.dra: dict[str, list[dict[str, Any]]] | None = {"resourceslices": [], "resourceclaims": []}
        # Extra labels per node.
        self.node_labels: dict[str, dict[str, str]] = {}

    def request(
        self, api: Any, method: str, path: str, *, query: Sequence[tuple[str, str]] = (), **_: Any
    ) -> Any:
        assert api is self
        self.requests.append((method, path))
        if self.fail_after is not None and len(self.requests) > self.fail_after:
            raise ConnectionRefusedError("connection refused")
        selector = dict(query).get("labelSelector", "")
        if path == "/apis/nvidia.com/v1/clusterpolicies":
            if not self.crd:
                raise ApiException(status=404, reason="Not Found")
            return {"items": self.policies}
        if path == "/api/v1/nodes":
            assert selector == upgrading.GPU_NODE_SELECTOR
            return {"items": [node_object(name, self.node_labels.get(name)) for name in ("n1", "n2")]}
        if path.startswith("/apis/resource.k8s.io/v1/"):
            if self.dra is None:
                raise ApiException(status=404, reason="Not Found")
            return {"items": self.dra[path.rsplit("/", 1)[1]]}
        if path == f"/api/v1/namespaces/{NS}/pods" and selector == upgrading.DRIVER_SELECTOR:
            return {"items": [driver_pod_object("n1", CURRENT_HASH), driver_pod_object("n2", "old")]}
        if path == f"/apis/apps/v1/namespaces/{NS}/controllerrevisions":
            revision = {
                "metadata": {
                    "name": f"{DS}-{CURRENT_HASH}",
                    "labels": {upgrade_observations.POD_REVISION_LABEL: CURRENT_HASH},
                    "ownerReferences": [{"kind": "DaemonSet", "name": DS, "controller": True}],
                },
                "revision": 2,
            }
            return {"items": [revision]}
        if path == f"/apis/apps/v1/namespaces/{NS}/daemonsets" and selector == upgrading.DRIVER_SELECTOR:
            daemonset = {
                "metadata": {"name": DS, "generation": 2},
                "spec": {"template": {"spec": {"nodeSelector": dict(DS_SELECTORS[DS])}}},
                "status": {"observedGeneration": 2, "desiredNumberScheduled": 2, "currentNumberScheduled": 2},
            }
            return {"items": [daemonset]}
        # Validator pods and DaemonSets, anything in another namespace: none.
        return {"items": []}


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    api = FakeApi()
    monkeypatch.setattr(requesting, "request", api.request)
    monkeypatch.setattr(clients, "load_api_client", lambda kubeconfig=None: api)
    return api


def args_of(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    status_command.add_arguments(parser)
    return parser.parse_args(list(argv))


def run(*argv: str, **main_args: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = status_command.main(args_of(*argv), stdout=out, stderr=err, now=lambda: NOW, **main_args)
    return code, out.getvalue(), err.getvalue()


def test_main_reads_with_get_only_in_the_policys_namespace(fake_api: FakeApi) -> None:
    code, out, err = run("-o", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["namespace"] == NS
    rows = {row["node"]: row for row in document["nodes"]}
    assert (rows["n1"]["current"], rows["n1"]["state"], rows["n1"]["next"]) == (True, "", "upgrade-done")
    assert (rows["n2"]["current"], rows["n2"]["next"]) == (False, "upgrade-required")
    assert {method for method, _ in fake_api.requests} == {"GET"}
    assert all(NS in path for _, path in fake_api.requests if "/namespaces/" in path)


def test_main_namespace_flag_wins(fake_api: FakeApi) -> None:
    code, out, _ = run("-o", "json", "--namespace", "elsewhere")
    assert code == 0 and json.loads(out)["namespace"] == "elsewhere"
    assert any("/namespaces/elsewhere/" in path for _, path in fake_api.requests)


def test_main_default_namespace_without_a_status(fake_api: FakeApi) -> None:
    fake_api.policies = [policy_object("cluster-policy", "2025-01-01T00:00:00Z")]
    code, out, _ = run("-o", "json")
    assert code == 0 and json.loads(out)["namespace"] == labels.OPENSHIFT_NAMESPACE


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            lambda api: setattr(api, "crd", False),
            "serves no ClusterPolicy API: the clusterpolicies.nvidia.com CRD is not installed",
        ),
        (lambda api: setattr(api, "policies", []), "https://fake:6443 has no ClusterPolicy: create one"),
        (lambda api: setattr(api, "fail_after", 0), "cannot reach https://fake:6443: connection refused"),
        (
            lambda api: setattr(api, "fail_after", 1),
            "cannot read the GPU nodes and the driver pods in gpu-ns",
        ),
    ],
    ids=["no-crd", "no-policy", "unreachable", "fails-midway"],
)
def test_main_errors_exit_1_naming_the_cause(
    fake_api: FakeApi, setup: Callable[[FakeApi], None], message: str
) -> None:
    setup(fake_api)
    code, out, err = run()
    assert (code, out) == (1, "")
    assert err.startswith("ocp-gpu status: error: ") and message in err


def test_main_unknown_policy_name_exits_1(fake_api: FakeApi) -> None:
    code, _, err = run("--policy-name", "nope")
    assert code == 1 and "no ClusterPolicy named 'nope' (found: cluster-policy)" in err


def test_main_bad_kubeconfig_exits_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(kubeconfig: Path | None = None) -> Any:
        raise FileNotFoundError(str(kubeconfig))

    monkeypatch.setattr(clients, "load_api_client", broken)
    code, _, err = run("--kubeconfig", str(tmp_path / "missing"))
    assert code == 1 and f"cannot load the kubeconfig {tmp_path / 'missing'}" in err


def test_main_plain_table_off_a_terminal(fake_api: FakeApi) -> None:
    code, out, _ = run()
    assert code == 0
    assert "NODE " in out and "next: upgrade-required" in out
    assert "\x1b[" not in out  # no colour codes in a pipe


def test_main_rich_table_on_a_terminal(fake_api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    assert status_command.main(args_of("-o", "wide"), stdout=out, stderr=io.StringIO(), now=lambda: NOW) == 0
    assert "next: upgrade-required" in out.getvalue() and "POD REV" in out.getvalue()


def test_watch_prints_a_document_per_refresh_survives_a_failed_read_and_stops_on_ctrl_c(
    fake_api: FakeApi,
) -> None:
    sleeps: list[float] = []
    per_read = 0

    def sleep(seconds: float) -> None:
        nonlocal per_read
        sleeps.append(seconds)
        if len(sleeps) == 1:
            per_read = len(fake_api.requests)
            # The second read fails at its first request; the third succeeds again.
            fake_api.fail_after = per_read
        elif len(sleeps) == 2:
            fake_api.fail_after = None
        elif len(sleeps) == 3:
            raise KeyboardInterrupt

    code, out, err = run("-o", "json", "--watch", sleep=sleep)
    assert code == 0
    documents = [json.loads(line) for line in out.splitlines()]
    assert len(documents) == 2 and all(len(d["nodes"]) == 2 for d in documents)
    assert sleeps == [status_command.WATCH_INTERVAL_S] * 3
    assert "connection refused (retrying)" in err


def test_watch_plain_text_is_stamped(fake_api: FakeApi) -> None:
    calls = 0

    def sleep(_: float) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt

    code, out, _ = run("--watch", sleep=sleep)
    assert code == 0 and out.count("--- 2025-03-01 12:00:00 UTC\n") == 2


def test_the_subcommand_is_wired(fake_api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["nodes"]) == 2


def test_planner_nodes_are_read_from_the_snapshot_alone() -> None:
    # The status rows never invent nodes: a node's NodeFacts without an UpgradeNode gives no row.
    snap = UpgradeSnapshot(nodes=(UpgradeNode(name=NodeName("n1")),))
    report = report_of(snap, views={"n1": node_view("n1"), "ghost": node_view("ghost")})
    assert [row.node for row in report.rows] == ["n1"]


def test_one_cell_per_operand_says_whether_it_is_ready_on_the_node() -> None:
    node_labels = {
        labels.NFD_NVIDIA_PCI: "true",
        **{o.deploy_label: "true" for o in operand_catalog.EVERY_GPU_NODE},
        labels.deploy_label("gpu-feature-discovery"): "false",
    }
    pods = [
        operand_types.OperandPod("t", operand_catalog.CONTAINER_TOOLKIT.app, "n1", ready=True),
        operand_types.OperandPod("p", operand_catalog.DEVICE_PLUGIN.app, "n1", ready=False),
    ]
    policy = policy_parser.parse_policy({"validator": {}, "devicePlugin": {}})
    assert status_command.operand_cells(policy, node_labels, "n1", pods) == {
        "container-toolkit": "yes",
        "operator-validator": "no",
        "device-plugin": "no",
        # only MPS-capable nodes (GFD: a config sharing with MPS) run the MPS control daemon
        "mps-control-daemon": "-",
        # off unless draDriver.enabled
        "dra-driver": "off",
        "dcgm": "no",
        "dcgm-exporter": "no",
        "gpu-feature-discovery": "-",
        # only MIG-capable nodes are labelled for the MIG manager
        "mig-manager": "-",
        # off unless nodeStatusExporter.enabled (NVIDIA's default)
        "node-status-exporter": "off",
        # off unless sandboxWorkloads.enabled (the VM stacks)
        "vfio-manager": "off",
        "sandbox-validator": "off",
        "vgpu-device-manager": "off",
        "sandbox-device-plugin": "off",
    }
    off = policy_parser.parse_policy({"devicePlugin": {"enabled": False}})
    assert status_command.operand_cells(off, node_labels, "n1", pods)["device-plugin"] == "off"
    assert list(status_command.OPERAND_COLUMNS.values()) == [
        status_command.COLUMNS[status_command.COLUMNS.index("STATE") + 1 + i]
        for i in range(len(status_command.OPERAND_COLUMNS))
    ]


def test_mig_config_and_state_per_node_and_a_summary() -> None:
    report = mid_upgrade_report()
    rows = list(report.rows)
    rows[0] = dataclasses.replace(rows[0], mig_config="all-1g.10gb", mig_state="failed")
    rows[1] = dataclasses.replace(rows[1], mig_config="all-disabled", mig_state="success")
    report = dataclasses.replace(report, rows=tuple(rows))
    text = status_command.plain_text(report)
    assert "MIG: 2 node(s) with nvidia.com/mig.config: failed=1 success=1" in text
    index = status_command.COLUMNS.index("MIG CONFIG")
    cells = [status_command.row_cells(row)[index] for row in report.rows]
    assert cells == ["all-1g.10gb (failed)", "all-disabled (success)", "-"]
    document = status_command.report_json(report)
    assert (document["nodes"][0]["mig_config"], document["nodes"][0]["mig_state"]) == (
        "all-1g.10gb",
        "failed",
    )


# --- NVIDIADrivers (driver.useNvidiaDriverCRD) -------------------------------------------------------


def test_nvidia_drivers_are_shown_with_their_nodes_daemonsets_and_problems() -> None:
    pool = status_command.nvidia_driver_view(
        {
            "metadata": {"name": "pool-a", "generation": 3},
            "status": {
                "state": "notReady",
                "observedGeneration": 3,
                "nodes": ["gpu-1", "gpu-2"],
                "driverDaemonSets": [{"name": f"nvidia-gpu-driver-pool-a-{RHCOS}"}],
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "DriverNotReady",
                        "message": "pods not ready",
                    },
                    {"type": "Error", "status": "False", "reason": "Reconciled", "message": ""},
                    {
                        "type": "ConflictingNodeSelector",
                        "status": "True",
                        "reason": "C",
                        "message": "pool-b too",
                    },
                ],
            },
        }
    )
    report = dataclasses.replace(report_of(UpgradeSnapshot(nodes=())), nvidia_drivers=(pool,))
    lines = status_command.header_lines(report)
    assert (
        f"NVIDIADriver pool-a: state notReady, 2 node(s), DaemonSets: nvidia-gpu-driver-pool-a-{RHCOS}"
        in lines
    )
    assert "  Ready=False DriverNotReady: pods not ready" in lines
    assert "  ConflictingNodeSelector=True C: pool-b too" in lines
    after = lines[
        lines.index(
            f"NVIDIADriver pool-a: state notReady, 2 node(s), DaemonSets: nvidia-gpu-driver-pool-a-{RHCOS}"
        ) :
    ]
    # a condition that says all is well is not repeated
    assert not any(line.startswith("  Error=") for line in after)
    (shown,) = status_command.report_json(report)["nvidiaDrivers"]
    assert shown["name"] == "pool-a" and shown["nodes"] == ["gpu-1", "gpu-2"]
    assert shown["driverDaemonSets"] == [f"nvidia-gpu-driver-pool-a-{RHCOS}"]


def test_the_upgrade_preflight_is_a_line_under_the_policy() -> None:
    # issue 24: while OpenShift applies an update, `ocp-gpu status` says what its new RHCOS builds find
    preflight = status_command.ConditionView(
        "UpgradePreflight",
        "False",
        "DriverBranchUnsupported",
        "OpenShift 4.23.1 is being applied; driver branch 595 supports OpenShift 4.18-4.22, not 4.23.1",
    )
    snap = snapshot(node("n1", S.UPGRADE_DONE, driver=CURRENT))
    lines = status_command.header_lines(report_of(snap, conditions=[preflight]))
    assert (
        "  UpgradePreflight=False DriverBranchUnsupported: OpenShift 4.23.1 is being applied; "
        "driver branch 595 supports OpenShift 4.18-4.22, not 4.23.1"
    ) in lines


def resource_slice(node: str, *devices: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-gpu.nvidia.com-x"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": device} for device in devices],
        },
    }


def allocated_claim(*results: tuple[str, str, str], admin: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "work"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "driver": driver,
                            "pool": pool,
                            "device": device,
                            **({"adminAccess": True} if admin else {}),
                        }
                        for driver, pool, device in results
                    ]
                }
            }
        },
    }


def test_devices_through_dra_are_counted_per_node() -> None:
    slices = [
        resource_claims.PublishedPool("n1", "n1", ("gpu-0", "gpu-1")),
        resource_claims.PublishedPool("n3", "n3", ("gpu-0",)),
    ]
    held = [
        # gpu-0 of n1 shared by two claims counts once; adminAccess and other drivers not at all
        resource_claims.AllocatedDevice("gpu.nvidia.com", "n1", "gpu-0"),
        resource_claims.AllocatedDevice("gpu.nvidia.com", "n1", "gpu-0"),
        resource_claims.AllocatedDevice("gpu.nvidia.com", "n1", "gpu-1", admin_access=True),
        resource_claims.AllocatedDevice("nic.example.com", "n1", "eth0"),
        # a pool no slice publishes any more: counted on the node it is named after
        resource_claims.AllocatedDevice("gpu.nvidia.com", "n2", "gpu-3"),
    ]
    assert resource_claims.devices_by_node(slices, held) == {
        "n1": resource_claims.NodeDevices(published=2, allocated=1),
        "n2": resource_claims.NodeDevices(published=0, allocated=1),
        "n3": resource_claims.NodeDevices(published=1, allocated=0),
    }


def test_which_plugin_owns_each_nodes_gpus(fake_api: FakeApi) -> None:
    dra = operand_catalog.DRA_DRIVER.deploy_label
    plugin = operand_catalog.DEVICE_PLUGIN.deploy_label
    fake_api.node_labels = {"n1": {dra: "true"}, "n2": {plugin: "true"}}
    fake_api.dra = {
        "resourceslices": [resource_slice("n1", "gpu-0", "gpu-1")],
        "resourceclaims": [
            allocated_claim(("gpu.nvidia.com", "n1", "gpu-1")),
            allocated_claim(("gpu.nvidia.com", "n1", "gpu-0"), admin=True),
        ],
    }
    code, out, err = run("-o", "json")
    assert code == 0, err
    rows = {row["node"]: row for row in json.loads(out)["nodes"]}
    assert (rows["n1"]["gpu_owner"], rows["n1"]["dra_allocated"], rows["n1"]["dra_published"]) == (
        "dra",
        1,
        2,
    )
    assert (rows["n2"]["gpu_owner"], rows["n2"]["dra_published"]) == ("plugin", 0)
    code, out, _ = run("-o", "wide")
    header, *lines = [line for line in out.splitlines() if line.startswith(("NODE", "n1", "n2"))]
    at = header.index("GPUS")
    assert [line[at:].split()[0:2] for line in lines] == [["dra", "1/2"], ["plugin", "-"]]
    # No DRA API served (before Kubernetes 1.34, or switched off): no devices through it, no error.
    fake_api.dra = None
    code, out, err = run("-o", "json")
    assert code == 0, err
    assert {row["dra_published"] for row in json.loads(out)["nodes"]} == {0}


def _pool(name: str, spec: Mapping[str, Any], invalid: bool = False) -> status_command.NvidiaDriverView:
    conditions = (
        [{"type": "Error", "status": "True", "reason": "InvalidSpec", "message": "x"}] if invalid else []
    )
    return status_command.nvidia_driver_view(
        {"metadata": {"name": name, "generation": 1}, "spec": spec, "status": {"conditions": conditions}}
    )


def test_each_nvidia_driver_pool_is_planned_and_shown_under_its_own_upgrade_rules() -> None:
    snap = snapshot(
        dataclasses.replace(node("p1", S.UPGRADE_REQUIRED), pool="pool-p"),
        dataclasses.replace(node("q1", S.UPGRADE_REQUIRED), pool="pool-q"),
        dataclasses.replace(node("x1", S.UPGRADE_REQUIRED), pool="pool-x"),
    )
    inputs = status_command.StatusInputs(
        policy=policy_view({"maxParallelUpgrades": 0}, driver={"useNvidiaDriverCRD": True}),
        namespace="nvidia-gpu-operator",
        snapshot=snap,
        nodes={n.name: node_view(n.name) for n in snap.nodes},
        daemonset_selectors=DS_SELECTORS,
        nvidia_drivers=(
            _pool("pool-p", {"upgradePolicy": {"autoUpgrade": False}}),
            _pool("pool-q", {"upgradePolicy": {"maxUnavailable": 1}}),
            _pool("pool-x", {"version": "not a version!"}, invalid=True),
        ),
    )
    report = status_command.status_report(inputs, NOW)
    rows = rows_by_node(report)
    assert rows["p1"].waiting == "paused: NVIDIADriver pool-p sets spec.upgradePolicy.autoUpgrade false"
    assert rows["q1"].next == "cordon-required"
    assert rows["x1"].waiting.startswith("held: NVIDIADriver pool-x has an invalid spec")
    lines = status_command.header_lines(report)
    # the pool's own autoUpgrade, the ClusterPolicy's maxParallelUpgrades beside the pool's maxUnavailable
    assert "  upgrades: autoUpgrade false, maxParallelUpgrades 0 (unlimited), maxUnavailable 25%" in lines
    assert "  upgrades: autoUpgrade true, maxParallelUpgrades 0 (unlimited), maxUnavailable 1" in lines
    shown = {pool["name"]: pool for pool in status_command.report_json(report)["nvidiaDrivers"]}
    assert shown["pool-p"]["upgradePolicy"]["autoUpgrade"] is False
    assert shown["pool-x"]["upgradesHeld"].startswith("has an invalid spec")
    # without the mode the NVIDIADrivers rule nothing
    plain = dataclasses.replace(inputs, policy=policy_view({"maxParallelUpgrades": 0}))
    assert rows_by_node(status_command.status_report(plain, NOW))["p1"].next == "cordon-required"


def test_gpu_clusters_are_shown_with_why_they_are_not_ready() -> None:
    refused = reading.gpu_cluster(
        {
            "metadata": {"name": "gpu-cluster", "generation": 1},
            "status": {
                "state": "notReady",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "ClusterPolicyOwnsDRA",
                        "message": "set it off",
                    },
                    {
                        "type": "Error",
                        "status": "True",
                        "reason": "PrerequisiteNotMet",
                        "message": "set it off",
                    },
                ],
            },
        }
    )
    report = dataclasses.replace(report_of(UpgradeSnapshot(nodes=())), gpu_clusters=(refused,))
    lines = status_command.header_lines(report)
    assert "GPUCluster gpu-cluster: state notReady" in lines
    assert "  Ready=False ClusterPolicyOwnsDRA: set it off" in lines
    (shown,) = status_command.report_json(report)["gpuClusters"]
    assert (shown["name"], shown["state"]) == ("gpu-cluster", "notReady")
    assert shown["conditions"][0]["reason"] == "ClusterPolicyOwnsDRA"

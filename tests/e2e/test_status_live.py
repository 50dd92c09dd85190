"""We test these aspects of `ocp-gpu status` on the local control plane, with the operator running
and three vanilla GPU nodes upgraded by the seed's driver version patch (`maxParallelUpgrades: 1`):

- `-o json`, run as a separate process the way an admin runs it, shows one row per GPU node
  (each of ours exactly once, and as many rows as the cluster has GPU nodes), each with its OS,
  its driver DaemonSet, its driver pod, and whether that pod is current and Ready;
- mid-upgrade, one node is in flight (held in `wait-for-jobs-required` by a running job pod, so
  the moment lasts): its row names the pod it waits for, the selector, the timeout and the time
  left; the other nodes wait on the parallel-upgrade budget (`maxParallelUpgrades 1`, naming the
  node holding the slot); the six metrics agree (in_progress 1, pending 2, available 0);
- at the end every node is current, Ready and `upgrade-done`, with nothing to wait for;
- the namespace defaults to the ClusterPolicy's `status.namespace` (no `--namespace` given);
- `-o table` off a terminal is plain aligned text; `--watch -o json` prints a document per
  refresh and exits 0 on Ctrl-C;
- it makes zero writes: run as its own user (`status-user`), whose writes the audit log
  attributes; a deliberate write by the same user afterwards shows the count is live.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from ocp_gpu.model import labels
from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness.cluster import LocalControlPlane, unique_name
from ocp_gpu_harness.operating import OperatorProcess
from tests.unit._upgrades import ONE_UPGRADING_TWO_WAITING

from .conftest import (
    REACT_S,
    READY_S,
    STEP_S,
    UPGRADE_S,
    assert_no_writes_by,
    driver_pods_ready,
    kubectl,
    run_status,
    start_job,
    status_json,
    wait_for,
)

pytestmark = pytest.mark.e2e

STATUS_USER = "status-user"
SEED_PATCH = '[{"op": "replace", "path": "/spec/driver/version", "value":"510.85.02"}]'
JOB_SELECTOR = "job=batch"
JOB_TIMEOUT_S = 600
UPGRADE_POLICY = {
    "maxParallelUpgrades": 1,
    # NB: so the budget that holds the others back is maxParallelUpgrades, not maxUnavailable.
    "maxUnavailable": "100%",
    "waitForCompletion": {"podSelector": JOB_SELECTOR, "timeoutSeconds": JOB_TIMEOUT_S},
}


@pytest.fixture(scope="module")
def status_kubeconfig(control_plane: LocalControlPlane) -> Path:
    return control_plane.make_kubeconfig(STATUS_USER, ["system:masters"])


@pytest.fixture
def gpu_nodes(kube: client.ApiClient) -> Iterator[list[str]]:
    names = sorted(unique_name("gpu") for _ in range(3))
    fake_nodes.create_nodes(kube, [fake_nodes.vanilla_gpu_node(name) for name in names])
    yield names
    fake_nodes.delete_nodes(kube, names)


def rows_of(report: dict[str, Any], names: list[str]) -> dict[str, dict[str, Any]]:
    rows = [row for row in report["nodes"] if row["node"] in names]
    assert sorted(row["node"] for row in rows) == names, "not exactly one row per node"
    return {row["node"]: row for row in rows}


def gpu_node_count(kube: client.ApiClient) -> int:
    return len(client.CoreV1Api(kube).list_node(label_selector=f"{labels.NFD_NVIDIA_PCI}=true").items)


def states(kube: client.ApiClient, names: list[str]) -> dict[str, str]:
    return {
        name: (client.CoreV1Api(kube).read_node(name).metadata.labels or {}).get(labels.UPGRADE_STATE, "")
        for name in names
    }


def finish_job(kube: client.ApiClient, namespace: str, name: str) -> None:
    core = client.CoreV1Api(kube)
    core.patch_namespaced_pod_status(name, namespace, {"status": {"phase": "Succeeded"}})
    core.delete_namespaced_pod(name, namespace)


def test_status_follows_an_upgrade_with_one_parallel_slot_without_writing(
    control_plane: LocalControlPlane,
    kube: client.ApiClient,
    namespace: str,
    gpu_nodes: list[str],
    apply_policy: Callable[..., dict[str, Any]],
    start_operator: Callable[..., OperatorProcess],
    status_kubeconfig: Path,
) -> None:
    apply_policy(spec={"driver": {"version": "550.90.07", "upgradePolicy": UPGRADE_POLICY}})
    start_operator()
    wait_for(
        lambda: (
            driver_pods_ready(kube, namespace, gpu_nodes, "550.90.07")
            and set(states(kube, gpu_nodes).values()) == {"upgrade-done"}
        ),
        STEP_S,
        what="driver pods Ready and labelled upgrade-done",
    )
    mark = control_plane.audit_line_count()

    # Before: every node current, its DaemonSet found through its pod; the namespace from the policy.
    before = status_json(status_kubeconfig)
    assert before["namespace"] == namespace
    assert before["policy"]["name"] == "cluster-policy" and before["policy"]["active"]
    assert before["upgradePolicy"] == {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "maxUnavailable": "100%",
    }
    assert len(before["nodes"]) == gpu_node_count(kube)
    for row in rows_of(before, gpu_nodes).values():
        assert row["os"] == "ubuntu22.04" and row["rhcos"] is None
        assert row["daemonset"] == "nvidia-driver-daemonset-ubuntu22.04"
        assert row["daemonset_via"] == "pod"
        assert row["driver_pod"].startswith("nvidia-driver-daemonset-ubuntu22.04-")
        assert row["current"] is True and row["ready"] is True
        assert row["pod_revision"] == row["daemonset_revision"]
        assert (row["state"], row["next"], row["waiting"]) == ("upgrade-done", None, "")

    jobs = {node: start_job(kube, namespace, node) for node in gpu_nodes}
    kubectl(control_plane, "patch", "clusterpolicy/cluster-policy", "--type=json", "-p", SEED_PATCH)

    # Mid-upgrade: one node held by its job, the others held by the budget.
    def mid_upgrade() -> dict[str, Any] | None:
        report = status_json(status_kubeconfig)
        rows = rows_of(report, gpu_nodes)
        held = [row for row in rows.values() if row["state"] == "wait-for-jobs-required"]
        waiting = [row for row in rows.values() if row["state"] == "upgrade-required"]
        return report if len(held) == 1 and len(waiting) == 2 else None

    report = wait_for(mid_upgrade, READY_S, interval=0.5, what="one node in flight, two waiting for a slot")
    rows = rows_of(report, gpu_nodes)
    (held,) = [row for row in rows.values() if row["state"] == "wait-for-jobs-required"]
    assert held["next"] is None
    assert f"matching '{JOB_SELECTOR}' to complete: {namespace}/{jobs[held['node']]}" in held["waiting"]
    assert "(timeout 10m00s, " in held["waiting"] and " left)" in held["waiting"]
    for row in rows.values():
        if row is held:
            continue
        assert row["current"] is False and row["ready"] is True, row
        assert row["pod_revision"] != row["daemonset_revision"]
        assert row["next"] is None
        assert row["waiting"] == (
            f"waiting for an upgrade slot: 1 of maxParallelUpgrades 1 taken ({held['node']})"
        ), row
    if len(report["nodes"]) == len(gpu_nodes):
        # Only ours (no other test's nodes around): the metrics are exactly these.
        assert report["metrics"] == ONE_UPGRADING_TWO_WAITING
    assert report["budget"]["holding"] == [held["node"]]

    # The plain table says the same, aligned, for people.
    table = run_status(status_kubeconfig)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("ClusterPolicy cluster-policy: state ")
    assert any("auto_upgrade_enabled=1" in line for line in lines)
    header = next(line for line in lines if line.startswith("NODE "))
    assert header.index("WAITING / NEXT") > header.index("STATE") > header.index("DRIVER POD")
    for node in gpu_nodes:
        (line,) = [line for line in lines if line.startswith(node + " ")]
        assert line.index("nvidia-driver-daemonset-ubuntu22.04") == header.index("DAEMONSET")

    # The jobs finish; the upgrade rolls on, one node at a time.
    for name in jobs.values():
        finish_job(kube, namespace, name)
    wait_for(
        lambda: (
            driver_pods_ready(kube, namespace, gpu_nodes, "510.85.02")
            and set(states(kube, gpu_nodes).values()) == {"upgrade-done"}
        ),
        UPGRADE_S,
        what="every node upgraded",
    )

    after = wait_for(
        lambda: (
            (r := status_json(status_kubeconfig))
            and all(row["current"] and row["ready"] for row in rows_of(r, gpu_nodes).values())
            and r
        ),
        REACT_S,
        what="every row current and Ready",
    )
    for row in rows_of(after, gpu_nodes).values():
        assert (row["state"], row["next"], row["waiting"]) == ("upgrade-done", None, ""), row
        assert row["pod_revision"] == row["daemonset_revision"]
        assert row["driver_check"] == "ready"
    assert after["metrics"]["in_progress"] == 0 and after["metrics"]["pending"] == 0

    # --watch: a document per refresh until Ctrl-C, then exit 0.
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ocp_gpu.cli",
            "status",
            "--kubeconfig",
            str(status_kubeconfig),
            "-o",
            "json",
            "--watch",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Should Ctrl-C not end it, SIGABRT then dumps every thread's stack (see below).
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        # As a terminal's shell starts a foreground command: SIGINT at its default. A run started in
        # the background by a non-interactive shell (`bash .ci/run &`) ignores SIGINT, inherited.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # Read as a terminal or `| jq` would, all along: with the other tests' nodes in the shared
    # control plane a document outgrows the pipe's buffer, and a writer blocked on a full pipe
    # is not what this test is about.
    printed: list[str] = []

    def read() -> None:
        for line in watch.stdout or ():
            printed.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # Two documents, however long the machine takes to print them (a fixed 10 s window missed
    # the second one under load). Budget 120 s: 2 s refreshes, and the start-up plus each read
    # take seconds on a quiet machine, ten times that on a loaded 2-core one.
    wait_for(lambda: len(printed) >= 2 or watch.poll() is not None, 120, what="two --watch documents")
    watch.send_signal(signal.SIGINT)
    # NB: in the full suite the shared control plane holds every earlier test's nodes and pods,
    # so the read in flight when Ctrl-C lands can take long; the exit must still come, and be 0.
    # NB: wait, not communicate: the reader thread alone reads stdout (two readers split lines).
    try:
        watch.wait(timeout=120)
    except subprocess.TimeoutExpired:
        # Seen once in a two-worker CI run of 91a2584, not in 12 tries on its own: say where it hangs.
        watch.send_signal(signal.SIGABRT)
        watch.wait(timeout=30)
        stacks = watch.stderr.read() if watch.stderr else ""
        pytest.fail(f"status --watch still ran 120 s after Ctrl-C; its threads then:\n{stacks[-8000:]}")
    err = watch.stderr.read() if watch.stderr else ""
    reader.join(timeout=30)
    out = "".join(printed)
    assert watch.returncode == 0, err
    documents = [json.loads(line) for line in out.splitlines()]
    assert len(documents) >= 2, out
    assert all(len(rows_of(doc, gpu_nodes)) == 3 for doc in documents)

    assert_no_writes_by(control_plane, status_kubeconfig, namespace, STATUS_USER, mark)

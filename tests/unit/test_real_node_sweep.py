"""We test that what a killed real-node run leaves on the host is found and removed by the next one
(ocp_gpu_harness/real_node.sweep_dead_nodes): the rule that tells a dead node from a live one
without a server, and, where the machine allows it (root, cgroup v1 or v2), the sweep itself on a
real cgroup holding a real process and a real bridge."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from ocp_gpu_harness import real_node


def test_a_node_is_dead_when_no_process_runs_its_kubelet() -> None:
    live_kubelet = ["/cache/kubelet", "--config=/x/kubelet.yaml", "--node-ip=10.245.7.1", "--v=2"]
    other = ["containerd", "--config", "/y/containerd.toml"]

    dead = real_node.dead_node_bridges(["ocpgpu7", "ocpgpu83", "docker0", "ocpgpux"], [live_kubelet, other])

    assert dead == ["ocpgpu83"]


def test_every_node_is_dead_when_no_kubelet_runs() -> None:
    assert real_node.dead_node_bridges(["ocpgpu1", "ocpgpu200"], [["sleep", "600"]]) == [
        "ocpgpu1",
        "ocpgpu200",
    ]


def _sweep_unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root: it makes a cgroup and a bridge"
    if not real_node._cgroup_hierarchies():
        return "no cgroup hierarchy under /sys/fs/cgroup"
    if subprocess.run(["ip", "-V"], capture_output=True, check=False).returncode != 0:
        return "no `ip` (iproute2)"
    return None


@pytest.mark.skipif(_sweep_unavailable_reason() is not None, reason=str(_sweep_unavailable_reason()))
def test_the_sweep_kills_what_a_dead_node_left_and_removes_its_bridge_and_cgroups() -> None:
    # A suffix no route uses, as _pick_network picks them (10.245.<N>.0/24).
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False).stdout
    suffix = next(n for n in range(255, 0, -1) if f"10.245.{n}.0/24" not in routes)
    bridge = f"{real_node.BRIDGE_PREFIX}{suffix}"
    roots = [h / bridge for h in real_node._cgroup_hierarchies()]
    orphan = subprocess.Popen(["sleep", "600"])
    try:
        subprocess.run(["ip", "link", "add", "name", bridge, "type", "bridge"], check=True)
        for root in roots:
            root.mkdir()
        # The orphaned container: a process in the node's cgroups whose shim and kubelet are gone.
        pids_root = next((r for r in roots if (r / "cgroup.procs").is_file() and "pids" in str(r)), roots[0])
        (pids_root / "cgroup.procs").write_text(str(orphan.pid))
        hour_ago = time.time() - 3600
        for root in roots:
            os.utime(root, (hour_ago, hour_ago))

        swept = real_node.sweep_dead_nodes()

        assert bridge in swept
        assert orphan.wait(timeout=10) == -9
        assert not any(root.is_dir() for root in roots)
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False).stdout
        assert f" {bridge}:" not in links
    finally:
        orphan.kill()
        orphan.wait()
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
        for root in roots:
            if root.is_dir():
                root.rmdir()


@pytest.mark.skipif(_sweep_unavailable_reason() is not None, reason=str(_sweep_unavailable_reason()))
def test_the_sweep_leaves_a_node_that_is_starting_alone() -> None:
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False).stdout
    suffix = next(n for n in range(254, 0, -1) if f"10.245.{n}.0/24" not in routes)
    bridge = f"{real_node.BRIDGE_PREFIX}{suffix}"
    roots = [h / bridge for h in real_node._cgroup_hierarchies()]
    try:
        for root in roots:
            root.mkdir()

        assert bridge not in real_node.sweep_dead_nodes()
        assert all(root.is_dir() for root in roots)
    finally:
        for root in roots:
            if root.is_dir():
                root.rmdir()

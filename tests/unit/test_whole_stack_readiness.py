"""bench/compare_nvidia.py --whole-stack times the ClusterPolicy to every operand pod Ready on
every GPU node (bench/_whole_stack.py); its rule, without a server: the driver's DaemonSets count
together, each every-node operand must cover every GPU node with Ready, updated pods, and an
operand meant for some nodes only (the MIG manager) counts once it has pods and they are Ready."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import _whole_stack as whole_stack
from _whole_stack import Rollout

NODES = 4
DRIVER_V1 = "nvidia-driver-daemonset-416.94.202407030122-0"
DRIVER_V2 = "nvidia-driver-daemonset-416.94.202407240000-0"


def stack(changed: dict[str, Rollout] | None = None) -> dict[str, Rollout]:
    """Every operand of NVIDIA's example done on NODES nodes (two driver DaemonSets), then `changed`."""
    done = Rollout(NODES, NODES, NODES)
    rollouts = {
        DRIVER_V1: Rollout(2, 2, 2),
        DRIVER_V2: Rollout(2, 2, 2),
        **{name: done for name in sorted(whole_stack.EVERY_NODE - {whole_stack.DRIVER})},
        "nvidia-mig-manager": Rollout(0, 0, 0),
    }
    return rollouts | (changed or {})


def test_every_operand_done_on_every_node_is_ready() -> None:
    assert whole_stack.whole_stack_ready(stack(), NODES)
    assert whole_stack.ready_operands(stack(), NODES) == set(whole_stack.EVERY_NODE)


def test_a_driver_daemonset_short_of_its_nodes_is_not_ready() -> None:
    rollouts = stack({DRIVER_V2: Rollout(2, 1, 2)})
    assert whole_stack.DRIVER not in whole_stack.ready_operands(rollouts, NODES)
    assert not whole_stack.whole_stack_ready(rollouts, NODES)


def test_an_every_node_operand_on_fewer_nodes_is_not_ready() -> None:
    # the operator has labelled 3 of the 4 nodes for the device plugin: its 3 pods are all Ready
    rollouts = stack({"nvidia-device-plugin-daemonset": Rollout(3, 3, 3)})
    assert "nvidia-device-plugin-daemonset" not in whole_stack.ready_operands(rollouts, NODES)
    assert not whole_stack.whole_stack_ready(rollouts, NODES)


def test_pods_of_the_previous_template_are_not_ready() -> None:
    rollouts = stack({"gpu-feature-discovery": Rollout(NODES, NODES, NODES - 1)})
    assert not whole_stack.whole_stack_ready(rollouts, NODES)


def test_a_missing_every_node_operand_is_not_ready() -> None:
    rollouts = stack()
    del rollouts["nvidia-dcgm-exporter"]
    assert not whole_stack.whole_stack_ready(rollouts, NODES)


def test_a_some_nodes_operand_counts_once_scheduled() -> None:
    assert not whole_stack.whole_stack_ready(stack({"nvidia-mig-manager": Rollout(1, 0, 1)}), NODES)
    assert whole_stack.whole_stack_ready(stack({"nvidia-mig-manager": Rollout(1, 1, 1)}), NODES)


def test_rollouts_read_from_the_apis_json() -> None:
    daemonsets = [
        {
            "metadata": {"name": "gpu-feature-discovery"},
            "status": {"desiredNumberScheduled": 3, "numberReady": 2},
        },
        {"metadata": {"name": "nvidia-dcgm"}},
    ]
    assert whole_stack.rollouts_of(daemonsets) == {
        "gpu-feature-discovery": Rollout(3, 2, 0),
        "nvidia-dcgm": Rollout(0, 0, 0),
    }

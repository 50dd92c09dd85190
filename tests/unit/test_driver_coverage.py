"""We test these aspects of driver coverage (planning/drivers/driver_coverage.py), without a server:

- a DaemonSet counts only the nodes it selects: an admin's `gpu.deploy.driver=false` or
  `gpu.deploy.operands=false` is left out (as the DaemonSet's node selector does);
- a GPU node that wants a driver but that no planned DaemonSet selects is uncovered, and the
  message names it and the NFD labels it lacks; an opted-out or CPU node never is;
- long node lists are quoted, not copied whole.
"""

from __future__ import annotations

from ocp_gpu.model import labels
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.planning.drivers import driver_coverage
from ocp_gpu.planning.drivers.driver_strategy import Strategy

from ._drivers import V416, plan, rhcos_node

GPU = {labels.NFD_NVIDIA_PCI: "true"}
NFD_416 = {**GPU, labels.OSTREE_VERSION: V416}


def test_opted_out_nodes_are_not_counted_and_unkeyed_nodes_are_uncovered() -> None:
    gpu_nodes = [rhcos_node("a"), rhcos_node("b"), rhcos_node("c"), rhcos_node("d", nfd=False)]
    result = plan(gpu_nodes, Strategy.DTK)
    node_labels = {
        NodeName("a"): NFD_416,
        NodeName("b"): {**NFD_416, labels.deploy_label("driver"): "false"},
        NodeName("c"): {**NFD_416, labels.GPU_DEPLOY_OPERANDS: "false"},
        NodeName("d"): GPU,  # NFD has not labelled it: no key
        NodeName("cpu"): {},
    }
    coverage = driver_coverage.plan_driver_coverage(node_labels, result.desired)
    [entry] = result.desired
    assert len(entry.nodes) == 3  # the key's nodes, opted out or not
    assert coverage.selected[entry.name] == ("a",)
    assert coverage.uncovered == ("d",)
    message = driver_coverage.describe_uncovered(coverage.uncovered, result.findings)
    assert "d (lacks" in message and labels.OSTREE_VERSION in message and "fix:" in message


def test_an_opted_out_unkeyed_node_is_not_uncovered() -> None:
    node_labels = {NodeName("d"): {**GPU, labels.deploy_label("driver"): "false"}}
    assert driver_coverage.plan_driver_coverage(node_labels, ()).uncovered == ()


def test_long_lists_are_quoted() -> None:
    names = tuple(NodeName(f"n{i:04d}") for i in range(5000))
    message = driver_coverage.describe_uncovered(names, ())
    assert "+4990 more" in message and "n0010" not in message
    assert len(message) < 1000

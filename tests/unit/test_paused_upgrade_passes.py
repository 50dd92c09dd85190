"""We test what wakes an upgrade pass while autoUpgrade is false, without a server
(planning/paused_upgrades, counted by reconcilers/node_view into `ClusterView.paused_marks_version`):
a paused pass only counts the nodes' upgrade labels for the metrics and removes the
upgrade-enabled annotation, so only a change to those marks may cost a pass; a driver pod or any
other label changing may not (at 1,000 nodes with NVIDIA's default policy, autoUpgrade false,
every operand pod event at start-up ran a whole pass; then comparing every node's marks on each
of those events was a fifth of the start-up CPU).
"""

from __future__ import annotations

import dataclasses

from ocp_gpu.model import labels, nodes
from ocp_gpu.planning.upgrades import paused_upgrades
from ocp_gpu.reconcilers import node_view, runtime


def _runtime() -> runtime.Runtime:
    return runtime.Runtime(api_client=None, namespace="ns", env={})  # type: ignore[arg-type]


def _node(
    name: str, extra: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> nodes.NodeFacts:
    node_labels = {labels.NFD_NVIDIA_PCI: "true", labels.GPU_PRESENT: "true", **(extra or {})}
    return nodes.NodeFacts(
        nodes.NodeName(name), node_labels, "RHCOS", "5.14", False, 1, annotations=annotations or {}
    )


# Each changes one mark a paused pass reads of n1.
MARK_CHANGES = [
    _node("n1", {labels.UPGRADE_STATE: "upgrade-required"}),
    _node("n1", {labels.UPGRADE_SKIP: "true"}),
    _node("n1", annotations={labels.UPGRADE_ENABLED_ANNOTATION: "true"}),
    _node("n1", {"nvidia.com/gpu.deploy.driver": "false"}),
]


def test_unrelated_labels_do_not_change_what_a_paused_pass_reads() -> None:
    gfd = {"nvidia.com/gpu.product": "NVIDIA-A100", "nvidia.com/gpu.deploy.driver": "true"}
    assert not paused_upgrades.changes_marks(_node("n1"), _node("n1", gfd))
    unschedulable = dataclasses.replace(_node("n1"), unschedulable=True, ready=False)
    assert not paused_upgrades.changes_marks(_node("n1"), unschedulable)


def test_an_upgrade_mark_changes_what_a_paused_pass_reads() -> None:
    for node in MARK_CHANGES:
        assert paused_upgrades.changes_marks(_node("n1"), node), node
        assert paused_upgrades.changes_marks(node, _node("n1")), node
    # A node joining or leaving too (the metrics count nodes).
    assert paused_upgrades.changes_marks(None, _node("n1"))
    assert paused_upgrades.changes_marks(_node("n1"), None)


def test_the_node_view_counts_mark_changes_only() -> None:
    rt = _runtime()
    view = node_view.NodeView(rt)
    view.listed([_node("n1"), _node("n2")])
    joined = rt.view.paused_marks_version
    assert joined > 0
    # Labels a paused pass does not read (GFD's, our deploy labels): no count, so no pass.
    view.seen(_node("n1", {"nvidia.com/gpu.product": "NVIDIA-A100"}))
    view.seen(_node("n2", {"nvidia.com/gpu.deploy.container-toolkit": "true"}))
    assert rt.view.paused_marks_version == joined
    for node in MARK_CHANGES:
        before = rt.view.paused_marks_version
        view.seen(node)
        assert rt.view.paused_marks_version > before, node
    before = rt.view.paused_marks_version
    view.gone("n2")
    assert rt.view.paused_marks_version > before
    # A node that was never seen leaving changes nothing.
    before = rt.view.paused_marks_version
    view.gone("n3")
    assert rt.view.paused_marks_version == before

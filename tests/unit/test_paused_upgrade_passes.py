"""We test what wakes an upgrade pass while autoUpgrade is false, without a server
(reconcilers/upgrades.paused_inputs): a paused pass only counts the nodes' upgrade labels for
the metrics and removes the upgrade-enabled annotation, so only a change to those marks may
cost a pass; a driver pod or any other label changing may not (at 1,000 nodes with NVIDIA's
default policy, autoUpgrade false, every operand pod event at start-up ran a whole pass).
"""

from __future__ import annotations

from ocp_gpu.model import labels, nodes
from ocp_gpu.reconcilers import runtime, upgrades


def _runtime(*facts: nodes.NodeFacts) -> runtime.Runtime:
    rt = runtime.Runtime(api_client=None, namespace="ns", env={})  # type: ignore[arg-type]
    rt.node_facts.update({f.name: f for f in facts})
    return rt


def _node(
    name: str, extra: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> nodes.NodeFacts:
    node_labels = {labels.NFD_NVIDIA_PCI: "true", labels.GPU_PRESENT: "true", **(extra or {})}
    return nodes.NodeFacts(name, node_labels, "RHCOS", "5.14", False, 1, annotations=annotations or {})


def test_unrelated_labels_and_pods_do_not_change_what_a_paused_pass_reads() -> None:
    before = upgrades.paused_inputs(_runtime(_node("n1"), _node("n2")))
    gfd = {"nvidia.com/gpu.product": "NVIDIA-A100"}
    after = upgrades.paused_inputs(_runtime(_node("n1", gfd), _node("n2")))
    assert before == after


def test_an_upgrade_mark_changes_what_a_paused_pass_reads() -> None:
    base = upgrades.paused_inputs(_runtime(_node("n1")))
    changed = [
        _node("n1", {labels.UPGRADE_STATE: "upgrade-required"}),
        _node("n1", {labels.UPGRADE_SKIP: "true"}),
        _node("n1", annotations={labels.UPGRADE_ENABLED_ANNOTATION: "true"}),
        _node("n1", {"nvidia.com/gpu.deploy.driver": "false"}),
    ]
    for node in changed:
        assert upgrades.paused_inputs(_runtime(node)) != base, node
    # A node joining or leaving too (the metrics count nodes).
    assert upgrades.paused_inputs(_runtime(_node("n1"), _node("n2"))) != base

"""What an upgrade pass with autoUpgrade false reads of one node, so that only a change to it costs a pass.

Paused, an upgrade pass moves no node: it only counts the nodes' upgrade labels for the
metrics and takes the upgrade-enabled annotation off (reconcilers/upgrade_reconciler.py).  So what it
plans from is, per node, its name, its upgrade state, its skip label, whether it wants a
driver and whether it carries the upgrade-enabled annotation (`node_marks`); a driver or
validator pod changing, or any other label, moves nothing.

NB: compared node by node as each node event arrives (reconcilers/node_view.py), not over
every node on every wake-up: at 1,000 nodes the whole-view comparison on each of the
thousands of operand pod events at start-up was a fifth of the operator's CPU (py-spy,
issue 13, start-up CPU).

Never does: read the cluster or the clock.
"""

from __future__ import annotations

from ocp_gpu.model import labels, nodes
from ocp_gpu.planning.drivers import driver_coverage

# One node's marks a paused pass reads: name, upgrade state, skip label, wants a driver,
# carries the upgrade-enabled annotation.
NodeMarks = tuple[str, str, str, bool, bool]


def node_marks(facts: nodes.NodeFacts | None) -> NodeMarks | None:
    """What a paused upgrade pass reads of this node (None: no such node)."""
    if facts is None:
        return None
    return (
        facts.name,
        facts.labels.get(labels.UPGRADE_STATE, ""),
        facts.labels.get(labels.UPGRADE_SKIP, ""),
        driver_coverage.wants_driver(facts.labels),
        labels.UPGRADE_ENABLED_ANNOTATION in facts.annotations,
    )


def changes_marks(before: nodes.NodeFacts | None, after: nodes.NodeFacts | None) -> bool:
    """A node event that changes what a paused pass reads (a node joining or leaving does)."""
    return node_marks(before) != node_marks(after)

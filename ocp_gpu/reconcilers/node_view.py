"""The Runtime's view of the nodes, kept from the node watch (kube/node_watch.py).

Glue: what kopf's node handlers did, fed from our own watch.  Each node's facts
(`rt.node_facts`); a node whose kept facts changed is marked dirty (the next pass plans it),
and a node moving to another driver key (a new RHCOS version) runs that pass at once
(planning/urgency), a node whose only change is its upgrade state wakes the upgrade loop
only (planning/urgency.is_upgrade_only), and our own label patch coming back is rollout
progress (planning/urgency.is_own_echo).  A kubelet heartbeat changes nothing we keep
and wakes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from ocp_gpu.model import nodes
from ocp_gpu.planning import paused_upgrades, urgency
from ocp_gpu.reconcilers import runtime, watched_view

# The kind the start-up barrier waits for (Runtime.watch / mark_delivered).
KIND = "nodes"


class NodeView(watched_view.WatchedView[nodes.NodeFacts]):
    """Keeps `rt.node_facts`."""

    def __init__(self, rt: runtime.Runtime) -> None:
        super().__init__(rt, "", KIND)

    def known(self) -> Iterable[str]:
        return self._rt.node_facts

    def seen(self, facts: nodes.NodeFacts) -> None:
        rt = self._rt
        before = rt.node_facts.get(facts.name)
        # Only changes to what we keep count: kubelet heartbeats wake nothing.
        if before == facts:
            return
        rt.node_facts[facts.name] = facts
        if paused_upgrades.changes_marks(before, facts):
            rt.paused_marks_version += 1
        if urgency.is_upgrade_only(before, facts):
            # The upgrade controller's own marks (its state label): only its loop reads them.
            rt.mark_upgrades()
            return
        echo = rt.label_echoes.pop(facts.name, None)
        if echo is not None and urgency.is_own_echo(before, facts, *echo):
            # The main pass's own label write coming back: rollout progress for it.
            rt.mark_progress()
            rt.mark_upgrades()
            return
        rt.mark_node(facts.name)
        if urgency.moves_driver_key(before, facts):
            rt.mark_urgent()

    def gone(self, name: str) -> None:
        rt, node = self._rt, nodes.NodeName(name)
        rt.label_echoes.pop(node, None)
        if rt.node_facts.pop(node, None) is not None:
            rt.paused_marks_version += 1
            rt.mark_node(node)

"""The Runtime's view of the nodes, kept from the node watch (kube/node_watch.py).

Glue: what kopf's node handlers did, fed from our own watch.  Each node's facts
(`view.node_facts`); a node whose kept facts changed is marked dirty (the next pass plans it),
and a node moving to another driver key (a new RHCOS version) runs that pass at once
(planning/urgency), a node whose only change is its upgrade state wakes the upgrade loop
only (planning/urgency.is_upgrade_only), and our own label patch coming back is rollout
progress (planning/urgency.is_own_echo).  A kubelet heartbeat changes nothing we keep
and wakes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from ocp_gpu.model import nodes
from ocp_gpu.planning import urgency
from ocp_gpu.planning.upgrades import paused_upgrades
from ocp_gpu.reconcilers import runtime, watched_view

# The kind the start-up barrier waits for (cluster_view.ClusterView.watch / mark_delivered).
KIND = "nodes"


class NodeView(watched_view.WatchedView[nodes.NodeFacts]):
    """Keeps `view.node_facts`."""

    def __init__(self, rt: runtime.Runtime) -> None:
        super().__init__(rt, "", KIND)

    def known(self) -> Iterable[str]:
        return self._view.node_facts

    def seen(self, facts: nodes.NodeFacts) -> None:
        view, scheduler = self._view, self._scheduler
        before = view.node_facts.get(facts.name)
        # Only changes to what we keep count: kubelet heartbeats wake nothing.
        if before == facts:
            return
        view.node_facts[facts.name] = facts
        if paused_upgrades.changes_marks(before, facts):
            view.paused_marks_version += 1
        if urgency.is_upgrade_only(before, facts):
            # The upgrade controller's own marks (its state label): only its loop reads them.
            scheduler.mark_upgrades()
            return
        echo = self._cache.label_echoes.pop(facts.name, None)
        if echo is not None and urgency.is_own_echo(before, facts, *echo):
            # The main pass's own label write coming back: rollout progress for it.
            scheduler.mark_progress()
            scheduler.mark_upgrades()
            return
        scheduler.mark_node(facts.name)
        if urgency.moves_driver_key(before, facts):
            scheduler.mark_urgent()

    def gone(self, name: str) -> None:
        view, scheduler, node = self._view, self._scheduler, nodes.NodeName(name)
        self._cache.label_echoes.pop(node, None)
        if view.node_facts.pop(node, None) is not None:
            view.paused_marks_version += 1
            scheduler.mark_node(node)

"""The nodes' watch, outside kopf (kube/watching.py): one paged LIST, then one WATCH that stays open.

Every node is watched (not only GPU nodes: a node that loses its GPU label must still be
seen), and each event is decoded once into one `nodes.NodeFacts` (kube/reading.node_facts:
the labels and annotations we decide on, unschedulable, the Ready condition's status, the
OS image and kernel, allocatable GPUs), handed to the Runtime's node view
(reconcilers/node_view.py). Through kopf each of the thousands of node events at start-up
(the initial list, then every label the first pass writes, every kubelet heartbeat) cost a
worker task, cause building, kwargs wrappers and two handlers before our converter ran
(issue 13: start-up CPU).
"""

from __future__ import annotations

from ocp_gpu.kube import connecting, reading, watching
from ocp_gpu.model import nodes

# What the node watch hands its facts to (reconcilers/node_view.NodeView).
NodeSink = watching.Sink[nodes.NodeFacts]


class NodeWatch(watching.ObjectWatch[nodes.NodeFacts]):
    """List, then watch, every node of the cluster, forever (until cancelled)."""

    def __init__(
        self,
        login: connecting.Login,
        sink: NodeSink,
        *,
        watch_timeout_s: int = watching.WATCH_TIMEOUT_S,
    ) -> None:
        super().__init__(
            login,
            "/api/v1/nodes",
            reading.node_facts,
            sink,
            what="node watch",
            watch_timeout_s=watch_timeout_s,
        )

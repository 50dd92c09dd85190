"""Which per-node Events are said once for many nodes, and what that one Event says.

An admin does not want a hundred identical Events when the operator first labels a
hundred nodes: `kubectl get events` would scroll past everything else, and each one is
a write (and a watch event back) at start-up.  So a cause shared by many nodes in one
pass gets one Event naming the count and the first few nodes, as `kubectl` users know
from the controllers' aggregated Events.

Batched: the upgrade controller's first labelling of a node, `""` (never processed) ->
`upgrade-done` (its driver pod already current): nothing is upgraded, the node only
gets its starting label.  NOT batched: every transition of an upgrade, each node's Event
as the seed shows them (`kubectl get events | grep GPUDriverUpgrade`), the upgrade-done
that ends an upgrade included; and `""` -> `upgrade-required` (an upgrade starts there).

Decides only; never posts anything (reconcilers/upgrade_reconciler.py does, through kube/).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ocp_gpu.model import upgrade_observations
from ocp_gpu.model.upgrade_observations import UpgradeState

# How many node names one batched Event lists before "and N more".
SHOWN_NODES: Final = 10


def is_batched(state_before: UpgradeState, transition: UpgradeState | None) -> bool:
    """Whether this transition's Event is said once for all the nodes that make it in a pass."""
    # A node seen for the first time whose driver pod is already current: a starting label, no upgrade.
    return state_before is UpgradeState.UNKNOWN and transition is UpgradeState.UPGRADE_DONE


def batched_message(state: UpgradeState, nodes: Sequence[str], shown: int = SHOWN_NODES) -> str:
    """The one Event's message: the seed's words, the node count, the first `shown` nodes (sorted)."""
    names = sorted(nodes)
    listed = ", ".join(names[:shown])
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    noun = "node" if len(names) == 1 else "nodes"
    return f"{upgrade_observations.event_message(state)} on {len(names)} {noun}: {listed}{more}"

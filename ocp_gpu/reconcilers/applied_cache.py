"""What this process wrote and established, kept between passes so a quiet cluster sees no writes.

Only the passes change it.  NB: never "already applied" for an owned kind: whether an owned
object is as rendered is what the watches show (reconcilers/cluster_view.ClusterView.owned),
so that a deleted object is applied again.  Nothing here is read from the cluster
(reconcilers/cluster_view.py) or wakes a loop (reconcilers/scheduling.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ocp_gpu.model import nodes


@dataclasses.dataclass
class AppliedCache:
    """Facts established once, objects deleted, patches in flight, statuses and logs written."""

    # Facts this process established once, and objects of kinds no watch covers.
    applied: dict[tuple[str, str, str], str] = dataclasses.field(default_factory=dict)
    # Objects of disabled operands this process deleted (kind, namespace, name): not deleted again.
    removed: set[tuple[str, str, str]] = dataclasses.field(default_factory=set)
    # The pod security labels this process set on the operand namespace (psa.enabled).
    namespace_labelled: dict[str, str] | None = None
    # The label and annotation patches the main pass is writing, until the node watch shows them
    # (reconcilers/node_view: our own write coming back is progress, planning/urgency.is_own_echo).
    label_echoes: dict[nodes.NodeName, tuple[Mapping[str, str | None], Mapping[str, str | None]]] = (
        dataclasses.field(default_factory=dict)
    )
    # Nodes whose GPUs wait to change hands (device plugin <-> DRA) until their GPU pods are done:
    # planned again each pass (reconcilers/cluster.py, planning/operands/gpu_handover.py).
    handovers_waiting: set[nodes.NodeName] = dataclasses.field(default_factory=set)
    # Objects another operator made that adopt() took over this process ("Kind ns/name"), and the
    # ClusterPolicy uid whose leftovers were dealt with, and its status.migratedFrom.
    adopted: set[str] = dataclasses.field(default_factory=set)
    leftovers_done_for: str = ""
    migrated_from: dict[str, Any] | None = None
    # When this process last wrote each ClusterPolicy's status (event loop clock, seconds).
    status_written_at: dict[str, float] = dataclasses.field(default_factory=dict)
    # The active ClusterPolicy's name and its spec errors, as last logged (logged on change only).
    active_policy: str | None = None
    logged_spec_errors: str = ""
    # The active policy sets driver.useNvidiaDriverCRD (set by the main pass): which driver pods
    # the upgrade manages (planning.upgrades.pod_selection.driver_pod_selector).
    nvidia_driver_mode: bool = False

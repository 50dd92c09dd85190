"""Our operand DaemonSets' watch, outside kopf (kube/watching.py): one LIST, then one WATCH.

Only the DaemonSets we own (`app.kubernetes.io/managed-by=ocp-gpu`) in the operand namespace.
While a rollout brings up one pod per node for each of about ten operands, the DaemonSet
controller writes each DaemonSet's status again and again (pods scheduled, ready, available):
at start-up these were more of kopf's events than the nodes (issue 13, start-up CPU). Each
event is decoded once into both records the Runtime keeps of a DaemonSet: the planning and
status record (kube/reading.driver_daemonset) and the owned-object record that says whether
it is applied as rendered (kube/owning.observed_object).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

from ocp_gpu.kube import connecting, owning, reading, watching
from ocp_gpu.model import driver_snapshot, labels

# The owned-kind row these DaemonSets are (kopf watches every other owned kind).
KIND: Final = next(kind for kind in owning.OWNED_KINDS if kind.kind == "DaemonSet")


@dataclasses.dataclass(frozen=True)
class DaemonSetFacts:
    """One owned DaemonSet as the view keeps it."""

    name: str
    daemonset: driver_snapshot.DriverDaemonSet
    observed: owning.ObservedObject


def daemonset_facts(body: Mapping[str, Any]) -> DaemonSetFacts:
    """Both records of one DaemonSet, from its JSON (one pass per event)."""
    daemonset = reading.driver_daemonset(body)
    return DaemonSetFacts(daemonset.name, daemonset, owning.observed_object(body))


# What the DaemonSet watch hands its facts to (reconcilers/daemonset_view.DaemonSetView).
DaemonSetSink = watching.Sink[DaemonSetFacts]


class DaemonSetWatch(watching.ObjectWatch[DaemonSetFacts]):
    """List, then watch, our DaemonSets in the operand namespace, forever (until cancelled)."""

    def __init__(
        self,
        login: connecting.Login,
        namespace: str,
        sink: DaemonSetSink,
        *,
        watch_timeout_s: int = watching.WATCH_TIMEOUT_S,
    ) -> None:
        super().__init__(
            login,
            f"/apis/apps/v1/namespaces/{quote(namespace)}/daemonsets",
            daemonset_facts,
            sink,
            what="daemonset watch",
            selector=f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}",
            watch_timeout_s=watch_timeout_s,
        )

"""The operand pods' watch, outside kopf (kube/watching.py): one LIST, then one WATCH that stays open.

At 1,000 GPU nodes the operand namespace holds about 9,000 operand pods, each with several
watch events while it starts (created, bound, running, Ready). Through kopf every one cost a
worker task, cause building, kwargs wrappers, an index handler and an event handler, then
four converters parsing the same body (issue 13: start-up CPU). Here each event is decoded
once and turned into one `pods.PodFacts` (`pod_facts`), handed to a sink (the Runtime's pod
view, reconcilers/pod_view.py).

The stream (a paged LIST of the operand namespace's pods with the operand label selector,
then a WATCH that resumes, re-lists on 410 Gone and retries through an API server restart)
is kube/watching.py's, shared with the node watch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

from ocp_gpu.kube import connecting, reading, upgrading, watching
from ocp_gpu.model import labels, operand_types, pods
from ocp_gpu.planning.upgrades import pod_selection

# Every operand's pods (readiness per node for the status), driver and validator pods included.
OPERAND_POD_SELECTOR: Final = operand_types.OPERAND_POD_SELECTOR


def pod_facts(body: Mapping[str, Any]) -> pods.PodFacts:
    """Every fact the operator keeps of one operand pod, from its JSON (one pass per event)."""
    operand = reading.operand_pod(body)
    if operand.app == labels.VALIDATOR_APP:
        return pods.PodFacts(operand.name, operand, validator=upgrading.validator_pod(body))
    if ((body.get("metadata") or {}).get("labels") or {}).get(labels.COMPONENT) == labels.PREPULL_COMPONENT:
        # an OpenShift upgrade's pre-pull: whether its images can be pulled (the preflight says)
        return pods.PodFacts(operand.name, operand, pull=reading.prepull_pod_pull(body))
    # NB: driver pods of either mode are kept; the upgrade picks its mode's (rt.cache.nvidia_driver_mode).
    if pod_selection.is_any_driver_pod((body.get("metadata") or {}).get("labels") or {}):
        return pods.PodFacts(
            operand.name, operand, driver=upgrading.driver_pod(body), pull=reading.driver_pod_pull(body)
        )
    return pods.PodFacts(operand.name, operand)


# What the pod watch hands its facts to (reconcilers/pod_view.PodView).
PodSink = watching.Sink[pods.PodFacts]


class OperandsOnly:
    """A sink that passes on operand pods only: those whose app (operand_types.pod_app) is in `apps`
    (every operand's: rendering/operands/operand_catalog.POD_APPS, handed in by watches.py).

    NB: the watch's selector (`app` exists) cannot name a DTK driver pod's app (its DaemonSet's
    name), so the server sends every pod with an `app` label; the others stop here.
    """

    def __init__(self, sink: PodSink, apps: Collection[str]) -> None:
        self.sink = sink
        self.apps = frozenset(apps)

    def listed(self, facts: Sequence[pods.PodFacts]) -> None:
        self.sink.listed([f for f in facts if f.operand.app in self.apps])

    def seen(self, facts: pods.PodFacts) -> None:
        if facts.operand.app in self.apps:
            self.sink.seen(facts)
        else:
            # relabelled away from an operand, or never one: gone as far as the operator cares
            self.sink.gone(facts.name)

    def gone(self, name: str) -> None:
        self.sink.gone(name)


class PodWatch(watching.ObjectWatch[pods.PodFacts]):
    """List, then watch, the operand pods of one namespace, forever (until cancelled)."""

    def __init__(
        self,
        login: connecting.Login,
        namespace: str,
        sink: PodSink,
        *,
        apps: Collection[str],
        selector: str = OPERAND_POD_SELECTOR,
        watch_timeout_s: int = watching.WATCH_TIMEOUT_S,
    ) -> None:
        super().__init__(
            login,
            f"/api/v1/namespaces/{quote(namespace)}/pods",
            pod_facts,
            OperandsOnly(sink, apps),
            what="operand pod watch",
            selector=selector,
            watch_timeout_s=watch_timeout_s,
        )

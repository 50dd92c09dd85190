"""The Runtime's view of our operand DaemonSets, kept from their watch (kube/daemonset_watch.py).

Glue: what kopf's DaemonSet handlers did (the operand DaemonSets' and the owned objects'),
fed from our own watch.  Driver DaemonSets are kept by name for planning per key, the other
operands' by name for their status (`view.driver_daemonsets`, `view.operand_daemonsets`); each
also as an owned object (`view.owned`: applied hash and owner, so a pass re-applies only what
differs).  A change that only counts pods coming up is rollout progress (planning/urgency):
it may wait for the progress window; any other change wakes a pass (a DaemonSet becoming fully
scheduled too: the driver plan's handover to a replacement waits on it).
"""

from __future__ import annotations

from collections.abc import Iterable

from ocp_gpu.kube import daemonset_watch, owning
from ocp_gpu.model import labels
from ocp_gpu.planning import urgency
from ocp_gpu.reconcilers import runtime, watched_view


class DaemonSetView(watched_view.WatchedView[daemonset_watch.DaemonSetFacts]):
    """Keeps `view.driver_daemonsets`, `view.operand_daemonsets` and the DaemonSets of `view.owned`."""

    def __init__(self, rt: runtime.Runtime) -> None:
        super().__init__(rt, daemonset_watch.KIND.group, daemonset_watch.KIND.plural)

    def _ident(self, name: str) -> owning.ObjectIdent:
        return owning.ident(daemonset_watch.KIND.kind, self._namespace, name)

    def known(self) -> Iterable[str]:
        view = self._view
        owned = (name for kind, _, name in view.owned if kind == daemonset_watch.KIND.kind)
        return {*view.driver_daemonsets, *view.operand_daemonsets, *owned}

    def seen(self, facts: daemonset_watch.DaemonSetFacts) -> None:
        view, scheduler, daemonset = self._view, self._scheduler, facts.daemonset
        # Driver DaemonSets are planned per key; the other operands' are looked up by name.
        kept = (
            view.driver_daemonsets
            if daemonset.labels.get(labels.COMPONENT) == labels.DRIVER_COMPONENT
            else view.operand_daemonsets
        )
        before = kept.get(facts.name)
        if before != daemonset:
            kept[facts.name] = daemonset
            if urgency.is_progress(before, daemonset):
                # Pods coming up: the status's progress (and the upgrade loop) only.
                scheduler.mark_progress()
                scheduler.upgrade_wake.set()
            else:
                scheduler.mark_drivers()
        ident = self._ident(facts.name)
        if view.owned.get(ident) != facts.observed:
            view.owned[ident] = facts.observed
            scheduler.mark_owned()

    def gone(self, name: str) -> None:
        view, scheduler = self._view, self._scheduler
        popped = (view.driver_daemonsets.pop(name, None), view.operand_daemonsets.pop(name, None))
        if popped != (None, None):
            scheduler.mark_drivers()
        # Deleted by hand or garbage-collected: the next pass applies it again.
        if view.owned.pop(self._ident(name), None) is not None:
            scheduler.mark_owned()

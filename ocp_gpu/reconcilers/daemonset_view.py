"""The Runtime's view of our operand DaemonSets, kept from their watch (kube/daemonset_watch.py).

Glue: what kopf's DaemonSet handlers did (the operand DaemonSets' and the owned objects'),
fed from our own watch.  Driver DaemonSets are kept by name for planning per key, the other
operands' by name for their status (`rt.driver_daemonsets`, `rt.operand_daemonsets`); each
also as an owned object (`rt.owned`: applied hash and owner, so a pass re-applies only what
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
    """Keeps `rt.driver_daemonsets`, `rt.operand_daemonsets` and the DaemonSets of `rt.owned`."""

    def __init__(self, rt: runtime.Runtime) -> None:
        super().__init__(rt, daemonset_watch.KIND.group, daemonset_watch.KIND.plural)

    def _ident(self, name: str) -> owning.ObjectIdent:
        return owning.ident(daemonset_watch.KIND.kind, self._rt.namespace, name)

    def known(self) -> Iterable[str]:
        rt = self._rt
        owned = (name for kind, _, name in rt.owned if kind == daemonset_watch.KIND.kind)
        return {*rt.driver_daemonsets, *rt.operand_daemonsets, *owned}

    def seen(self, facts: daemonset_watch.DaemonSetFacts) -> None:
        rt, daemonset = self._rt, facts.daemonset
        # Driver DaemonSets are planned per key; the other operands' are looked up by name.
        kept = (
            rt.driver_daemonsets
            if daemonset.labels.get(labels.COMPONENT) == labels.DRIVER_COMPONENT
            else rt.operand_daemonsets
        )
        before = kept.get(facts.name)
        if before != daemonset:
            kept[facts.name] = daemonset
            if urgency.is_progress(before, daemonset):
                # Pods coming up: the status's progress (and the upgrade loop) only.
                rt.mark_progress()
                rt.upgrade_wake.set()
            else:
                rt.mark_drivers()
        ident = self._ident(facts.name)
        if rt.owned.get(ident) != facts.observed:
            rt.owned[ident] = facts.observed
            rt.mark_owned()

    def gone(self, name: str) -> None:
        rt = self._rt
        popped = (rt.driver_daemonsets.pop(name, None), rt.operand_daemonsets.pop(name, None))
        if popped != (None, None):
            rt.mark_drivers()
        # Deleted by hand or garbage-collected: the next pass applies it again.
        if rt.owned.pop(self._ident(name), None) is not None:
            rt.mark_owned()

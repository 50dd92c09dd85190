"""The Runtime's view of the operand pods, kept from the pod watch (kube/pod_watch.py).

Glue: what kopf's pod handlers did, fed from our own watch.  Every operand pod's readiness
(the status), validator and driver pods (the upgrade), driver pods' image pulls (the
precompiled fallback); a loop is woken only when what it reads changed.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from ocp_gpu.model import pods
from ocp_gpu.planning import urgency
from ocp_gpu.reconcilers import runtime, watched_view

# The kind the start-up barrier waits for (cluster_view.ClusterView.watch / mark_delivered).
KIND = "pods"


class PodView(watched_view.WatchedView[pods.PodFacts]):
    """Keeps the view's `operand_pods`, `validator_pods`, `driver_pods`, `driver_pod_pulls` and
    `pull_failing_since`."""

    def __init__(self, rt: runtime.Runtime) -> None:
        super().__init__(rt, "", KIND)

    def known(self) -> Iterable[str]:
        return self._view.operand_pods

    def seen(self, facts: pods.PodFacts) -> None:
        view, scheduler, name = self._view, self._scheduler, facts.name
        if view.operand_pods.get(name) != facts.operand:
            view.operand_pods[name] = facts.operand
            scheduler.mark_operands()
        if facts.validator is not None:
            was = view.validator_pods.get(name)
            if was != facts.validator:
                view.validator_pods[name] = facts.validator
                scheduler.mark_upgrades(
                    urgency.readies_validator(was, facts.validator, view.upgrade_state(facts.validator.node))
                )
        if facts.driver is not None:
            had = view.driver_pods.get(name)
            if had != facts.driver:
                view.driver_pods[name] = facts.driver
                state = view.upgrade_state(facts.driver.node)
                scheduler.mark_upgrades(urgency.readies_driver(had, facts.driver, state))
        if facts.pull is not None:
            pull = facts.pull
            view.driver_pod_pulls[name] = pull
            if pull.pull_failing and name not in view.pull_failing_since:
                # The first time we see it failing: the precompiled fallback's clock starts.
                view.pull_failing_since[name] = datetime.datetime.now(datetime.UTC)
                scheduler.mark_drivers()
            elif not pull.pull_failing and view.pull_failing_since.pop(name, None) is not None:
                scheduler.mark_drivers()

    def gone(self, name: str) -> None:
        view, scheduler = self._view, self._scheduler
        if view.operand_pods.pop(name, None) is not None:
            scheduler.mark_operands()
        view.driver_pod_pulls.pop(name, None)
        if view.driver_pods.pop(name, None) is not None or view.validator_pods.pop(name, None) is not None:
            scheduler.mark_upgrades()
        if view.pull_failing_since.pop(name, None) is not None:
            scheduler.mark_drivers()

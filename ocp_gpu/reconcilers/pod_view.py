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

# The kind the start-up barrier waits for (Runtime.watch / mark_delivered).
KIND = "pods"


class PodView(watched_view.WatchedView[pods.PodFacts]):
    """Keeps `rt.operand_pods`, `validator_pods`, `driver_pods`, `driver_pod_pulls`, `pull_failing_since`."""

    def __init__(self, rt: runtime.Runtime) -> None:
        super().__init__(rt, "", KIND)

    def known(self) -> Iterable[str]:
        return self._rt.operand_pods

    def seen(self, facts: pods.PodFacts) -> None:
        rt, name = self._rt, facts.name
        if rt.operand_pods.get(name) != facts.operand:
            rt.operand_pods[name] = facts.operand
            rt.mark_operands()
        if facts.validator is not None:
            was = rt.validator_pods.get(name)
            if was != facts.validator:
                rt.validator_pods[name] = facts.validator
                rt.mark_upgrades(
                    urgency.readies_validator(was, facts.validator, rt.upgrade_state(facts.validator.node))
                )
        if facts.driver is not None:
            had = rt.driver_pods.get(name)
            if had != facts.driver:
                rt.driver_pods[name] = facts.driver
                state = rt.upgrade_state(facts.driver.node)
                rt.mark_upgrades(urgency.readies_driver(had, facts.driver, state))
        if facts.pull is not None:
            pull = facts.pull
            rt.driver_pod_pulls[name] = pull
            if pull.pull_failing and name not in rt.pull_failing_since:
                # The first time we see it failing: the precompiled fallback's clock starts.
                rt.pull_failing_since[name] = datetime.datetime.now(datetime.UTC)
                rt.mark_drivers()
            elif not pull.pull_failing and rt.pull_failing_since.pop(name, None) is not None:
                rt.mark_drivers()

    def gone(self, name: str) -> None:
        rt = self._rt
        if rt.operand_pods.pop(name, None) is not None:
            rt.mark_operands()
        rt.driver_pod_pulls.pop(name, None)
        if rt.driver_pods.pop(name, None) is not None or rt.validator_pods.pop(name, None) is not None:
            rt.mark_upgrades()
        if rt.pull_failing_since.pop(name, None) is not None:
            rt.mark_drivers()

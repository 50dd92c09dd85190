"""What the operator keeps of one operand pod, read from its object once per watch event.

Every operand pod counts for readiness (the status); a validator pod also for the upgrade's
validation step; a driver pod (either mode) also for the upgrade and its image pull (the
precompiled fallback).  No I/O: kube/pod_watch.py builds these from the API's JSON.
"""

from __future__ import annotations

import dataclasses

from ocp_gpu.model import driver_snapshot, operand_types, upgrade_observations


@dataclasses.dataclass(frozen=True, slots=True)
class PodFacts:
    """One operand pod's every fact the watches keep (None where the pod is not of that kind)."""

    name: str
    operand: operand_types.OperandPod
    # Only for the validator's pods.
    validator: upgrade_observations.ValidatorPod | None = None
    # Only for driver pods (planning.upgrades.pod_selection.is_any_driver_pod), with their image pull.
    driver: upgrade_observations.DriverPod | None = None
    pull: driver_snapshot.DriverPodPull | None = None

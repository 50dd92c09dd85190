"""What is wrong with a ClusterPolicy, said so that an admin can fix it.

A problem names the field at fault (`spec.driver.upgradePolicy.drain.podSelector`),
says what is wrong, and says what to do.  Errors stop the part of the stack the
field configures; warnings are reported and the operator carries on.

Kept apart from `policy` so that `images` can report problems without importing
the policy model (which imports `images`).
"""

from __future__ import annotations

import dataclasses
import enum


class Severity(enum.StrEnum):
    # The operator cannot act on what this field configures until it is fixed.
    ERROR = "error"
    # Probably not what the admin meant; the operator carries on.
    WARNING = "warning"


@dataclasses.dataclass(frozen=True)
class PolicyProblem:
    """One semantic problem with a ClusterPolicy, for status conditions and `ocp-gpu render`."""

    # The wire path of the field at fault, e.g. "spec.driver.version".
    field: str
    # What is wrong, naming the offending value.
    message: str
    # What to do about it.
    fix: str
    severity: Severity = Severity.ERROR

    def __str__(self) -> str:
        return f"{self.field}: {self.message} ({self.fix})"

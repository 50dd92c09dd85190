"""The ClusterPolicy's status: its state, conditions and driver summary, from what one pass found.

Decides, from the policy's problems, the writes that failed, the driver plan and its
coverage, the operands not ready yet and the other findings of a pass, the status the
cluster reconciler writes (`PolicyStatus`) and which of its conditions also become an
Event.  Merging with the stored conditions (lastTransitionTime) is planning/status/conditions.py's;
the health gauge's value is planning/status/operator_health.py's.  Never reads the cluster,
the clock or a metric, and never writes anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ocp_gpu.model.driver_snapshot import DriverDaemonSet
from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity
from ocp_gpu.planning.drivers import driver_coverage
from ocp_gpu.planning.drivers.driver_plan import DriverPlan
from ocp_gpu.planning.operands import mig_planning, monitoring_planning
from ocp_gpu.planning.status import conditions, operator_health
from ocp_gpu.planning.upgrades import upgrade_preflight

# status.state, as NVIDIA's ClusterPolicy writes it.
STATE_READY: Final = "ready"
STATE_NOT_READY: Final = "notReady"
# Not the oldest ClusterPolicy: another one is active (planning/status/policies.py).
STATE_IGNORED: Final = "ignored"
# How many not-ready nodes the OperandNotReady message names per operand.
UNREADY_NODES_NAMED: Final = 3
# A field accepted for compatibility with NVIDIA's schema that ocp-gpu does not act on
# (model/policy/fields.py).
UNSUPPORTED: Final = "UnsupportedSetting"
# Driver pods made from an older template of their DaemonSet, current by planning/driver_currency.
PREVIOUS_TEMPLATE: Final = "DriverPodsOnPreviousTemplate"
# A node's MIG reconfiguration failed (nvidia.com/mig.config.state=failed).
MIG_CONFIG_FAILED: Final = "MIGConfigFailed"
# Conditions that also become an Event when they appear or change: type -> (reason, Event type).
EVENTED: Final[Mapping[str, tuple[str, str]]] = {
    "Error": ("InvalidClusterPolicy", "Warning"),
    "DriverToolkitImageMissing": ("DriverToolkitImageMissing", "Warning"),
    "DriverToolkitImageStreamProblem": ("DriverToolkitImageStreamProblem", "Warning"),
    "NodeFeatureLabelStale": ("NodeFeatureLabelStale", "Warning"),
    "NodeFeatureLabelsMissing": ("NodeFeatureLabelsMissing", "Warning"),
    "DriverDaemonSetDeferred": ("DriverDaemonSetDeferred", "Warning"),
    # Nodes kept on a driver newer than the release default (planning/drivers/driver_plan.py).
    "DriverNewerThanDefault": ("DriverNewerThanDefault", "Warning"),
    monitoring_planning.MonitoringUnavailable.reason: (
        monitoring_planning.MonitoringUnavailable.reason,
        "Warning",
    ),
    UNSUPPORTED: (UNSUPPORTED, "Warning"),
    MIG_CONFIG_FAILED: (MIG_CONFIG_FAILED, "Warning"),
    PREVIOUS_TEMPLATE: (PREVIOUS_TEMPLATE, "Normal"),
}
# Conditions that become an Event when they turn False (a check that did not pass), reason from the condition.
EVENTED_WHEN_FALSE: Final[Mapping[str, str]] = {upgrade_preflight.CONDITION: "Warning"}


@dataclasses.dataclass(frozen=True)
class DriverSummary:
    """One entry of status.driverDaemonSets."""

    name: str
    key: str
    image: str
    dtk_image: str
    # The nodes the DaemonSet selects (planned) or schedules (observed).
    nodes: int
    ready: int
    # Every pod the DaemonSet controller wants is Ready (opted-out nodes do not count); not
    # written: it decides whether the driver is "not ready" in the Ready condition.
    complete: bool

    def wire(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "image": self.image,
            "dtkImage": self.dtk_image,
            "nodes": self.nodes,
            "ready": self.ready,
        }


@dataclasses.dataclass(frozen=True)
class PolicyStatus:
    """A ClusterPolicy's status as decided this pass (without observedGeneration and merge)."""

    state: str
    conditions: tuple[conditions.Condition, ...]
    # Only the active policy's status names these (None: not written).
    namespace: str | None = None
    platform: str | None = None
    driver_daemonsets: tuple[DriverSummary, ...] | None = None
    # What was taken over from another operator (takeover.migrated_from); None: nothing.
    migrated_from: Mapping[str, Any] | None = None
    # The gpu_operator_reconciliation_status value this status means (active policy only).
    health: operator_health.ReconciliationStatus | None = None

    def wire(self) -> dict[str, Any]:
        """The status fields other than conditions and observedGeneration, as written."""
        found: dict[str, Any] = {"state": self.state}
        if self.namespace is not None:
            found["namespace"] = self.namespace
        if self.platform is not None:
            found["platform"] = self.platform
        if self.driver_daemonsets is not None:
            found["driverDaemonSets"] = [entry.wire() for entry in self.driver_daemonsets]
        if self.migrated_from is not None:
            found["migratedFrom"] = dict(self.migrated_from)
        return found


@dataclasses.dataclass(frozen=True)
class StatusEvent:
    """An Event to post about the policy: a condition that appeared or changed."""

    reason: str
    message: str
    type: str


def plan_driver_summary(
    plan: DriverPlan | None,
    coverage: driver_coverage.DriverCoverage | None,
    observed: Mapping[str, DriverDaemonSet],
) -> tuple[DriverSummary, ...]:
    """One entry per desired driver DaemonSet: its key, images, the nodes it selects and ready pods."""
    if plan is None or coverage is None:
        # No plan this pass (an invalid spec, an image that cannot be resolved): the
        # DaemonSets keep running, so describe them as they are.
        return observed_driver_summary(observed.values())
    summary = []
    for entry in plan.desired:
        live = observed.get(entry.name)
        summary.append(
            DriverSummary(
                name=entry.name,
                key=str(entry.key),
                image=entry.driver_image,
                dtk_image=entry.dtk_image or "",
                # Nodes the DaemonSet selects: the key's nodes less the admin's opt-outs.
                nodes=len(coverage.selected.get(entry.name, ())),
                ready=live.number_ready if live else 0,
                complete=live is not None
                and live.status_is_current
                and live.number_ready == live.desired_number_scheduled,
            )
        )
    return tuple(summary)


def observed_driver_summary(daemonsets: Iterable[DriverDaemonSet]) -> tuple[DriverSummary, ...]:
    """The driver DaemonSets as the watch sees them (nodes: what the DaemonSet controller schedules)."""
    return tuple(
        DriverSummary(
            name=daemonset.name,
            key=daemonset.key or "",
            image=daemonset.image,
            dtk_image=daemonset.dtk_image or "",
            nodes=daemonset.desired_number_scheduled,
            ready=daemonset.number_ready,
            complete=daemonset.status_is_current
            and daemonset.number_ready == daemonset.desired_number_scheduled,
        )
        for daemonset in sorted(daemonsets, key=lambda d: d.name)
    )


@dataclasses.dataclass(frozen=True)
class PassOutcome:
    """What one pass for the active ClusterPolicy found and did, as the status needs it."""

    namespace: str
    # The platform's wire value ("openshift", "kubernetes").
    platform: str
    # The spec's problems, then the pass's (an image that cannot be resolved).
    problems: Sequence[PolicyProblem]
    # Writes that failed, by object.
    apply_errors: Mapping[str, str]
    # None when nothing was planned (an invalid spec, an unresolvable image).
    plan: DriverPlan | None
    coverage: driver_coverage.DriverCoverage | None
    summary: Sequence[DriverSummary]
    # Per operand, the GPU nodes that should run it and have no Ready pod yet.
    unready_nodes: Mapping[str, Sequence[str]]
    gpu_nodes: int
    # The operands whose DaemonSet rolls out a new template (planning/operands/operand_planning.
    # rolling_generations), and whether the DaemonSets update OnDelete (spec.daemonsets.updateStrategy).
    rolling_out: frozenset[str] = frozenset()
    update_on_delete: bool = False
    # Why a ServiceMonitor cannot exist, if one was asked for.
    monitoring_problems: Sequence[str] = ()
    # The settings accepted for compatibility but not acted on, described ("" when none).
    unsupported: str = ""
    # The nodes whose MIG reconfiguration failed.
    mig_failed: Sequence[mig_planning.MigNodeState] = ()
    # During an OpenShift upgrade: whether its RHCOS builds are ready for the GPU nodes.
    preflight: conditions.Condition | None = None
    # driver_check.describe_previous_template: driver pods current on an older template ("": none).
    previous_template: str = ""
    # takeover.migrated_from, once another operator's objects were taken over (None: never).
    migrated_from: Mapping[str, Any] | None = None


def plan_active_status(outcome: PassOutcome) -> PolicyStatus:
    """The active ClusterPolicy's status."""
    errors = [p for p in outcome.problems if p.severity is Severity.ERROR]
    found = _ready_and_error(outcome, errors)
    warnings = [p for p in outcome.problems if p.severity is not Severity.ERROR]
    if warnings:
        # the spec works but something in it deserves the admin's eye
        message = "; ".join(f"{p.field}: {p.message} (fix: {p.fix})" for p in warnings)
        found.append(conditions.Condition("Warning", True, "SpecWarning", message))
    if outcome.plan is not None:
        found.extend(finding_conditions(outcome.plan))
    state = STATE_READY if found[0].status else STATE_NOT_READY
    if outcome.monitoring_problems:
        # asked for a ServiceMonitor where none can exist: say so, go on
        reason = monitoring_planning.MonitoringUnavailable.reason
        found.append(conditions.Condition(reason, True, reason, " ".join(outcome.monitoring_problems)))
    if outcome.unsupported:
        # accepted for compatibility with NVIDIA's schema, not acted on: say so, change nothing else
        found.append(conditions.Condition(UNSUPPORTED, True, UNSUPPORTED, outcome.unsupported))
    if outcome.previous_template:
        # not a problem: a new operator (or a template change) is not a new driver; said once as an Event
        found.append(
            conditions.Condition(PREVIOUS_TEMPLATE, True, PREVIOUS_TEMPLATE, outcome.previous_template)
        )
    if outcome.mig_failed:
        # a node's GPUs kept their old MIG layout: not the policy's fault (the state stays),
        # but an admin must look (a condition and an Event)
        message = mig_planning.describe_failed(list(outcome.mig_failed))
        found.append(conditions.Condition(MIG_CONFIG_FAILED, True, MIG_CONFIG_FAILED, message))
    if outcome.preflight is not None:
        # an OpenShift upgrade is being applied: what its new RHCOS builds find (planning/upgrade_preflight)
        found.append(outcome.preflight)
    return PolicyStatus(
        state=state,
        conditions=tuple(found),
        namespace=outcome.namespace,
        platform=outcome.platform,
        driver_daemonsets=tuple(outcome.summary),
        migrated_from=outcome.migrated_from,
        health=operator_health.reconciliation_status(
            has_policy=True,
            spec_errors=bool(errors),
            apply_errors=bool(outcome.apply_errors),
            ready=state == STATE_READY,
        ),
    )


def finding_conditions(plan: DriverPlan) -> list[conditions.Condition]:
    """One condition per kind of driver finding, its messages joined (a ClusterPolicy's or an
    NVIDIADriver's status)."""
    by_reason: dict[str, list[str]] = {}
    for finding in plan.findings:
        by_reason.setdefault(finding.reason, []).append(finding.message)
    return [
        conditions.Condition(reason, True, reason, "; ".join(messages))
        for reason, messages in sorted(by_reason.items())
    ]


def _ready_and_error(outcome: PassOutcome, errors: Sequence[PolicyProblem]) -> list[conditions.Condition]:
    """The Ready and Error conditions: the first situation that holds decides both."""
    unready = [entry.name for entry in outcome.summary if not entry.complete]
    if errors:
        # the spec cannot be used: nothing is applied or deleted
        message = "; ".join(f"{p.field}: {p.message} (fix: {p.fix})" for p in errors)
        return [
            conditions.Condition("Ready", False, "InvalidSpec", message),
            conditions.Condition("Error", True, "InvalidSpec", message),
        ]
    if outcome.apply_errors:
        # planned writes the API refused
        message = "; ".join(f"{what}: {error}" for what, error in sorted(outcome.apply_errors.items()))
        return [
            conditions.Condition("Ready", False, "ApplyFailed", message),
            conditions.Condition("Error", True, "ApplyFailed", message),
        ]
    coverage, plan = outcome.coverage, outcome.plan
    if coverage is not None and coverage.uncovered and plan is not None:
        # a GPU node that no driver DaemonSet selects is never "ready" (DESIGN §4)
        message = driver_coverage.describe_uncovered(coverage.uncovered, plan.findings)
        return [
            conditions.Condition("Ready", False, "GPUNodesWithoutDriver", message),
            conditions.Condition("Error", False, "Reconciled", ""),
        ]
    if unready or outcome.unready_nodes:
        # everything applied, pods still coming up
        parts = [f"pods not ready in {', '.join(unready)}"] if unready else []
        for name, nodes in outcome.unready_nodes.items():
            more = f" (+{len(nodes) - UNREADY_NODES_NAMED} more)" if len(nodes) > UNREADY_NODES_NAMED else ""
            why = _rolling_words(outcome) if name in outcome.rolling_out else ""
            parts.append(f"{name} not ready on {', '.join(nodes[:UNREADY_NODES_NAMED])}{more}{why}")
        return [
            conditions.Condition("Ready", False, "OperandNotReady", "; ".join(parts)),
            conditions.Condition("Error", False, "Reconciled", ""),
        ]
    # everything applied and running
    message = (
        f"{outcome.gpu_nodes} GPU node(s), {len(outcome.summary)} driver DaemonSet(s) on {outcome.platform}"
    )
    return [
        conditions.Condition("Ready", True, "Reconciled", message),
        conditions.Condition("Error", False, "Reconciled", ""),
    ]


def _rolling_words(outcome: PassOutcome) -> str:
    """Why a node with a Ready pod of an operand rolling out counts as not ready."""
    if outcome.update_on_delete:
        # NB: nothing replaces those pods by itself: the admin has to (NVIDIA's notReady says no more).
        return (
            " (a new template: spec.daemonsets.updateStrategy is OnDelete, delete the pods of the"
            " previous one to roll them)"
        )
    return " (rolling out a new template)"


def ignored_status(message: str) -> PolicyStatus:
    """The status of a ClusterPolicy that is not the active one, and why."""
    return PolicyStatus(
        state=STATE_IGNORED,
        conditions=(
            conditions.Condition("Ready", False, "Ignored", message),
            conditions.Condition("Error", False, "Ignored", ""),
        ),
    )


def plan_status_events(status: PolicyStatus, previous_messages: Iterable[str]) -> list[StatusEvent]:
    """The Events a new status deserves: each evented condition that is true with a new message.

    `previous_messages`: the messages of the stored conditions that were true, so a
    problem is posted once, not on every pass while the status holds it.
    """
    before = set(previous_messages)
    found = []
    for condition in status.conditions:
        if not condition.status and condition.type in EVENTED_WHEN_FALSE and condition.message not in before:
            # a check that did not pass, new or different: say it once as an Event too
            found.append(StatusEvent(condition.reason, condition.message, EVENTED_WHEN_FALSE[condition.type]))
            continue
        if condition.status and condition.type in EVENTED and condition.message not in before:
            # a new or different problem: say it once as an Event too
            reason, event_type = EVENTED[condition.type]
            found.append(
                StatusEvent(
                    reason=reason if condition.type == "Error" else condition.reason,
                    message=condition.message,
                    type=event_type,
                )
            )
    return found


def true_condition_messages(stored: Mapping[str, Any]) -> set[str]:
    """The messages of a stored status's true conditions, and of its false ones evented when
    false (plan_status_events' `previous_messages`: what was said already)."""
    return {
        str(item.get("message", ""))
        for item in stored.get("conditions") or []
        if item.get("status") == "True"
        or (item.get("status") == "False" and item.get("type") in EVENTED_WHEN_FALSE)
    }


def ready_message(stored: Mapping[str, Any]) -> str:
    """The message of a stored status's Ready condition ("" when there is none)."""
    return next(
        (str(c.get("message", "")) for c in stored.get("conditions") or [] if c.get("type") == "Ready"), ""
    )

"""The driver upgrade state machine as one table, `TABLE`, and the conditions and work it names.

For each state of the label `nvidia.com/gpu-driver-upgrade-state`: its meaning, the work
done while a node stays in it, the edges that leave it (tried in order; the first whose
condition holds is taken), and its timeout.  `docs/upgrade-state-machine.md` is generated
from it (hack/gen_upgrade_docs.py).  Each condition sees one node as a `Context`.  Never
reads the cluster or the clock: `planning.upgrades.upgrade_plan` builds the contexts and walks the table.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from ocp_gpu.model import labels, upgrade_observations
from ocp_gpu.model.policy import selectors
from ocp_gpu.model.policy.policy_spec import DEFAULT_VALIDATION_TIMEOUT_SECONDS, UpgradePolicy
from ocp_gpu.model.resource_claims import ClaimHold
from ocp_gpu.model.upgrade_observations import PodRef, UpgradeNode, UpgradeState, ValidatorPod, WorkloadPod
from ocp_gpu.planning.drivers.driver_check import DRIVER_RESTART_LIMIT, DriverCheck, DriverStatus
from ocp_gpu.planning.upgrades.pod_selection import (
    drain_pods,
    drain_selector,
    gpu_pods,
    selector_matches,
    why_not_deletable,
    why_not_drainable,
)
from ocp_gpu.planning.upgrades.upgrade_actions import (
    Action,
    Cordon,
    DeleteDriverPod,
    DeletePods,
    EvictPods,
    Uncordon,
)

S = UpgradeState

# States between a granted slot and upgrade-done: each holds one of maxParallelUpgrades.
IN_PROGRESS: Final = frozenset(
    {
        S.CORDON_REQUIRED,
        S.WAIT_FOR_JOBS_REQUIRED,
        S.POD_DELETION_REQUIRED,
        S.DRAIN_REQUIRED,
        S.POD_RESTART_REQUIRED,
        S.VALIDATION_REQUIRED,
        S.UNCORDON_REQUIRED,
    }
)
# NB: a failed node keeps its slot (as NVIDIA's does), so a driver that fails stops the
# rollout at maxParallelUpgrades nodes instead of failing node after node.
HOLDS_SLOT: Final = IN_PROGRESS | {S.UPGRADE_FAILED}
# States with no upgrade under way on the node.
IDLE: Final = frozenset({S.UNKNOWN, S.UPGRADE_DONE, S.UPGRADE_REQUIRED})
# NVIDIA's fixed validation timeout.
VALIDATION_TIMEOUT_SECONDS: Final = DEFAULT_VALIDATION_TIMEOUT_SECONDS


def _names(pods: Sequence[WorkloadPod] | Sequence[PodRef], limit: int = 3) -> str:
    refs = [p.ref if isinstance(p, WorkloadPod) else p for p in pods]
    shown = ", ".join(str(ref) for ref in refs[:limit])
    return shown + (f" and {len(refs) - limit} more" if len(refs) > limit else "")


# --- the context a rule decides on ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Context:
    """One node as a rule of the table sees it."""

    node: UpgradeNode
    driver: DriverStatus
    policy: UpgradePolicy
    now: datetime.datetime
    # The node's pods; None when they were not read this pass.
    pods: tuple[WorkloadPod, ...] | None
    # What each ResourceClaim holds (UpgradeSnapshot.claims); None: unknown.
    claims: Mapping[str, ClaimHold] | None
    validator_deployed: bool
    validators: tuple[ValidatorPod, ...]
    # An upgrade slot was granted to this node this pass.
    granted: bool
    # Why no slot was granted ("" when one was, or none was asked for).
    slot_wait: str
    # The current state's timeout in seconds (0: none) and the time spent so far (None: timer not started).
    timeout: int
    elapsed: datetime.timedelta | None

    @property
    def holds_cordon(self) -> bool:
        """The node's cordon is the upgrade's own, so finishing the upgrade lifts it."""
        return self.node.cordoned_by_upgrade and not self.node.initially_unschedulable

    @property
    def expired(self) -> bool:
        return timed_out(self.timeout, self.elapsed)


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def timed_out(timeout: int, elapsed: datetime.timedelta | None) -> bool:
    """Whether a wait with this timeout in seconds (0: none) has outlasted it; `elapsed` None: its
    timer has not started.  Also the workload moves' drain timeout (planning/operands/workload_moves.py)."""
    return timeout > 0 and elapsed is not None and elapsed.total_seconds() > timeout


def timeout_note(timeout: int, elapsed: datetime.timedelta | None, field: str) -> str:
    """'(timeout 5m00s, 3m10s left)', for the why-waiting strings (`field`: where the timeout is set)."""
    if timeout <= 0:
        return f"(no timeout: {field} is 0)"
    if elapsed is None:
        return f"(timeout {_duration(timeout)}, starting now)"
    return f"(timeout {_duration(timeout)}, {_duration(timeout - elapsed.total_seconds())} left)"


def _timeout_note(ctx: Context, field: str) -> str:
    return timeout_note(ctx.timeout, ctx.elapsed, field)


# --- conditions (guards) and work, named for the table ---------------------------------------


def _always(ctx: Context) -> bool:
    return True


def _current(ctx: Context) -> bool:
    return ctx.driver.current


def _outdated(ctx: Context) -> bool:
    return ctx.driver.check is DriverCheck.OUTDATED


# NB: as NVIDIA's library, a skipped node with an outdated driver is labelled upgrade-required
# (and waits there without a slot), never left claiming upgrade-done.
OUTDATED_EDGE: Final = "driver pod outdated (a node with the skip label waits in upgrade-required)"


def _slot_granted(ctx: Context) -> bool:
    return ctx.granted


def _selector_error(selector: str) -> str | None:
    try:
        selectors.parse_label_selector(selector)
    except ValueError as error:
        return str(error)
    return None


def _running_jobs(ctx: Context) -> tuple[WorkloadPod, ...] | None:
    """Pods matching waitForCompletion.podSelector still Pending/Running; None when unknown."""
    selector = ctx.policy.wait_for_completion.pod_selector
    if ctx.pods is None or _selector_error(selector):
        return None
    return tuple(pod for pod in ctx.pods if pod.active and selector_matches(selector, pod.labels))


def _jobs_done(ctx: Context) -> bool:
    if not ctx.policy.wait_for_completion.pod_selector.strip():
        # "" waits for no pods.
        return True
    return _running_jobs(ctx) == ()


def _blocked_gpu_pods(ctx: Context) -> tuple[WorkloadPod, ...]:
    return tuple(pod for pod in gpu_pods(ctx.pods or (), ctx.claims) if why_not_deletable(pod, ctx.policy))


def _no_gpu_pods(ctx: Context) -> bool:
    return ctx.pods is not None and not gpu_pods(ctx.pods, ctx.claims)


def _deletion_failed(ctx: Context) -> bool:
    # Some GPU pod may not be deleted at all (NVIDIA checks before deleting any), or time ran out.
    return ctx.pods is not None and (bool(_blocked_gpu_pods(ctx)) or ctx.expired)


def _deletion_failed_drain_on(ctx: Context) -> bool:
    return ctx.policy.drain.enable and _deletion_failed(ctx)


def _delete_gpu_pods(ctx: Context) -> tuple[Action, ...]:
    if ctx.pods is None or _blocked_gpu_pods(ctx):
        return ()
    doomed = tuple(pod.ref for pod in gpu_pods(ctx.pods, ctx.claims) if not pod.terminating)
    return (DeletePods(doomed),) if doomed else ()


def _drain_disabled(ctx: Context) -> bool:
    return not ctx.policy.drain.enable


def _drain_targets(ctx: Context) -> tuple[WorkloadPod, ...] | None:
    if ctx.pods is None or _selector_error(drain_selector(ctx.policy)):
        return None
    return drain_pods(ctx.pods, ctx.policy)


def _drain_blocked(ctx: Context) -> bool:
    targets = _drain_targets(ctx)
    return bool(targets) and any(why_not_drainable(pod, ctx.policy) for pod in targets or ())


def _drained(ctx: Context) -> bool:
    return _drain_targets(ctx) == ()


def _drain_failed(ctx: Context) -> bool:
    return _drain_blocked(ctx) or (ctx.expired and _drain_targets(ctx) is not None)


def _evict_pods(ctx: Context) -> tuple[Action, ...]:
    targets = _drain_targets(ctx)
    if not targets or _drain_blocked(ctx):
        return ()
    evict = tuple(pod.ref for pod in targets if not pod.terminating)
    return (EvictPods(evict),) if evict else ()


def _driver_ready(ctx: Context) -> bool:
    return ctx.driver.check is DriverCheck.READY


def _driver_ready_validator(ctx: Context) -> bool:
    return _driver_ready(ctx) and ctx.validator_deployed


def _driver_ready_holding_cordon(ctx: Context) -> bool:
    return _driver_ready(ctx) and ctx.holds_cordon


def _driver_failing(ctx: Context) -> bool:
    return ctx.driver.check is DriverCheck.FAILING


def _restart_driver(ctx: Context) -> tuple[Action, ...]:
    pod = ctx.driver.pod
    if ctx.driver.check is DriverCheck.OUTDATED and pod is not None and not pod.terminating:
        return (DeleteDriverPod(pod.ref),)
    return ()


def _validated(ctx: Context) -> bool:
    if not ctx.validator_deployed:
        # No validator component: nothing to wait for.
        return True
    return bool(ctx.validators) and all(pod.ready for pod in ctx.validators)


def _validated_holding_cordon(ctx: Context) -> bool:
    return _validated(ctx) and ctx.holds_cordon


def _healthy(ctx: Context) -> bool:
    # NB: driver Ready alone is not enough: a validation timeout would flip back at once.
    return _driver_ready(ctx) and _validated(ctx)


def _healthy_holding_cordon(ctx: Context) -> bool:
    return _healthy(ctx) and ctx.holds_cordon


def _cordon(ctx: Context) -> tuple[Action, ...]:
    if ctx.node.unschedulable:
        # Already cordoned by someone else (admin, MCO): that cordon is not ours to lift later.
        return ()
    marks: dict[str, str | None] = {upgrade_observations.CORDONED_BY_UPGRADE: "true"}
    if ctx.node.initially_unschedulable:
        # NB: someone else's cordon was recorded as the node entered the upgrade and lifted since
        # (an MCO update that finished quickly): the record is stale, and the cordon made now is
        # the upgrade's own, to be lifted at the end (found by bench/chaos_apiserver.py).
        marks[upgrade_observations.INITIAL_UNSCHEDULABLE] = None
    return (Cordon(marks),)


def _uncordon(ctx: Context) -> tuple[Action, ...]:
    return (Uncordon(),) if ctx.holds_cordon and ctx.node.unschedulable else ()


def _record_admin_cordon(ctx: Context) -> Mapping[str, str | None]:
    if ctx.node.unschedulable and not ctx.node.cordoned_by_upgrade:
        # Unschedulable before the upgrade cordons it: the admin's, never lifted (DESIGN §6).
        return {upgrade_observations.INITIAL_UNSCHEDULABLE: "true"}
    return {}


def forget_cordon(ctx: Context) -> Mapping[str, str | None]:
    changes: dict[str, str | None] = {}
    if ctx.node.initially_unschedulable:
        changes[upgrade_observations.INITIAL_UNSCHEDULABLE] = None
    if ctx.node.cordoned_by_upgrade:
        changes[upgrade_observations.CORDONED_BY_UPGRADE] = None
    return changes


# --- why a node waits ------------------------------------------------------------------------


def _wait_idle(ctx: Context) -> str:
    if ctx.driver.check is DriverCheck.OUTDATED and ctx.node.skip:
        return f"{ctx.driver.detail}; skipped: {labels.UPGRADE_SKIP}=true"
    if ctx.driver.check in (DriverCheck.MISSING, DriverCheck.NO_REVISION):
        return ctx.driver.detail
    return ""


def _wait_slot(ctx: Context) -> str:
    if ctx.node.skip:
        return f"skipped: {labels.UPGRADE_SKIP}=true"
    if ctx.driver.check is DriverCheck.OUTDATED and ctx.driver.pod and ctx.driver.pod.terminating:
        return f"{ctx.driver.detail}: waiting for its replacement"
    if ctx.driver.check is not DriverCheck.OUTDATED:
        return ctx.driver.detail
    return ctx.slot_wait


def _wait_jobs(ctx: Context) -> str:
    selector = ctx.policy.wait_for_completion.pod_selector
    if error := _selector_error(selector):
        return f"waitForCompletion.podSelector {selector!r} is invalid: {error}"
    running = _running_jobs(ctx)
    if running is None:
        return "the pods on this node were not read this pass"
    note = _timeout_note(ctx, "waitForCompletion.timeoutSeconds")
    return f"waiting for {len(running)} pod(s) matching {selector!r} to complete: {_names(running)} {note}"


def _wait_deletion(ctx: Context) -> str:
    if ctx.pods is None:
        return "the pods on this node were not read this pass"
    left = gpu_pods(ctx.pods, ctx.claims)
    note = _timeout_note(ctx, "gpuPodDeletion.timeoutSeconds")
    return f"deleting {len(left)} GPU pod(s): {_names(left)} {note}"


def _wait_drain(ctx: Context) -> str:
    if error := _selector_error(drain_selector(ctx.policy)):
        return f"drain.podSelector {ctx.policy.drain.pod_selector!r} is invalid: {error}"
    targets = _drain_targets(ctx)
    if targets is None:
        return "the pods on this node were not read this pass"
    note = _timeout_note(ctx, "drain.timeoutSeconds")
    return (
        f"evicting {len(targets)} pod(s): {_names(targets)} {note}; "
        "a PodDisruptionBudget may be refusing evictions"
    )


def _wait_restart(ctx: Context) -> str:
    note = _timeout_note(ctx, "OCP_GPU_DRIVER_RESTART_TIMEOUT_SECONDS")
    if ctx.driver.check is DriverCheck.OUTDATED:
        return f"{ctx.driver.detail}: restarting it {note}"
    return f"{ctx.driver.detail} {note}"


def _wait_validation(ctx: Context) -> str:
    note = _timeout_note(ctx, "")
    if not ctx.validators:
        return f"waiting for a validator pod ({upgrade_observations.VALIDATOR_SELECTOR}) on the node {note}"
    unready = [pod.ref for pod in ctx.validators if not pod.ready]
    return f"waiting for validator pod(s) {_names(unready)} to be Ready {note}"


def _wait_failed(ctx: Context) -> str:
    return (
        f"{ctx.driver.detail}; after fixing the cause, relabel the node "
        f"{labels.UPGRADE_STATE}=upgrade-required to retry"
    )


def _wait_nothing(ctx: Context) -> str:
    return ""


# --- the table ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Timeout:
    """How long a node may stay in a state; 0 means forever."""

    # Where the number comes from, for the docs.
    source: str
    seconds: Callable[[UpgradePolicy], int]


@dataclasses.dataclass(frozen=True)
class Edge:
    """One way out of a state: taken when `condition` holds, after `actions` succeeded."""

    target: UpgradeState
    # The condition in words (docs and diagram).
    when: str
    condition: Callable[[Context], bool]
    actions: Callable[[Context], tuple[Action, ...]] | None = None
    # The actions in words ("" when none).
    doing: str = ""


@dataclasses.dataclass(frozen=True)
class Rule:
    """Everything about one state."""

    state: UpgradeState
    meaning: str
    edges: tuple[Edge, ...]
    # Why a node that stays is waiting (for `ocp-gpu status`).
    wait: Callable[[Context], str]
    # Work done on every pass the node stays (none for most states).
    work: Callable[[Context], tuple[Action, ...]] | None = None
    work_doing: str = ""
    # The annotation that records when a node entered the state (set with the transition into it).
    timer: str | None = None
    timeout: Timeout | None = None
    # Annotations written with the transition into this state, and what they mean.
    on_enter: Callable[[Context], Mapping[str, str | None]] | None = None
    on_enter_doing: str = ""
    # Annotations written while a node stays (cleanup).
    on_stay: Callable[[Context], Mapping[str, str | None]] | None = None


_SKIPS_AHEAD = Edge(
    S.POD_RESTART_REQUIRED,
    "driver pod already current (replaced outside the upgrade, e.g. by a new RHCOS DaemonSet)",
    _current,
)

TABLE: Final[Mapping[UpgradeState, Rule]] = {
    rule.state: rule
    for rule in (
        Rule(
            S.UNKNOWN,
            "The node has not been processed yet (or the controller was off).",
            edges=(
                Edge(
                    S.UPGRADE_DONE,
                    "driver pod current",
                    _current,
                    _uncordon,
                    "uncordon if the upgrade's own cordon is still there (label removed by hand)",
                ),
                Edge(S.UPGRADE_REQUIRED, OUTDATED_EDGE, _outdated),
            ),
            wait=_wait_idle,
        ),
        Rule(
            S.UPGRADE_DONE,
            "The driver pod is current.",
            edges=(Edge(S.UPGRADE_REQUIRED, OUTDATED_EDGE, _outdated),),
            wait=_wait_idle,
            work=_uncordon,
            work_doing="uncordon if the upgrade's own cordon is still there (label set by hand)",
            on_stay=forget_cordon,
        ),
        Rule(
            S.UPGRADE_REQUIRED,
            "The driver pod is outdated; the node waits for an upgrade slot. Nothing is done to it.",
            edges=(
                Edge(
                    S.UPGRADE_DONE,
                    "driver pod became current without an upgrade (node moved DaemonSets, pod deleted)",
                    _current,
                    _uncordon,
                    "uncordon if the upgrade's own cordon is still there (retry after a failure)",
                ),
                Edge(
                    S.CORDON_REQUIRED,
                    "an upgrade slot is free (maxParallelUpgrades, maxUnavailable) and no skip label",
                    _slot_granted,
                ),
            ),
            wait=_wait_slot,
        ),
        Rule(
            S.CORDON_REQUIRED,
            "The node is about to be cordoned.",
            edges=(
                _SKIPS_AHEAD,
                Edge(
                    S.WAIT_FOR_JOBS_REQUIRED,
                    "always",
                    _always,
                    _cordon,
                    "cordon the node, unless it is already unschedulable",
                ),
            ),
            wait=_wait_nothing,
            on_enter=_record_admin_cordon,
            on_enter_doing=f"if the node is already unschedulable, record the admin's cordon "
            f"(`{upgrade_observations.INITIAL_UNSCHEDULABLE}`)",
        ),
        Rule(
            S.WAIT_FOR_JOBS_REQUIRED,
            "Waiting for the pods of waitForCompletion.podSelector on the node to complete.",
            edges=(
                _SKIPS_AHEAD,
                Edge(
                    S.POD_DELETION_REQUIRED,
                    "podSelector is empty, or no matching pod is Pending or Running",
                    _jobs_done,
                ),
                Edge(S.POD_DELETION_REQUIRED, "timeout", lambda ctx: ctx.expired),
            ),
            wait=_wait_jobs,
            timer=upgrade_observations.WAIT_FOR_COMPLETION_START,
            timeout=Timeout(
                "waitForCompletion.timeoutSeconds (0: none)",
                lambda policy: policy.wait_for_completion.timeout_seconds,
            ),
        ),
        Rule(
            S.POD_DELETION_REQUIRED,
            "Pods using GPUs (nvidia.com/gpu*, nvidia.com/mig-*) are deleted from the node.",
            edges=(
                _SKIPS_AHEAD,
                Edge(S.POD_RESTART_REQUIRED, "no Pending or Running GPU pod left", _no_gpu_pods),
                Edge(
                    S.DRAIN_REQUIRED,
                    "drain enabled, and a GPU pod may not be deleted (force, deleteEmptyDir) or timeout",
                    _deletion_failed_drain_on,
                ),
                Edge(
                    S.UPGRADE_FAILED,
                    "drain disabled, and a GPU pod may not be deleted (force, deleteEmptyDir) or timeout",
                    _deletion_failed,
                ),
            ),
            wait=_wait_deletion,
            work=_delete_gpu_pods,
            work_doing="delete the GPU pods (not DaemonSet or static pods; without a controller only with "
            "force; with an emptyDir only with deleteEmptyDir)",
            timer=upgrade_observations.POD_DELETION_START,
            timeout=Timeout(
                "gpuPodDeletion.timeoutSeconds (0: none)",
                lambda policy: policy.gpu_pod_deletion.timeout_seconds,
            ),
        ),
        Rule(
            S.DRAIN_REQUIRED,
            "GPU pod deletion failed and drain is enabled: the node is drained through the eviction API.",
            edges=(
                _SKIPS_AHEAD,
                Edge(
                    S.POD_DELETION_REQUIRED,
                    "drain disabled (policy changed, or labelled by hand)",
                    _drain_disabled,
                ),
                Edge(S.POD_RESTART_REQUIRED, "no pod to drain left", _drained),
                Edge(
                    S.UPGRADE_FAILED,
                    "a pod may not be evicted (force, deleteEmptyDir) or timeout",
                    _drain_failed,
                ),
            ),
            wait=_wait_drain,
            work=_evict_pods,
            work_doing="evict the pods matching drain.podSelector (not DaemonSet or static pods, not "
            "`nvidia.com/gpu-driver-upgrade-drain.skip=true`); PodDisruptionBudgets are respected",
            timer=upgrade_observations.DRAIN_START,
            timeout=Timeout("drain.timeoutSeconds (0: none)", lambda policy: policy.drain.timeout_seconds),
        ),
        Rule(
            S.POD_RESTART_REQUIRED,
            "The outdated driver pod is deleted; the node waits for a current, Ready one.",
            edges=(
                Edge(
                    S.VALIDATION_REQUIRED,
                    "driver pod current and Ready, validator deployed",
                    _driver_ready_validator,
                ),
                Edge(
                    S.UNCORDON_REQUIRED,
                    "driver pod current and Ready, no validator, cordoned by the upgrade",
                    _driver_ready_holding_cordon,
                ),
                Edge(S.UPGRADE_DONE, "driver pod current and Ready, no validator", _driver_ready),
                Edge(
                    S.UPGRADE_FAILED,
                    f"driver pod current but restarted more than {DRIVER_RESTART_LIMIT} times",
                    _driver_failing,
                ),
                Edge(
                    S.UPGRADE_FAILED,
                    "timeout: still no current, Ready driver pod (e.g. its image cannot be pulled)",
                    lambda ctx: ctx.expired,
                ),
            ),
            wait=_wait_restart,
            work=_restart_driver,
            work_doing="delete the outdated driver pod (once; not while it terminates)",
            timer=upgrade_observations.POD_RESTART_START,
            timeout=Timeout(
                "fixed, 600 s (operator env OCP_GPU_DRIVER_RESTART_TIMEOUT_SECONDS)",
                lambda policy: policy.pod_restart_timeout_seconds,
            ),
        ),
        Rule(
            S.VALIDATION_REQUIRED,
            f"Waiting for the validator pods ({upgrade_observations.VALIDATOR_SELECTOR}) on the node to "
            f"be Ready.",
            edges=(
                Edge(
                    S.UNCORDON_REQUIRED,
                    "validator pods Ready (or no validator deployed), cordoned by the upgrade",
                    _validated_holding_cordon,
                ),
                Edge(S.UPGRADE_DONE, "validator pods Ready (or no validator deployed)", _validated),
                Edge(S.UPGRADE_FAILED, "timeout", lambda ctx: ctx.expired),
            ),
            wait=_wait_validation,
            timer=upgrade_observations.VALIDATION_START,
            timeout=Timeout(
                f"fixed, {VALIDATION_TIMEOUT_SECONDS} s (operator env OCP_GPU_VALIDATION_TIMEOUT_SECONDS)",
                lambda policy: policy.validation_timeout_seconds,
            ),
        ),
        Rule(
            S.UNCORDON_REQUIRED,
            "The node is made schedulable again, unless it was unschedulable before the upgrade.",
            edges=(
                Edge(
                    S.UPGRADE_DONE,
                    "always",
                    _always,
                    _uncordon,
                    "uncordon the node if the cordon is the upgrade's own",
                ),
            ),
            wait=_wait_nothing,
        ),
        Rule(
            S.UPGRADE_FAILED,
            "Something failed. Left by the admin relabelling upgrade-required, or by the operator once "
            "the driver pod is healthy again. The upgrade's own cordon stays until then (the node "
            "may run no driver); an admin's cordon is never lifted.",
            edges=(
                Edge(
                    S.UNCORDON_REQUIRED,
                    "driver pod current and Ready and validated, cordoned by the upgrade",
                    _healthy_holding_cordon,
                ),
                Edge(S.UPGRADE_DONE, "driver pod current and Ready and validated", _healthy),
            ),
            wait=_wait_failed,
        ),
    )
}

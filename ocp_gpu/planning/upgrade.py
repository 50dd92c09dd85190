"""Which driver upgrade transitions to make this pass, and what to do on each node to make them.

The whole state machine is one table, `TABLE`: for each state of the label
`nvidia.com/gpu-driver-upgrade-state`, its meaning, the work done while a node stays
in it, the edges that leave it (tried in order; the first whose condition holds is
taken), and its timeout.  `docs/upgrade-state-machine.md` is generated from it
(hack/gen_upgrade_docs.py).  Semantics are those of NVIDIA's k8s-operator-libs
(pkg/upgrade), with its known failures fixed (DESIGN §5, §6).

Decides, per GPU node and per pass: at most one transition (label value, Event
message), the actions before it (cordon, uncordon, delete GPU pods, evict pods for a
drain, delete the outdated driver pod), the annotations written with it (timers, the
record of an admin's cordon), and, when the node stays, why it waits (which pod,
which budget, which timeout) for `ocp-gpu status`.  Also the upgrade budget
(maxParallelUpgrades, maxUnavailable) and the six metrics' values.

Never does: read the cluster or the clock (the caller passes a snapshot and `now`),
patch nodes, delete or evict pods, post Events or set metrics.  It never raises on
a snapshot: a node whose driver pod is missing, whose DaemonSet has no known
revision or whose pods were not read waits with a reason, and the others go on.

Contract with the reconciler: for each `NodePlan`, run `actions` in order; only if
every one succeeded, write `transition` and `annotations` in one merge patch (or
`annotations` alone when there is no transition).  An eviction a
PodDisruptionBudget refuses is not an error: the node stays and retries next pass.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from ocp_gpu.model import labels, selectors, upgrades
from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy import DEFAULT_VALIDATION_TIMEOUT_SECONDS, UpgradePolicy, scaled_max_unavailable
from ocp_gpu.model.upgrades import (
    DriverPod,
    PodRef,
    UpgradeNode,
    UpgradeSnapshot,
    UpgradeState,
    ValidatorPod,
    WorkloadPod,
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
# A current driver pod whose unready containers restarted more often than this is failing (NVIDIA's).
DRIVER_RESTART_LIMIT: Final = 10


# --- actions: what the reconciler does before writing a transition ----------------------


@dataclasses.dataclass(frozen=True)
class Cordon:
    """Mark the node unschedulable; `annotations` go in the same patch (the upgrade's marker)."""

    annotations: Mapping[str, str | None]


@dataclasses.dataclass(frozen=True)
class Uncordon:
    """Mark the node schedulable again (only ever a cordon the upgrade made itself)."""


@dataclasses.dataclass(frozen=True)
class DeletePods:
    """Delete these GPU pods (gpuPodDeletion)."""

    pods: tuple[PodRef, ...]


@dataclasses.dataclass(frozen=True)
class EvictPods:
    """Evict these pods through the eviction API (drain); a PodDisruptionBudget may refuse."""

    pods: tuple[PodRef, ...]


@dataclasses.dataclass(frozen=True)
class DeleteDriverPod:
    """Delete the outdated driver pod; its DaemonSet (OnDelete) creates a current one."""

    pod: PodRef


Action = Cordon | Uncordon | DeletePods | EvictPods | DeleteDriverPod


# --- the driver pod of a node -----------------------------------------------------------


class DriverCheck(enum.StrEnum):
    """How a node's driver pod compares with its DaemonSet's current revision."""

    # No driver pod on the node (not scheduled yet, or between two pods).
    MISSING = "missing"
    # The pod has no DaemonSet, or its DaemonSet's current revision is unknown.
    NO_REVISION = "no-revision"
    # The pod's controller-revision-hash is not the DaemonSet's current revision.
    OUTDATED = "outdated"
    # Current, not Ready yet.
    STARTING = "starting"
    # Current, not Ready, and its containers restarted more than DRIVER_RESTART_LIMIT times.
    FAILING = "failing"
    # Current and Ready.
    READY = "ready"


CURRENT: Final = frozenset({DriverCheck.STARTING, DriverCheck.FAILING, DriverCheck.READY})


@dataclasses.dataclass(frozen=True)
class DriverStatus:
    check: DriverCheck
    pod: DriverPod | None
    # For humans: which pod, which revisions, what it waits for.
    detail: str

    @property
    def current(self) -> bool:
        return self.check in CURRENT


def check_driver(node: UpgradeNode, snapshot: UpgradeSnapshot) -> DriverStatus:
    """The node's driver pod against its DaemonSet's current revision (DESIGN §5)."""
    pod = node.driver_pod
    if pod is None:
        # Not scheduled yet, or the old pod is gone and the new one not created yet.
        return DriverStatus(DriverCheck.MISSING, None, "no driver pod on the node")
    revision = snapshot.daemonsets.get(pod.daemonset) if pod.daemonset else None
    if revision is None or revision.current_hash is None:
        # NB: an unknown revision must not read as "outdated": the node would be upgraded for nothing.
        owner = f"DaemonSet {pod.daemonset}" if pod.daemonset else "no DaemonSet"
        return DriverStatus(
            DriverCheck.NO_REVISION, pod, f"driver pod {pod.ref.name}: {owner} has no known current revision"
        )
    if pod.revision_hash != revision.current_hash:
        # The DaemonSet's template changed since this pod was made.
        going = ", terminating" if pod.terminating else ""
        return DriverStatus(
            DriverCheck.OUTDATED,
            pod,
            f"driver pod {pod.ref.name} is outdated (revision {pod.revision_hash or 'none'}, "
            f"{pod.daemonset} is at {revision.current_hash}{going})",
        )
    if pod.ready:
        return DriverStatus(DriverCheck.READY, pod, f"driver pod {pod.ref.name} is current and Ready")
    why = f" ({pod.waiting_reason})" if pod.waiting_reason else ""
    if pod.restart_count > DRIVER_RESTART_LIMIT:
        # NVIDIA's rule: a pod that keeps restarting will not get better by waiting.
        return DriverStatus(
            DriverCheck.FAILING,
            pod,
            f"driver pod {pod.ref.name} is failing: {pod.restart_count} restarts{why}",
        )
    return DriverStatus(DriverCheck.STARTING, pod, f"driver pod {pod.ref.name} is not Ready yet{why}")


# --- label selectors (the pure half of apimachinery's labels.Selector) --------------------


def _requirement_matches(requirement: selectors.SelectorRequirement, pod_labels: Mapping[str, str]) -> bool:
    value = pod_labels.get(requirement.key)
    operator = requirement.operator
    if operator == "exists":
        return value is not None
    if operator == "!":
        return value is None
    if operator in ("=", "in"):
        return value is not None and value in requirement.values
    if operator in ("!=", "notin"):
        # NB: as in Kubernetes, a pod without the label matches `key!=v`.
        return value is None or value not in requirement.values
    # ">" and "<": the label must hold an integer.
    if value is None or not value.lstrip("-").isdigit():
        return False
    bound = int(requirement.values[0])
    return int(value) > bound if operator == ">" else int(value) < bound


def selector_matches(selector: str, pod_labels: Mapping[str, str]) -> bool:
    """Whether labels match a selector in kubectl `-l` syntax; raises ValueError if it does not parse."""
    return all(_requirement_matches(r, pod_labels) for r in selectors.parse_label_selector(selector))


def drain_selector(policy: UpgradePolicy) -> str:
    """drain.podSelector with NVIDIA's opt-out appended (pods labelled drain.skip=true stay)."""
    own = policy.drain.pod_selector.strip()
    return f"{own},{upgrades.DRAIN_SKIP_SELECTOR}" if own else upgrades.DRAIN_SKIP_SELECTOR


# --- which pods wait, deletion and drain touch ----------------------------------------------


def gpu_pods(pods: Iterable[WorkloadPod]) -> tuple[WorkloadPod, ...]:
    """Pending or Running pods that use a GPU: what gpuPodDeletion must remove."""
    return tuple(pod for pod in pods if pod.active and pod.requests_gpu)


def why_not_deletable(pod: WorkloadPod, policy: UpgradePolicy) -> str | None:
    """Why gpuPodDeletion may not delete this GPU pod, or None if it may."""
    deletion = policy.gpu_pod_deletion
    if pod.controller_kind == "DaemonSet" or pod.mirror:
        # Its controller would put it straight back (DaemonSet pods tolerate cordons), as kubectl drain says.
        return "is a DaemonSet or static pod"
    if not pod.has_controller and not deletion.force:
        return "has no controller and gpuPodDeletion.force is false"
    if pod.uses_empty_dir and not deletion.delete_empty_dir:
        return "uses an emptyDir and gpuPodDeletion.deleteEmptyDir is false"
    return None


def drain_pods(pods: Iterable[WorkloadPod], policy: UpgradePolicy) -> tuple[WorkloadPod, ...]:
    """The pods a drain evicts: those matching the drain selector, except DaemonSet and static pods.

    Raises ValueError when drain.podSelector does not parse.
    """
    selector = drain_selector(policy)
    return tuple(
        pod
        for pod in pods
        if pod.controller_kind != "DaemonSet" and not pod.mirror and selector_matches(selector, pod.labels)
    )


def why_not_drainable(pod: WorkloadPod, policy: UpgradePolicy) -> str | None:
    """Why a drain may not evict this pod, or None if it may (finished pods always may, as in kubectl)."""
    drain = policy.drain
    if not pod.active:
        return None
    if not pod.has_controller and not drain.force:
        return "has no controller and drain.force is false"
    if pod.uses_empty_dir and not drain.delete_empty_dir:
        return "uses an emptyDir and drain.deleteEmptyDir is false"
    return None


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
        return self.timeout > 0 and self.elapsed is not None and self.elapsed.total_seconds() > self.timeout


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _timeout_note(ctx: Context, field: str) -> str:
    """'(timeout 5m00s, 3m10s left)', for the why-waiting strings."""
    if ctx.timeout <= 0:
        return f"(no timeout: {field} is 0)"
    if ctx.elapsed is None:
        return f"(timeout {_duration(ctx.timeout)}, starting now)"
    return f"(timeout {_duration(ctx.timeout)}, {_duration(ctx.timeout - ctx.elapsed.total_seconds())} left)"


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
    return tuple(pod for pod in gpu_pods(ctx.pods or ()) if why_not_deletable(pod, ctx.policy))


def _no_gpu_pods(ctx: Context) -> bool:
    return ctx.pods is not None and not gpu_pods(ctx.pods)


def _deletion_failed(ctx: Context) -> bool:
    # Some GPU pod may not be deleted at all (NVIDIA checks before deleting any), or time ran out.
    return ctx.pods is not None and (bool(_blocked_gpu_pods(ctx)) or ctx.expired)


def _deletion_failed_drain_on(ctx: Context) -> bool:
    return ctx.policy.drain.enable and _deletion_failed(ctx)


def _delete_gpu_pods(ctx: Context) -> tuple[Action, ...]:
    if ctx.pods is None or _blocked_gpu_pods(ctx):
        return ()
    doomed = tuple(pod.ref for pod in gpu_pods(ctx.pods) if not pod.terminating)
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
    marks: dict[str, str | None] = {upgrades.CORDONED_BY_UPGRADE: "true"}
    if ctx.node.initially_unschedulable:
        # NB: someone else's cordon was recorded as the node entered the upgrade and lifted since
        # (an MCO update that finished quickly): the record is stale, and the cordon made now is
        # the upgrade's own, to be lifted at the end (found by bench/chaos_apiserver.py).
        marks[upgrades.INITIAL_UNSCHEDULABLE] = None
    return (Cordon(marks),)


def _uncordon(ctx: Context) -> tuple[Action, ...]:
    return (Uncordon(),) if ctx.holds_cordon and ctx.node.unschedulable else ()


def _record_admin_cordon(ctx: Context) -> Mapping[str, str | None]:
    if ctx.node.unschedulable and not ctx.node.cordoned_by_upgrade:
        # Unschedulable before the upgrade cordons it: the admin's, never lifted (DESIGN §6).
        return {upgrades.INITIAL_UNSCHEDULABLE: "true"}
    return {}


def _forget_cordon(ctx: Context) -> Mapping[str, str | None]:
    changes: dict[str, str | None] = {}
    if ctx.node.initially_unschedulable:
        changes[upgrades.INITIAL_UNSCHEDULABLE] = None
    if ctx.node.cordoned_by_upgrade:
        changes[upgrades.CORDONED_BY_UPGRADE] = None
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
    left = gpu_pods(ctx.pods)
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
        return f"waiting for a validator pod ({upgrades.VALIDATOR_SELECTOR}) on the node {note}"
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
            on_stay=_forget_cordon,
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
            f"(`{upgrades.INITIAL_UNSCHEDULABLE}`)",
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
            timer=upgrades.WAIT_FOR_COMPLETION_START,
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
            timer=upgrades.POD_DELETION_START,
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
            timer=upgrades.DRAIN_START,
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
            timer=upgrades.POD_RESTART_START,
            timeout=Timeout(
                "fixed, 600 s (operator env OCP_GPU_DRIVER_RESTART_TIMEOUT_SECONDS)",
                lambda policy: policy.pod_restart_timeout_seconds,
            ),
        ),
        Rule(
            S.VALIDATION_REQUIRED,
            f"Waiting for the validator pods ({upgrades.VALIDATOR_SELECTOR}) on the node to be Ready.",
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
            timer=upgrades.VALIDATION_START,
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

# --- the budget ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Budget:
    """maxParallelUpgrades and maxUnavailable against the nodes as read, and the starts granted."""

    total: int
    # 0: no limit.
    max_parallel: int
    # maxUnavailable as a number of nodes (percentages of `total`, rounded up).
    max_unavailable: int
    # Nodes holding an upgrade slot (in progress or failed) before this pass.
    holding: tuple[NodeName, ...]
    # Nodes unschedulable, NotReady or about to be cordoned, before this pass.
    unavailable: tuple[NodeName, ...]
    # upgrade-required nodes granted a slot this pass, in grant order.
    starts: tuple[NodeName, ...] = ()
    # How many of the starts make an available node unavailable.
    newly_unavailable: int = 0
    # Why the other upgrade-required nodes wait ("" when none was refused).
    blocked_by: str = ""

    @property
    def available(self) -> int:
        """Slots left after this pass's starts (the metric gpu_operator_nodes_upgrades_available)."""
        unavailable_left = self.max_unavailable - len(self.unavailable) - self.newly_unavailable
        if self.max_parallel:
            parallel_left = self.max_parallel - len(self.holding) - len(self.starts)
            return max(0, min(parallel_left, unavailable_left))
        return max(0, unavailable_left)


def _is_unavailable(node: UpgradeNode) -> bool:
    # NVIDIA's count: cordoned, NotReady, or about to be cordoned.
    return node.unschedulable or not node.ready or node.state is S.CORDON_REQUIRED


def _first(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _wants_slot(node: UpgradeNode, driver: DriverStatus) -> bool:
    # upgrade-required, not skipped, and its outdated pod is not already on its way out.
    return (
        node.state is S.UPGRADE_REQUIRED
        and not node.skip
        and driver.check is DriverCheck.OUTDATED
        and not (driver.pod is not None and driver.pod.terminating)
    )


def select_starts(
    nodes: Sequence[UpgradeNode], drivers: Mapping[NodeName, DriverStatus], policy: UpgradePolicy
) -> Budget:
    """Which upgrade-required nodes start this pass, within maxParallelUpgrades and maxUnavailable.

    NB: a node that is already unavailable (cordoned by its admin, NotReady) costs no
    maxUnavailable slot, only a parallel one, so admin-cordoned nodes never deadlock the
    rollout; they go first.
    """
    total = len(nodes)
    try:
        max_unavailable = scaled_max_unavailable(policy.max_unavailable, total)
    except ValueError:
        # validate_policy reports it; meanwhile nothing new starts.
        max_unavailable = 0
    holding = tuple(node.name for node in nodes if node.state in HOLDS_SLOT)
    unavailable = tuple(node.name for node in nodes if _is_unavailable(node))
    candidates = sorted(
        (node for node in nodes if _wants_slot(node, drivers[node.name])),
        key=lambda node: (not _is_unavailable(node), node.name),
    )
    in_flight = len(holding)
    down = len(unavailable)
    starts: list[NodeName] = []
    newly = 0
    blocked_by = ""
    for node in candidates:
        if policy.max_parallel_upgrades and in_flight >= policy.max_parallel_upgrades:
            # Every parallel slot is taken.
            blocked_by = (
                f"waiting for an upgrade slot: {in_flight} of maxParallelUpgrades "
                f"{policy.max_parallel_upgrades} taken ({_first(holding + tuple(starts))})"
            )
            break
        costs_unavailability = not _is_unavailable(node)
        if costs_unavailability and down >= max_unavailable:
            # Cordoning one more node would exceed maxUnavailable.
            blocked_by = (
                f"waiting for an upgrade slot: {down} of {total} GPU nodes unavailable, maxUnavailable "
                f"{policy.max_unavailable!s} allows {max_unavailable}"
            )
            continue
        starts.append(node.name)
        in_flight += 1
        if costs_unavailability:
            down += 1
            newly += 1
    return Budget(
        total=total,
        max_parallel=policy.max_parallel_upgrades,
        max_unavailable=max_unavailable,
        holding=holding,
        unavailable=unavailable,
        starts=tuple(starts),
        newly_unavailable=newly,
        blocked_by=blocked_by,
    )


# --- the plan -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NodePlan:
    """What to do on one node this pass."""

    node: NodeName
    # The state as read.
    state: UpgradeState
    driver: DriverStatus
    # The new label value, or None to leave it.
    transition: UpgradeState | None = None
    # Run in order before the transition; the transition is written only if all succeed.
    actions: tuple[Action, ...] = ()
    # Node annotations to set (a value) or remove (None), in the same patch as the transition.
    annotations: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    # Why the node stays where it is ("" when it moves or has nothing to wait for).
    waiting: str = ""
    # The node carries the skip label.
    skipped: bool = False
    # False for a node opted out of the driver with no upgrade under way: it is not counted
    # in the metrics or the budget (NVIDIA counts only nodes with a driver pod).
    managed: bool = True

    @property
    def state_after(self) -> UpgradeState:
        return self.transition if self.transition is not None else self.state

    @property
    def event_message(self) -> str | None:
        """The GPUDriverUpgrade Event message of the transition."""
        return upgrades.event_message(self.transition) if self.transition is not None else None


@dataclasses.dataclass(frozen=True)
class UpgradePlan:
    auto_upgrade: bool
    nodes: tuple[NodePlan, ...]
    budget: Budget

    def by_node(self) -> dict[NodeName, NodePlan]:
        return {plan.node: plan for plan in self.nodes}


@dataclasses.dataclass(frozen=True)
class UpgradeCounts:
    """The six gpu_operator_* upgrade metrics, as the labels will read after this pass."""

    auto_upgrade_enabled: int
    in_progress: int
    done: int
    failed: int
    available: int
    pending: int


def nodes_needing_pods(snapshot_nodes: Iterable[UpgradeNode], policy: UpgradePolicy) -> tuple[NodeName, ...]:
    """The nodes whose pods the reader must list for this pass (the rest need none)."""
    if not policy.auto_upgrade:
        return ()
    wanted = {S.POD_DELETION_REQUIRED, S.DRAIN_REQUIRED}
    if policy.wait_for_completion.pod_selector.strip():
        wanted.add(S.WAIT_FOR_JOBS_REQUIRED)
    return tuple(node.name for node in snapshot_nodes if node.state in wanted)


def _context(
    node: UpgradeNode,
    driver: DriverStatus,
    snapshot: UpgradeSnapshot,
    policy: UpgradePolicy,
    now: datetime.datetime,
    budget: Budget,
) -> Context:
    rule = TABLE[node.state]
    started = node.timers.get(rule.timer) if rule.timer else None
    return Context(
        node=node,
        driver=driver,
        policy=policy,
        now=now,
        pods=snapshot.pods.get(node.name),
        validator_deployed=snapshot.validator_deployed,
        validators=snapshot.validator_pods.get(node.name, ()),
        granted=node.name in budget.starts,
        slot_wait=budget.blocked_by,
        timeout=rule.timeout.seconds(policy) if rule.timeout else 0,
        elapsed=(now - started) if started is not None else None,
    )


def _entering(ctx: Context, target: UpgradeState) -> dict[str, str | None]:
    """Annotations written with a transition into `target`."""
    rule = TABLE[target]
    changes: dict[str, str | None] = {
        # Timers of other states are stale from now on.
        key: None
        for key in ctx.node.timers
        if key != rule.timer
    }
    if rule.timer:
        changes[rule.timer] = upgrades.format_timestamp(ctx.now)
    if rule.on_enter:
        changes.update(rule.on_enter(ctx))
    if target is S.UPGRADE_DONE:
        # The run is over: forget its cordon records.
        changes.update(_forget_cordon(ctx))
    return changes


def _plan_node(ctx: Context) -> NodePlan:
    node = ctx.node
    rule = TABLE[node.state]
    annotations: dict[str, str | None] = {}
    if not node.upgrade_enabled:
        # The controller, not k8s-driver-manager, owns eviction on this node.
        annotations[labels.UPGRADE_ENABLED_ANNOTATION] = "true"
    for edge in rule.edges:
        if edge.condition(ctx):
            actions = edge.actions(ctx) if edge.actions else ()
            annotations.update(_entering(ctx, edge.target))
            return NodePlan(
                node.name, node.state, ctx.driver, edge.target, actions, annotations, skipped=node.skip
            )
    # No way out yet: do this state's work and say why.
    if rule.timer and ctx.elapsed is None:
        # Labelled by hand or by another controller: the timer starts now.
        annotations[rule.timer] = upgrades.format_timestamp(ctx.now)
    if rule.on_stay:
        annotations.update(rule.on_stay(ctx))
    actions = rule.work(ctx) if rule.work else ()
    return NodePlan(
        node.name, node.state, ctx.driver, None, actions, annotations, rule.wait(ctx), skipped=node.skip
    )


def _paused(node: UpgradeNode, driver: DriverStatus) -> NodePlan:
    # autoUpgrade false: every label stays; k8s-driver-manager takes eviction back.
    annotations: dict[str, str | None] = {}
    if node.upgrade_enabled:
        annotations[labels.UPGRADE_ENABLED_ANNOTATION] = None
    return NodePlan(
        node.name,
        node.state,
        driver,
        annotations=annotations,
        waiting="paused: driver.upgradePolicy.autoUpgrade is false",
        skipped=node.skip,
    )


def is_unmanaged(node: UpgradeNode) -> bool:
    """Opted out of the driver and no upgrade under way: nothing to upgrade or count.

    NB: a node opted out mid-upgrade stays managed, so the upgrade's cordon is still lifted.
    Its driver pod may still be terminating: it is not upgraded (nor labelled upgrade-done,
    which the node labeller would remove again: no flapping).
    """
    return node.driver_opted_out and node.state in IDLE


def _unmanaged(node: UpgradeNode) -> NodePlan:
    # Its stale state label is removed by the node labeller (planning/node_labels).
    return NodePlan(
        node.name,
        node.state,
        DriverStatus(DriverCheck.MISSING, node.driver_pod, "opted out of the driver"),
        waiting=f"opted out of the driver ({labels.deploy_label('driver')}=false): not upgraded or counted",
        skipped=node.skip,
        managed=False,
    )


def plan_upgrades(snapshot: UpgradeSnapshot, policy: UpgradePolicy, now: datetime.datetime) -> UpgradePlan:
    """Per node, at most one transition and the actions before it, for one pass."""
    unmanaged = tuple(_unmanaged(node) for node in snapshot.nodes if is_unmanaged(node))
    if unmanaged:
        # Opted-out nodes are planned apart: the state machine and the budget never see them.
        managed = dataclasses.replace(
            snapshot, nodes=tuple(node for node in snapshot.nodes if not is_unmanaged(node))
        )
        plan = plan_upgrades(managed, policy, now)
        return dataclasses.replace(plan, nodes=plan.nodes + unmanaged)
    drivers = {node.name: check_driver(node, snapshot) for node in snapshot.nodes}
    if not policy.auto_upgrade:
        # Paused: freeze every node where it is.
        budget = dataclasses.replace(
            select_starts(snapshot.nodes, drivers, policy),
            starts=(),
            newly_unavailable=0,
            blocked_by="paused",
        )
        plans = tuple(_paused(node, drivers[node.name]) for node in snapshot.nodes)
        return UpgradePlan(False, plans, budget)
    budget = select_starts(snapshot.nodes, drivers, policy)
    plans = tuple(
        _plan_node(_context(node, drivers[node.name], snapshot, policy, now, budget))
        for node in snapshot.nodes
    )
    return UpgradePlan(True, plans, budget)


def summarize(plan: UpgradePlan) -> UpgradeCounts:
    """The six metrics' values, from the states the labels will have after this pass."""
    after = [node.state_after for node in plan.nodes if node.managed]
    return UpgradeCounts(
        auto_upgrade_enabled=int(plan.auto_upgrade),
        in_progress=sum(state in IN_PROGRESS for state in after),
        done=after.count(S.UPGRADE_DONE),
        failed=after.count(S.UPGRADE_FAILED),
        available=plan.budget.available if plan.auto_upgrade else 0,
        # Waiting for a slot: skipped nodes never get one.
        pending=sum(
            node.state_after is S.UPGRADE_REQUIRED and not node.skipped for node in plan.nodes if node.managed
        ),
    )

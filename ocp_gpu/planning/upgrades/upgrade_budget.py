"""The upgrade budget: which upgrade-required nodes may start this pass.

maxParallelUpgrades and maxUnavailable against the GPU nodes as read; also the slots left
(the metric gpu_operator_nodes_upgrades_available) and why the others wait.  Never reads
the cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ocp_gpu.model.nodes import NodeName
from ocp_gpu.model.policy.policy_spec import UpgradePolicy, scaled_max_unavailable
from ocp_gpu.model.upgrade_observations import UpgradeNode
from ocp_gpu.planning.drivers.driver_check import DriverCheck, DriverStatus
from ocp_gpu.planning.upgrades.upgrade_table import HOLDS_SLOT, S

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


def is_unavailable(node: UpgradeNode) -> bool:
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
    nodes: Sequence[UpgradeNode],
    drivers: Mapping[NodeName, DriverStatus],
    policy: UpgradePolicy,
    frozen: frozenset[NodeName] = frozenset(),
) -> Budget:
    """Which upgrade-required nodes start this pass, within maxParallelUpgrades and maxUnavailable.

    NB: a node that is already unavailable (cordoned by its admin, NotReady) costs no
    maxUnavailable slot, only a parallel one, so admin-cordoned nodes never deadlock the
    rollout; they go first.  `frozen` nodes (their writes are under way: planning/upgrade_pipeline)
    are counted as given, never started.
    """
    total = len(nodes)
    try:
        max_unavailable = scaled_max_unavailable(policy.max_unavailable, total)
    except ValueError:
        # validate_policy reports it; meanwhile nothing new starts.
        max_unavailable = 0
    holding = tuple(node.name for node in nodes if node.state in HOLDS_SLOT)
    unavailable = tuple(node.name for node in nodes if is_unavailable(node))
    candidates = sorted(
        (node for node in nodes if node.name not in frozen and _wants_slot(node, drivers[node.name])),
        key=lambda node: (not is_unavailable(node), node.name),
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
        costs_unavailability = not is_unavailable(node)
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

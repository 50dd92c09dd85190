"""We test these aspects of planning/batched_events: which upgrade Events are said once for many
nodes (only a never-processed node's first upgrade-done), and what the one Event says."""

from __future__ import annotations

import pytest

from ocp_gpu.model.upgrade_observations import UpgradeState
from ocp_gpu.planning.status import batched_events

S = UpgradeState


def test_only_the_first_upgrade_done_is_batched() -> None:
    assert batched_events.is_batched(S.UNKNOWN, S.UPGRADE_DONE)


@pytest.mark.parametrize(
    ("before", "transition"),
    [
        # The upgrade-done that ends an upgrade: the seed shows it per node.
        (S.UNCORDON_REQUIRED, S.UPGRADE_DONE),
        (S.UPGRADE_REQUIRED, S.UPGRADE_DONE),
        # An upgrade starts: per node.
        (S.UNKNOWN, S.UPGRADE_REQUIRED),
        (S.UPGRADE_DONE, S.UPGRADE_REQUIRED),
        (S.UPGRADE_REQUIRED, S.CORDON_REQUIRED),
        (S.UNKNOWN, None),
    ],
)
def test_every_upgrade_transition_keeps_its_own_event(before: UpgradeState, transition: S | None) -> None:
    assert not batched_events.is_batched(before, transition)


def test_message_names_the_count_and_the_first_nodes_sorted() -> None:
    nodes = [f"gpu-{i:03d}" for i in range(25, 0, -1)]
    message = batched_events.batched_message(S.UPGRADE_DONE, nodes, shown=3)
    assert message == (
        "Successfully updated node state label to [upgrade-done] on 25 nodes: "
        "gpu-001, gpu-002, gpu-003 and 22 more"
    )


def test_message_of_a_few_nodes_lists_them_all() -> None:
    message = batched_events.batched_message(S.UPGRADE_DONE, ["b", "a"])
    assert message == "Successfully updated node state label to [upgrade-done] on 2 nodes: a, b"
    one = batched_events.batched_message(S.UPGRADE_DONE, ["a"])
    assert one == "Successfully updated node state label to [upgrade-done] on 1 node: a"

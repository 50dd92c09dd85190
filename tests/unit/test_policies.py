"""We test these aspects of choosing the active ClusterPolicy (planning/status/policies.py):

- no policy, one policy, several: the oldest by creationTimestamp is active;
- equal timestamps: the name breaks the tie, so every replica agrees;
- every other policy is ignored with a message naming the active one and the way out;
- an unreadable timestamp never wins;
- hypothesis: the choice does not depend on the order the policies were listed in,
  and exactly one policy is active whenever there is any.
"""

from __future__ import annotations

import datetime
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.planning.status import policies

OLD = "2026-01-01T00:00:00Z"
NEW = "2026-06-01T12:30:00Z"


def ref(name: str, created: str) -> policies.PolicyRef:
    return policies.PolicyRef(name, created, uid=f"uid-{name}")


SELECTIONS = {
    "none": ([], None, set()),
    "one": ([ref("cluster-policy", NEW)], "cluster-policy", set()),
    "oldest wins": ([ref("b-new", NEW), ref("a-old", OLD)], "a-old", {"b-new"}),
    "oldest wins over a smaller name": ([ref("a-new", NEW), ref("z-old", OLD)], "z-old", {"a-new"}),
    "same time: name breaks the tie": ([ref("b", OLD), ref("a", OLD)], "a", {"b"}),
    "offsets are compared as instants": (
        [ref("utc", "2026-01-01T01:00:00Z"), ref("cet", "2026-01-01T01:30:00+01:00")],
        "cet",
        {"utc"},
    ),
    "unreadable timestamp never wins": ([ref("a", "yesterday"), ref("b", NEW)], "b", {"a"}),
    "three": ([ref("c", NEW), ref("a", OLD), ref("b", "2026-03-01T00:00:00Z")], "a", {"b", "c"}),
}


@pytest.mark.parametrize(("refs", "active", "ignored"), SELECTIONS.values(), ids=SELECTIONS.keys())
def test_selection(refs: list[policies.PolicyRef], active: str | None, ignored: set[str]) -> None:
    selection = policies.select_active_policy(refs)
    assert selection.active == active
    assert set(selection.ignored) == ignored


def test_ignored_message_names_the_active_policy_and_the_way_out() -> None:
    selection = policies.select_active_policy([ref("cluster-policy", OLD), ref("gpu-cluster-policy", NEW)])
    message = selection.ignored["gpu-cluster-policy"]
    assert "'cluster-policy'" in message and OLD in message
    assert "delete 'gpu-cluster-policy'" in message


_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
# Second precision and UTC, as the API server writes creationTimestamp.
_TIMES = st.datetimes(
    min_value=datetime.datetime(2000, 1, 1),
    max_value=datetime.datetime(2100, 1, 1),
    timezones=st.just(datetime.UTC),
).map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"))
_REFS = st.lists(st.builds(ref, _NAMES, _TIMES), unique_by=lambda r: r.name, max_size=6)


@given(_REFS, st.randoms())
def test_order_of_listing_does_not_matter(refs: list[policies.PolicyRef], rng: random.Random) -> None:
    shuffled = list(refs)
    rng.shuffle(shuffled)
    assert policies.select_active_policy(refs) == policies.select_active_policy(shuffled)


@given(_REFS)
def test_exactly_one_active(refs: list[policies.PolicyRef]) -> None:
    selection = policies.select_active_policy(refs)
    names = {r.name for r in refs}
    if not refs:
        assert selection.active is None
        return
    assert selection.active in names
    assert set(selection.ignored) == names - {selection.active}

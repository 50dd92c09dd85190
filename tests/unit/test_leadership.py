"""We test these aspects: who may take, renew or must wait for the leader Lease.

The decisions are pure; the Lease I/O is tested end to end in tests/e2e/test_operator.py.
"""

from __future__ import annotations

import datetime

import pytest

from ocp_gpu.planning import leadership

T0 = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.UTC)


def record(
    holder: str | None, renewed_s_ago: float, duration: int = 15, transitions: int = 3
) -> leadership.LeaseRecord:
    renewed = T0 - datetime.timedelta(seconds=renewed_s_ago)
    return leadership.LeaseRecord(holder, renewed, renewed, duration, transitions)


def test_no_lease_creates_one_with_us_as_holder() -> None:
    decision = leadership.plan_lease(None, "me", T0, 15)
    assert decision.action is leadership.LeaseAction.CREATE
    assert decision.record == leadership.LeaseRecord("me", T0, T0, 15, 0)


def test_our_lease_is_renewed_keeping_acquisition_time() -> None:
    observed = record("me", 5)
    decision = leadership.plan_lease(observed, "me", T0, 15)
    assert decision.action is leadership.LeaseAction.RENEW
    assert decision.record is not None
    assert decision.record.renewed_at == T0
    assert decision.record.acquired_at == observed.acquired_at
    assert decision.record.transitions == 3


@pytest.mark.parametrize("renewed_s_ago", [0, 1, 14.9])
def test_live_lease_of_another_replica_means_wait(renewed_s_ago: float) -> None:
    decision = leadership.plan_lease(record("other", renewed_s_ago), "me", T0, 15)
    assert decision.action is leadership.LeaseAction.WAIT
    assert decision.record is None
    assert decision.expires_at == T0 + datetime.timedelta(seconds=15 - renewed_s_ago)


@pytest.mark.parametrize(
    "observed",
    [record("other", 15), record("other", 60), record(None, 1), record("", 1)],
    ids=["just-expired", "long-expired", "released", "empty-holder"],
)
def test_free_or_expired_lease_is_taken_counting_the_transition(observed: leadership.LeaseRecord) -> None:
    decision = leadership.plan_lease(observed, "me", T0, 15)
    assert decision.action is leadership.LeaseAction.TAKE
    assert decision.record is not None
    assert decision.record.holder == "me"
    assert decision.record.transitions == observed.transitions + 1


def test_lease_is_lost_only_after_the_renew_deadline() -> None:
    assert not leadership.is_lease_lost(T0, T0 + datetime.timedelta(seconds=9.9), 10)
    assert leadership.is_lease_lost(T0, T0 + datetime.timedelta(seconds=10), 10)


def test_released_lease_has_no_holder_and_is_taken_at_once() -> None:
    free = leadership.released(record("me", 0))
    assert free.holder is None
    assert leadership.plan_lease(free, "other", T0, 15).action is leadership.LeaseAction.TAKE


def test_the_identity_is_the_pods_name_when_there_is_one() -> None:
    # the same pod after a container restart: the same identity, so its Lease is still its own
    first = leadership.lease_identity({"POD_NAME": "gpu-operator-7d9f-x2x"}, "host", "aaaa")
    again = leadership.lease_identity({"POD_NAME": "gpu-operator-7d9f-x2x"}, "host", "bbbb")
    assert first == again == "gpu-operator-7d9f-x2x"


@pytest.mark.parametrize("env", [{}, {"POD_NAME": ""}, {"POD_NAME": "  "}])
def test_without_a_pod_name_every_process_is_someone_new(env: dict[str, str]) -> None:
    assert leadership.lease_identity(env, "host", "aaaa") == "host_aaaa"
    assert leadership.lease_identity(env, "host", "aaaa") != leadership.lease_identity(env, "host", "bbbb")


def test_a_restarted_holder_renews_its_live_lease_at_once() -> None:
    # A crashed leader's Lease, renewed 2 s before the crash and live for 135 s more: the
    # restarted container (same identity) renews it now; a new pod (another) waits.
    crashed = record("gpu-operator-7d9f-x2x", 2, duration=137)
    assert (
        leadership.plan_lease(crashed, "gpu-operator-7d9f-x2x", T0, 137).action
        is leadership.LeaseAction.RENEW
    )
    other = leadership.plan_lease(crashed, "gpu-operator-7d9f-k8q", T0, 137)
    assert other.action is leadership.LeaseAction.WAIT
    assert other.expires_at == T0 + datetime.timedelta(seconds=135)

"""We test these aspects: condition merging keeps transition times unless the status flips."""

from __future__ import annotations

import datetime

from ocp_gpu.planning.status import conditions

NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.UTC)
STAMP = "2026-11-22T12:00:00Z"


def test_new_condition_transitions_now() -> None:
    merged = conditions.merge_conditions([conditions.Condition("Ready", True, "Ok", "fine")], [], NOW, 3)
    assert merged == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Ok",
            "message": "fine",
            "lastTransitionTime": STAMP,
            "observedGeneration": 3,
        }
    ]


def test_unchanged_status_keeps_its_transition_time_even_if_message_changes() -> None:
    stored = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    merged = conditions.merge_conditions(
        [conditions.Condition("Ready", True, "Ok", "new text")], stored, NOW, 1
    )
    assert merged[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert merged[0]["message"] == "new text"


def test_flipped_status_transitions_now_and_dropped_conditions_disappear() -> None:
    stored = [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Gone", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
    ]
    merged = conditions.merge_conditions([conditions.Condition("Ready", False, "Bad", "x")], stored, NOW, 1)
    assert [item["type"] for item in merged] == ["Ready"]
    assert merged[0]["lastTransitionTime"] == STAMP

"""We test these aspects of the upgrade transition table (ocp_gpu/planning/upgrades/upgrade_plan.py, TABLE):

- the label values are exactly the seed's eleven, each with exactly one rule;
- the graph is sound: every target is a state, every state is reachable from the empty
  label and can reach upgrade-done, in-progress states hold a slot;
- timers: every state with a timeout records its entry in its own annotation, and each
  timeout reads the policy field it names (matrix over the timed states and values);
- wire strings: the Event message for every state, the annotation family;
- the generated documentation (hack/gen_upgrade_docs.py) is up to date, shows every
  state and every edge, and `--check` detects drift.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ocp_gpu.model import upgrade_observations
from ocp_gpu.model.upgrade_observations import UpgradeState
from ocp_gpu.planning.upgrades import upgrade_plan
from tests import hack_scripts
from tests.unit._upgrades import S, policy

ROOT = Path(__file__).resolve().parents[2]
SEED_STATES = [
    "",
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "drain-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-done",
    "upgrade-failed",
]

all_states = pytest.mark.parametrize("state", list(UpgradeState), ids=lambda s: s.value or "unknown")
timed_states = pytest.mark.parametrize(
    ("state", "policy_args", "seconds"),
    [
        (S.WAIT_FOR_JOBS_REQUIRED, {"wait_timeout": 0}, 0),
        (S.WAIT_FOR_JOBS_REQUIRED, {"wait_timeout": 45}, 45),
        (S.POD_DELETION_REQUIRED, {}, 300),
        (S.POD_DELETION_REQUIRED, {"deletion_timeout": 0}, 0),
        (S.POD_DELETION_REQUIRED, {"deletion_timeout": 17}, 17),
        (S.DRAIN_REQUIRED, {}, 300),
        (S.DRAIN_REQUIRED, {"drain_timeout": 0}, 0),
        (S.DRAIN_REQUIRED, {"drain_timeout": 99}, 99),
        (S.VALIDATION_REQUIRED, {}, 600),
        (S.VALIDATION_REQUIRED, {"wait_timeout": 5, "deletion_timeout": 5, "drain_timeout": 5}, 600),
    ],
    ids=lambda value: value.value if isinstance(value, UpgradeState) else str(value),
)


def load_generator() -> ModuleType:
    return hack_scripts.load("gen_upgrade_docs")


generator = load_generator()


# --- the states -------------------------------------------------------------------------------


def test_label_values_are_the_seeds() -> None:
    assert [state.value for state in UpgradeState] == SEED_STATES


def test_every_state_has_one_rule() -> None:
    assert sorted(upgrade_plan.TABLE) == sorted(UpgradeState)
    assert all(rule.state is state for state, rule in upgrade_plan.TABLE.items())


@pytest.mark.parametrize("value", ["", None, "upgrade-donee", "Upgrade-Done"])
def test_unrecognised_labels_read_as_unknown(value: str | None) -> None:
    assert upgrade_observations.parse_state(value) is S.UNKNOWN


@all_states
def test_every_label_value_parses_to_its_state(state: UpgradeState) -> None:
    assert upgrade_observations.parse_state(state.value) is state


# --- the graph --------------------------------------------------------------------------------


def _successors(state: UpgradeState) -> set[UpgradeState]:
    return {edge.target for edge in upgrade_plan.TABLE[state].edges}


def _reachable(start: UpgradeState) -> set[UpgradeState]:
    seen = {start}
    todo = [start]
    while todo:
        for successor in _successors(todo.pop()) - seen:
            seen.add(successor)
            todo.append(successor)
    return seen


def test_every_state_is_reachable_from_the_empty_label() -> None:
    assert _reachable(S.UNKNOWN) == set(UpgradeState)


@all_states
def test_every_state_can_reach_upgrade_done(state: UpgradeState) -> None:
    assert S.UPGRADE_DONE in _reachable(state) | {state}


@all_states
def test_no_edge_loops_to_its_own_state(state: UpgradeState) -> None:
    assert state not in _successors(state)


@all_states
def test_every_edge_is_described(state: UpgradeState) -> None:
    rule = upgrade_plan.TABLE[state]
    assert rule.meaning
    for edge in rule.edges:
        assert edge.when
        assert bool(edge.actions) == bool(edge.doing), "an edge with actions says what they do"
    assert bool(rule.work) == bool(rule.work_doing)
    assert bool(rule.on_enter) == bool(rule.on_enter_doing)


def test_only_the_flow_holds_slots() -> None:
    flow = _reachable(S.CORDON_REQUIRED) - {S.UPGRADE_DONE, S.UPGRADE_REQUIRED}
    assert flow == upgrade_plan.HOLDS_SLOT
    assert upgrade_plan.HOLDS_SLOT - {S.UPGRADE_FAILED} == upgrade_plan.IN_PROGRESS


def test_only_upgrade_required_enters_the_flow() -> None:
    """A slot is the only way in: no other state leads into an in-progress state from outside."""
    for state, rule in upgrade_plan.TABLE.items():
        if state in upgrade_plan.HOLDS_SLOT:
            continue
        into_flow = {edge.target for edge in rule.edges} & upgrade_plan.HOLDS_SLOT
        assert into_flow == ({S.CORDON_REQUIRED} if state is S.UPGRADE_REQUIRED else set()), state


# --- timers and timeouts ------------------------------------------------------------------------


def test_timed_states_have_their_own_timer() -> None:
    timed = {state: rule for state, rule in upgrade_plan.TABLE.items() if rule.timeout is not None}
    assert set(timed) == {
        S.WAIT_FOR_JOBS_REQUIRED,
        S.POD_DELETION_REQUIRED,
        S.DRAIN_REQUIRED,
        S.POD_RESTART_REQUIRED,
        S.VALIDATION_REQUIRED,
    }
    timers = [rule.timer for rule in timed.values()]
    assert sorted(t for t in timers if t) == sorted(upgrade_observations.TIMER_ANNOTATIONS)
    assert all(rule.timer is None for rule in upgrade_plan.TABLE.values() if rule.timeout is None)


@timed_states
def test_each_timeout_reads_its_policy_field(
    state: UpgradeState, policy_args: dict[str, int], seconds: int
) -> None:
    timeout = upgrade_plan.TABLE[state].timeout
    assert timeout is not None
    assert timeout.seconds(policy(**policy_args)) == seconds


def test_nvidia_annotation_names_are_kept() -> None:
    assert (
        upgrade_observations.WAIT_FOR_COMPLETION_START
        == "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time"
    )
    assert upgrade_observations.VALIDATION_START == "nvidia.com/gpu-driver-upgrade-validation-start-time"
    assert (
        upgrade_observations.INITIAL_UNSCHEDULABLE
        == "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
    )
    for key in (*upgrade_observations.TIMER_ANNOTATIONS, upgrade_observations.CORDONED_BY_UPGRADE):
        assert key.startswith("nvidia.com/gpu-driver-upgrade")


def test_timestamps_round_trip_in_unix_seconds() -> None:
    from tests.unit._upgrades import NOW

    assert upgrade_observations.format_timestamp(NOW) == str(int(NOW.timestamp()))
    assert upgrade_observations.parse_timestamp(upgrade_observations.format_timestamp(NOW)) == NOW
    assert upgrade_observations.parse_timestamp("yesterday") is None
    assert upgrade_observations.parse_timestamp(None) is None


# --- wire strings -----------------------------------------------------------------------------------


@all_states
def test_event_message_is_the_seeds(state: UpgradeState) -> None:
    assert (
        upgrade_observations.event_message(state)
        == f"Successfully updated node state label to [{state.value}]"
    )
    assert upgrade_observations.EVENT_REASON == "GPUDriverUpgrade"


@pytest.mark.parametrize(
    ("resource", "gpu"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/sharedgpu", False),
        ("nvidia.com/mig-1g.5gb", True),
        ("nvidia.com/mig.config", False),
        ("cpu", False),
        ("amd.com/gpu", False),
    ],
)
def test_gpu_resources(resource: str, gpu: bool) -> None:
    assert upgrade_observations.is_gpu_resource(resource) is gpu


# --- the generated documentation -------------------------------------------------------------------


def test_docs_are_up_to_date() -> None:
    assert not generator.stale(), "run hack/gen_upgrade_docs.py and commit docs/upgrade-state-machine.md"


@all_states
def test_docs_show_every_state_and_edge(state: UpgradeState) -> None:
    text = generator.render()
    state_id = state.value.replace("-", "_") or "unknown"
    assert f'state "{state.value or "(empty)"}" as {state_id}' in text
    for edge in upgrade_plan.TABLE[state].edges:
        target_id = edge.target.value.replace("-", "_") or "unknown"
        assert f"    {state_id} --> {target_id}: " in text
        assert edge.when in text


def test_check_mode_detects_drift(tmp_path: Path) -> None:
    target = tmp_path / generator.TARGET
    target.parent.mkdir(parents=True)
    target.write_text(generator.render())
    assert not generator.stale(tmp_path)
    target.write_text(generator.render().replace("upgrade-failed", "upgrade-broken", 1))
    assert generator.stale(tmp_path)
    target.unlink()
    assert generator.stale(tmp_path)


def test_check_mode_exit_code() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "gen_upgrade_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr

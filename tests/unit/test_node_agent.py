"""The simulated node agent's pacing (ocp_gpu/harness/node_agent.py).

We test these aspects: the wait between passes follows the CPU a pass used, not its wall
time, and is bounded, so a pass that spent minutes waiting on a busy apiserver is followed
at once by the next one (at 1,000 nodes the wait was twice the wall time: ten silent
minutes while 239 validators stayed Pending); every request has a bounded timeout; the
validator waits for the operands its own init containers validate.
"""

from __future__ import annotations

import pytest

from ocp_gpu.harness import node_agent
from ocp_gpu.model import operands
from ocp_gpu.rendering import validator


@pytest.mark.parametrize(
    ("interval", "cpu_s", "expected"),
    [
        # A cheap pass: the configured interval.
        (0.5, 0.01, 0.5),
        # A pass that used 1.5 s of CPU: twice that, the agent's share of the cores kept to a third.
        (0.5, 1.5, 3.0),
        # A pass that used a minute of CPU (thousands of pods parsed): never more than the cap.
        (0.5, 60.0, node_agent.MAX_PASS_WAIT),
        # Even a long configured interval is capped: the cap is what keeps Pending pods from
        # waiting minutes.
        (30.0, 0.0, node_agent.MAX_PASS_WAIT),
    ],
)
def test_pass_wait(interval: float, cpu_s: float, expected: float) -> None:
    assert node_agent.pass_wait(interval, cpu_s) == pytest.approx(expected)


def test_a_long_pass_of_waiting_on_the_apiserver_is_followed_at_once() -> None:
    # The 1,000-node set-up's pass: ~6 minutes of wall time, a few seconds of CPU. The next
    # pass must come within the cap, not after twice the wall time.
    assert node_agent.pass_wait(0.5, 3.0) <= node_agent.MAX_PASS_WAIT
    assert node_agent.MAX_PASS_WAIT <= 10.0


def test_every_request_has_a_timeout() -> None:
    connect, read = node_agent.REQUEST_TIMEOUT
    assert 0 < connect <= 30
    assert 0 < read <= 300


def _validator_pod(*containers: str) -> dict[str, object]:
    return {"spec": {"initContainers": [{"name": name} for name in containers]}}


def test_the_validator_waits_for_what_its_init_containers_validate() -> None:
    every = _validator_pod("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")
    assert node_agent.validated_operands(every) == (operands.CONTAINER_TOOLKIT, operands.DEVICE_PLUGIN)
    no_plugin = _validator_pod("driver-validation", "toolkit-validation", "cuda-validation")
    assert node_agent.validated_operands(no_plugin) == (operands.CONTAINER_TOOLKIT,)
    assert node_agent.validated_operands(_validator_pod("driver-validation", "cuda-validation")) == ()
    assert node_agent.validated_operands({"spec": {}}) == ()


def test_validated_containers_are_the_ones_the_operator_renders() -> None:
    """The agent's container names must match rendering/validator.py, or it would wait for nothing."""
    rendered = {f"{name}-validation" for name in validator.VALIDATIONS}
    assert set(node_agent.VALIDATED_CONTAINERS) <= rendered

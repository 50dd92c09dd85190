"""We test these aspects of input limits and messages, without a server:

- condition and Event messages quoting user input are bounded (a 10 KB value is cut, with a
  note of how much was left out), and a bounded message is stable (compares equal next pass);
- a driver downgrade is recognised from the image tags (510.85.02 below 550.90.07), and
  digests, equal or newer versions and unparsable tags are not called downgrades;
- `ocp-gpu run --kubeconfig /nonexistent` prints one line naming the path and exits 2.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ocp_gpu.planning.drivers import driver_downgrades
from ocp_gpu.planning.status import conditions


def test_long_messages_are_bounded_and_stable() -> None:
    huge = "driver.version: " + "9" * 10_000
    condition = conditions.Condition("Error", True, "InvalidSpec", huge)
    assert len(condition.message) == conditions.CONDITION_MESSAGE_LIMIT
    assert condition.message.endswith("more characters)")
    assert conditions.Condition("Error", True, "InvalidSpec", huge).message == condition.message
    assert conditions.Condition("Ready", True, "Reconciled", "short").message == "short"
    event = conditions.bounded_message(huge, conditions.EVENT_MESSAGE_LIMIT)
    assert len(event) == conditions.EVENT_MESSAGE_LIMIT and event.startswith("driver.version: 999")


@pytest.mark.parametrize(
    ("running", "wanted", "downgrade"),
    [
        ("nvcr.io/nvidia/driver:550.90.07-rhel9.4", "nvcr.io/nvidia/driver:510.85.02-rhel9.4", True),
        (
            "nvcr.io/nvidia/driver:550.90.07-ubuntu22.04",
            "nvcr.io/nvidia/driver:550.127.05-ubuntu22.04",
            False,
        ),
        ("nvcr.io/nvidia/driver:550.90.07-rhel9.4", "nvcr.io/nvidia/driver:550.90.07-rhel9.6", False),
        ("nvcr.io/nvidia/driver@sha256:" + "a" * 64, "nvcr.io/nvidia/driver:510.85.02-rhel9.4", False),
        ("nvcr.io/nvidia/driver:latest", "nvcr.io/nvidia/driver:510.85.02-rhel9.4", False),
        (
            "registry:5000/nvidia/driver:570-5.14.0-427.el9.x86_64-rhel9.4",
            "registry:5000/nvidia/driver:550-5.14.0-427.el9.x86_64-rhel9.4",
            True,
        ),
    ],
)
def test_downgrade_is_recognised_from_the_tags(running: str, wanted: str, downgrade: bool) -> None:
    found = driver_downgrades.plan_downgrade("nvidia-driver-daemonset-x", running, wanted)
    assert (found is not None) is downgrade
    if found is not None:
        assert (
            "downgrade" in found.message and found.wanted in found.message and found.running in found.message
        )


def test_run_with_a_missing_kubeconfig_says_so_in_one_line(tmp_path: object) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ocp_gpu.cli", "run", "--kubeconfig", "/nonexistent/kubeconfig"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "/nonexistent/kubeconfig" in lines[0], result.stderr
    assert "Traceback" not in result.stderr

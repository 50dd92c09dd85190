"""We test the harness's stand-in for the kubelet restarting the operator's container
(`OperatorProcess(restart_on_exit=True)`, ocp_gpu_harness/operating.py): a process that exits on
its own is started again with the same identity, the exit is recorded as a crash unless it was a
deposition, and after `stop()` nothing is started again. A real `ocp-gpu run`, no server: given a
kubeconfig that does not exist it exits 2 at once, which is the crash here."""

from __future__ import annotations

import time
from pathlib import Path

from ocp_gpu_harness import operating
from ocp_gpu_harness.polling import wait_for


def test_an_operator_that_exits_on_its_own_is_restarted_and_its_crash_recorded(tmp_path: Path) -> None:
    log = tmp_path / "operator.log"
    proc = operating.OperatorProcess(tmp_path / "no-kubeconfig", "ns", log, restart_on_exit=True).start()
    try:
        # Budget 120 s: two interpreter starts and imports on a loaded 2-core machine.
        wait_for(lambda: len(proc.exits) >= 2, 120, what="two exits, so one restart")
        assert proc.crashes == proc.exits
        assert {e.code for e in proc.exits} == {2}
        # Each run of the same process appended its error to the one log.
        assert log.read_text().count("does not exist or is not a file") >= 2
    finally:
        proc.stop()
    stopped_with = len(proc.exits)
    time.sleep(operating.RESTART_DELAY_S + 1)  # the window in which a restart would have come
    assert not proc.running()
    assert len(proc.exits) == stopped_with


def test_an_operator_killed_by_the_test_is_not_restarted(tmp_path: Path) -> None:
    proc = operating.OperatorProcess(
        tmp_path / "no-kubeconfig", "ns", tmp_path / "operator.log", restart_on_exit=True
    ).start()
    proc.kill()  # a crash the test makes (e.g. the chaos of a killed leader): no kubelet brings it back
    time.sleep(operating.RESTART_DELAY_S + 1)  # the window in which a restart would have come
    assert proc.exits == [] and not proc.running()

"""We test these aspects of how the demo reports a failure, without a server:

- a step that fails makes `demo.main` return 1 and print, on stderr, the step, the error, and
  where the state is (or that none was made yet), never a traceback;
- a command that fails or is missing is reported with the command line and its stderr;
- an unexpected error inside a step names the innermost step, and its traceback goes to a file
  in the state directory rather than to the screen;
- a wait that times out names what it waited for and what it saw last;
- a second Ctrl-C while the demo stops what it started is ignored (the first one interrupts).

The same on the local control plane (a missing kubectl, Ctrl-C at several moments, whole runs):
tests/e2e/test_demo.py.
"""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path

import pytest

from ocp_gpu_harness import binaries, demo


def test_a_failing_step_is_explained_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_binaries() -> None:
        raise binaries.BinariesMissingError("hack/build-control-plane.sh failed with exit code 1")

    monkeypatch.setattr(demo.binaries, "ensure_binaries", no_binaries)
    assert demo.main(None, live=False, follow=False) == 1
    out, err = capsys.readouterr()
    assert "demo failed at step: locate (or build) the local control plane binaries" in err
    assert "error: BinariesMissingError: hack/build-control-plane.sh failed with exit code 1" in err
    assert "no state directory was created yet" in err
    assert "Traceback" not in out + err


def test_a_missing_command_is_named_with_its_command_line() -> None:
    with pytest.raises(demo.StepFailed) as failed:
        demo._run(["ocp-gpu-no-such-command", "apply", "-f", "x.yaml"])
    assert failed.value.command == ("ocp-gpu-no-such-command", "apply", "-f", "x.yaml")
    assert "ocp-gpu-no-such-command not found" in failed.value.reason
    assert "install it or put it on PATH" in failed.value.reason


def test_a_failing_command_is_reported_with_its_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    command = [sys.executable, "-c", "import sys; print('the reason', file=sys.stderr); sys.exit(3)"]
    with pytest.raises(demo.StepFailed) as failed, demo._step("install the ClusterPolicy CRD"):
        demo._run(command)
    assert (failed.value.step, failed.value.reason, failed.value.stderr.strip()) == (
        "install the ClusterPolicy CRD",
        "exit code 3",
        "the reason",
    )
    demo._report_failure(demo.Console(stderr=True, width=300), failed.value, tmp_path)
    err = capsys.readouterr().err
    assert "demo failed at step: install the ClusterPolicy CRD" in err
    assert f"command: {sys.executable} -c" in err
    assert "stderr:\n    the reason" in err
    assert f"state kept in {tmp_path}: control plane logs in {tmp_path / 'cluster' / 'logs'}/" in err


def test_an_unexpected_error_names_the_innermost_step_and_saves_its_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(demo.StepFailed) as failed, demo._step("run the demo"), demo._step("opt gpu-5 out"):
        {}["missing"]
    assert failed.value.step == "opt gpu-5 out"
    assert failed.value.reason == "KeyError: 'missing'"
    demo._report_failure(demo.Console(stderr=True, width=300), failed.value, tmp_path)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"the traceback, for a bug report: {tmp_path / 'demo-error.txt'}" in err
    assert "Traceback" in (tmp_path / "demo-error.txt").read_text()


def test_a_wait_that_times_out_says_what_it_waited_for_and_saw() -> None:
    with pytest.raises(demo.StepFailed) as failed:
        demo._wait("cluster-policy to be ready", lambda: False, 0.01, lambda: "state 'notReady'")
    assert failed.value.reason == (
        "timed out after 0s waiting for cluster-policy to be ready; last seen: state 'notReady'"
    )


def test_a_second_ctrl_c_while_stopping_is_ignored() -> None:
    interrupts = demo._Interrupts()
    with pytest.raises(KeyboardInterrupt):
        interrupts._handle(2, None)
    assert interrupts.interrupted and interrupts.stopping
    interrupts._handle(2, None)  # no KeyboardInterrupt: the stopping goes on


def test_a_ctrl_c_inside_loggings_fork_hooks_is_sent_again_not_lost() -> None:
    """logging's lock hooks run around every fork (os.register_at_fork) and print and drop an
    exception: a KeyboardInterrupt raised there was lost, and the demo ran to its end (a stress
    run of tests/e2e/test_demo.py, Ctrl-C while the control plane's processes were forked)."""
    interrupts = demo._Interrupts()
    sent: list[int] = []
    interrupts.send_again = sent.append
    in_logging = logging.Logger.findCaller.__code__  # any code of logging/__init__.py
    assert in_logging.co_filename == logging.__file__
    frame = types.SimpleNamespace(f_code=in_logging)
    interrupts._handle(2, frame)  # type: ignore[arg-type]
    assert sent == [2] and interrupts.interrupted and not interrupts.stopping
    # Sent again, it comes elsewhere: raised, and the demo stops.
    with pytest.raises(KeyboardInterrupt):
        interrupts._handle(2, None)
    assert interrupts.stopping

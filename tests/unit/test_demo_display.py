"""We test these aspects of the demo's display, without a server:

- without a terminal, a snapshot is printed only when it differs from the last one printed
  (a pipe gets one snapshot per change, not one every few seconds);
- the plain-text rendering carries no terminal escapes.
"""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console

from ocp_gpu_harness import demo


def test_a_pipe_gets_a_snapshot_only_when_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=150, force_terminal=False)
    state = {"text": "state: notReady"}
    calls = {"n": 0}

    def render() -> str:
        calls["n"] += 1
        return state["text"]

    # NB: the real interval is 5 s; the refresh loop reads it from the closure, so shorten the wait.
    original_wait = demo.threading.Event.wait

    def quick_wait(self: object, timeout: float | None = None) -> bool:
        return original_wait(self, 0.01 if timeout else timeout)  # type: ignore[arg-type]

    monkeypatch.setattr(demo.threading.Event, "wait", quick_wait)
    with demo._display(console, False, render):
        deadline = time.monotonic() + 5
        while calls["n"] < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        state["text"] = "state: ready"
        seen = calls["n"]
        while calls["n"] < seen + 20 and time.monotonic() < deadline:
            time.sleep(0.01)
    out = buffer.getvalue()
    assert calls["n"] >= 40, "the display did not refresh"
    assert out.count("state: notReady") == 1 and out.count("state: ready") == 1
    assert "\x1b[" not in out

"""We test `ocp_gpu.memory`: the trim runs once the loop has been idle after work, and only then."""

from __future__ import annotations

import asyncio

import pytest

from ocp_gpu import memory


def test_trims_once_after_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[float] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        monkeypatch.setattr(memory, "release_free_memory", lambda: trims.append(loop.time()))
        # NB: the idle time is many times the gaps in the burst, so that a loaded machine (a 10 ms
        # sleep taking 60 ms at load 13) cannot make a gap look idle.
        trimmer = memory.Trimmer(idle_s=0.3)
        began = loop.time()
        for _ in range(5):  # a burst of passes: each one restarts the idle timer
            trimmer.worked()
            await asyncio.sleep(0.01)
        assert trims == []
        await asyncio.sleep(0.6)
        assert len(trims) == 1 and trims[0] - began >= 0.3 + 4 * 0.01
        await asyncio.sleep(0.4)  # quiet: no further trim
        assert len(trims) == 1

    asyncio.run(scenario())


def test_release_free_memory_runs_here() -> None:
    # glibc on this machine: the trim function is found and callable.
    assert memory._malloc_trim() is not None
    memory.release_free_memory()

"""We test `ocp_gpu.memory`: the trim runs once the loop has been idle after work, and only then;
asyncio's TLS connections get the small read buffer the operator sets."""

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


def test_tls_connections_get_a_small_read_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio.sslproto
    import ssl

    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", 256 * 1024)

    def buffer_size() -> int:
        loop = asyncio.new_event_loop()
        try:
            protocol = asyncio.sslproto.SSLProtocol(
                loop, asyncio.Protocol(), ssl.create_default_context(), None, server_hostname="x"
            )
            return len(protocol._ssl_buffer)
        finally:
            loop.close()

    assert buffer_size() == 256 * 1024
    assert memory.small_tls_read_buffers() is True
    assert buffer_size() == memory.TLS_READ_BUFFER
    # Never raised: a smaller size asked for later wins, a bigger one changes nothing.
    memory.small_tls_read_buffers(1024 * 1024)
    assert buffer_size() == memory.TLS_READ_BUFFER

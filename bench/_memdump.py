"""Memory dumps from inside a running `ocp-gpu run`, on SIGUSR1 (memory_profile.py, compare_nvidia.py).

The operator is started with ``environment(scratch, native)``: a ``sitecustomize`` on its
PYTHONPATH installs a SIGUSR1 handler that writes the dump to ``$OCP_GPU_MEMDUMP``. Native
(``sys._debugmallocstats``, no tracemalloc): VmRSS and its anonymous part (smaps_rollup) and
pymalloc's arenas (blocks in use against free blocks and unused pools: fragmentation CPython
cannot return). Traced (PYTHONTRACEMALLOC): live Python objects by file and by line.

NB: the election child runs ``python -S`` (no site, so no sitecustomize): it is only measured.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

SITECUSTOMIZE = """
import gc, os, signal, tracemalloc

def _dump(signum, frame):
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    by_file = snapshot.statistics("filename")
    with open(os.environ["OCP_GPU_MEMDUMP"] + ".part", "w") as out:
        rss = int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) / 1024
        traced = sum(s.size for s in by_file) / 2**20
        out.write(f"traced {traced:.1f} MiB, VmRSS {rss:.1f} MiB\\n")
        out.write("-- by file --\\n")
        for stat in by_file[:25]:
            out.write(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d}  {stat.traceback[0].filename}\\n")
        out.write("-- by line --\\n")
        for stat in snapshot.statistics("lineno")[:25]:
            frame = stat.traceback[0]
            out.write(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d}  {frame.filename}:{frame.lineno}\\n")
    os.replace(os.environ["OCP_GPU_MEMDUMP"] + ".part", os.environ["OCP_GPU_MEMDUMP"])

def _native(signum, frame):
    import sys
    path = os.environ["OCP_GPU_MEMDUMP"]
    rollup = {}
    for line in open("/proc/self/smaps_rollup"):
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            rollup[parts[0].rstrip(":")] = int(parts[1]) / 1024
    with open(path + ".part", "w") as out:
        out.write(f"VmRSS {rollup['Rss']:.1f} MiB, anonymous {rollup['Anonymous']:.1f} MiB\\n")
        out.write("-- pymalloc --\\n")
        out.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    os.replace(path + ".part", path)

if os.environ.get("OCP_GPU_MEMDUMP"):
    signal.signal(signal.SIGUSR1, _native if os.environ.get("OCP_GPU_NATIVE") else _dump)
"""

# The lines of sys._debugmallocstats() worth printing.
PYMALLOC_LINES = (
    "arenas allocated current",
    "bytes in allocated blocks",
    "bytes in available blocks",
    "unused pools",
)


def environment(scratch: Path, native: bool) -> dict[str, str]:
    """The operator's extra environment: the sitecustomize (written into `scratch`) and the dump path."""
    Path(scratch, "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {
        "PYTHONPATH": os.pathsep.join(p for p in (str(scratch), os.environ.get("PYTHONPATH", "")) if p),
        "OCP_GPU_MEMDUMP": str(Path(scratch, "memory.txt")),
        **({"OCP_GPU_NATIVE": "1"} if native else {"PYTHONTRACEMALLOC": "1"}),
    }


def take(pid: int, dump: Path, timeout: float = 120) -> str:
    """Ask the process for a dump (SIGUSR1); its text."""
    dump.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not dump.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no memory dump from {pid} in {timeout:.0f} s")
        time.sleep(0.2)
    return dump.read_text()


def summary(text: str, pid: int, native: bool) -> str:
    """The dump as printed: native ones reduced to RSS, pymalloc's arenas and the election child."""
    if not native:
        return text
    head, _, stats = text.partition("-- pymalloc --\n")
    lines = [head + "-- pymalloc --"]
    lines += [line for line in stats.splitlines() if any(k in line for k in PYMALLOC_LINES)]
    lines += [f"election child {child}: VmRSS {vm_rss_mib(child):.1f} MiB" for child in children(pid)]
    return "\n".join(lines)


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def vm_rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    line = next(line for line in status.splitlines() if line.startswith("VmRSS"))
    return int(line.split()[1]) / 1024

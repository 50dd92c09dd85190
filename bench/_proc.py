"""CPU and memory of a process tree, from /proc (the operator and its election child alike).

ocp-gpu runs its leader election in a child process (kube/electing.py): a benchmark that read
the operator's own /proc entry would leave that child out. Every figure here sums the process
and its live descendants; CPU also counts the children they have already reaped (cutime,
cstime). VmHWM summed over a tree is an upper bound of the tree's peak (the processes' peaks
need not coincide).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Final

CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """The process and its descendants, alive now (each thread's children list)."""
    found = [pid]
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            found += tree(int(child))
    return found


def _own_cpu_s(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    # NB: the command name (field 2) may hold spaces; count the fields after its ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    # utime, stime, and cutime, cstime: the children it has waited for.
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLOCK_TICKS


def own_cpu_s(pid: int) -> float:
    """utime + stime of this one process (all its threads), no children; NaN when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_s(pid: int) -> float:
    """CPU seconds of the process tree so far; NaN when the process is gone."""
    try:
        total = _own_cpu_s(pid)
    except OSError:
        return math.nan
    for member in tree(pid)[1:]:
        try:
            total += _own_cpu_s(member)
        except OSError:
            continue  # it ended meanwhile: its parent's cutime has it once reaped
    return total


def _own_status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def status_kib(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM) summed over the tree, in KiB; 0 if gone."""
    return sum(_own_status_kib(member, field) for member in tree(pid))

"""Run the team's compare_nvidia.py with CPU and memory counted over each operator's process tree.

The tool reads CPU seconds and RSS from ``/proc/<pid>`` of the operator process alone.  ocp-gpu
runs its leader election in a child process (kube/electing.py): counting the parent alone would
leave that child's memory and CPU out, so this wrapper replaces the tool's two readers with ones
that sum the process and all its descendants (and, for CPU, the children they have already
reaped), for both operators alike (NVIDIA's is one process: the same numbers as before).  VmHWM
summed over the tree is an upper bound of the tree's peak (the processes' peaks need not coincide).

Run: ``python bench/_tree_tool.py <compare_nvidia.py> <its arguments>`` (bench/compare_nvidia.py does).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


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
    fields = stat[stat.rindex(")") + 2 :].split()
    # utime, stime, and cutime, cstime: the children it has waited for.
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICK


def cpu_s(pid: int) -> float:
    try:
        root = _own_cpu_s(pid)
    except OSError:
        return float("nan")
    total = root
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
    return sum(_own_status_kib(member, field) for member in tree(pid))


def main() -> None:
    tool = Path(sys.argv[1])
    spec = importlib.util.spec_from_file_location("compare_nvidia_tool", tool)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.argv = [str(tool), *sys.argv[2:]]
    spec.loader.exec_module(module)
    # NB: the tool's functions look these up as module globals at each call.
    module.cpu_s = cpu_s
    module.status_kib = status_kib
    module.main()


if __name__ == "__main__":
    main()

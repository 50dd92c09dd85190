"""Run the team's compare_nvidia.py with CPU and memory counted over each operator's process tree.

The tool reads CPU seconds and RSS from ``/proc/<pid>`` of the operator process alone.  ocp-gpu
runs its leader election in a child process (kube/electing.py): counting the parent alone would
leave that child's memory and CPU out, so this wrapper replaces the tool's two readers with ones
that sum the process and all its descendants (and, for CPU, the children they have already
reaped), for both operators alike (NVIDIA's is one process: the same numbers as before).  VmHWM
summed over the tree is an upper bound of the tree's peak (the processes' peaks need not coincide).

With ``--auto-upgrade true|false`` before the tool's path it writes
``driver.upgradePolicy.autoUpgrade`` into the tool's ClusterPolicy for both operators: the tool's
policy leaves it out, and the two defaults differ (NVIDIA's CRD: false, no upgrade controller;
ours, the seed's: true, an upgrade-state label and a node patch per GPU node once its driver runs).

With ``--whole-stack`` (before the tool's path, after ``--auto-upgrade``) both operators are asked for
NVIDIA's OperatorHub example policy, every operand on, and the time until every operand pod is Ready
on every GPU node is measured (bench/_whole_stack.py).

The tool imports the harness as ``ocp_gpu.harness``, where it was before it became the top-level
``ocp_gpu_harness``: this wrapper makes the old name point at it.

Run: ``python bench/_tree_tool.py [--auto-upgrade true|false] [--whole-stack] <compare_nvidia.py> <its
arguments>`` (bench/compare_nvidia.py does).

With ``$OCP_GPU_MEMDUMP`` set (compare_nvidia.py --memory-dumps: the operator then has the
SIGUSR1 handler of bench/_memdump.py), each RSS the tool records from its main thread (before
the ClusterPolicy; idle, after the steady window) is followed by a native dump of the operator
(pymalloc's arenas, the election child's RSS), saved beside the dump path as
``memdump-<n>.txt``; the sampler thread's reads (the peak) take none.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

import _whole_stack
from _memdump import summary, take
from _proc import cpu_s, status_kib

# The harness's modules the tool imports, under the name it imports them by.
HARNESS_MODULES = ("cluster", "nodes", "openshift", "operating")


def _dumping(dump: Path) -> object:
    taken = 0

    def read(pid: int, field: str) -> int:
        nonlocal taken
        value = status_kib(pid, field)
        if field == "VmRSS" and threading.current_thread() is threading.main_thread():
            try:
                text = summary(take(pid, dump), pid, native=True)
            except (OSError, TimeoutError) as error:
                # NVIDIA's operator (no handler: SIGUSR1 is not sent to it, see below) or a gone pid.
                text = f"no dump: {error}"
            taken += 1
            (dump.parent / f"memdump-{taken}.txt").write_text(f"tree VmRSS {value / 1024:.1f} MiB\n{text}\n")
        return value

    return read


def alias_harness() -> None:
    """The harness under the name the tool imports it by (``ocp_gpu.harness``)."""
    harness = importlib.import_module("ocp_gpu_harness")
    sys.modules.setdefault("ocp_gpu.harness", harness)
    for name in HARNESS_MODULES:
        sys.modules.setdefault(f"ocp_gpu.harness.{name}", importlib.import_module(f"ocp_gpu_harness.{name}"))


def main() -> None:
    auto_upgrade: bool | None = None
    if sys.argv[1] == "--auto-upgrade":
        auto_upgrade = {"true": True, "false": False}[sys.argv[2]]
        del sys.argv[1:3]
    whole_stack = sys.argv[1] == "--whole-stack"
    if whole_stack:
        del sys.argv[1]
    alias_harness()
    tool = Path(sys.argv[1])
    spec = importlib.util.spec_from_file_location("compare_nvidia_tool", tool)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.argv = [str(tool), *sys.argv[2:]]
    spec.loader.exec_module(module)
    # NB: the tool's functions look these up as module globals at each call.
    module.cpu_s = cpu_s
    dump = os.environ.get("OCP_GPU_MEMDUMP")
    # NB: only ocp-gpu's runs: SIGUSR1 would end NVIDIA's operator (no handler for it).
    ours = "--operators" in sys.argv and sys.argv[sys.argv.index("--operators") + 1] == "ocp-gpu"
    module.status_kib = _dumping(Path(dump)) if dump and ours else status_kib
    if auto_upgrade is not None:
        driver = module.SPEC["driver"]
        module.SPEC["driver"] = {
            **driver,
            "upgradePolicy": {**driver.get("upgradePolicy", {}), "autoUpgrade": auto_upgrade},
        }
    if whole_stack:
        from ocp_gpu.model import releases

        _whole_stack.install(module, releases.with_release_defaults({}), module.OperatorProcess)
    module.main()


if __name__ == "__main__":
    main()

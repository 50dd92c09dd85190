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

Run: ``python bench/_tree_tool.py [--auto-upgrade true|false] <compare_nvidia.py> <its arguments>``
(bench/compare_nvidia.py does).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from _proc import cpu_s, status_kib


def main() -> None:
    auto_upgrade: bool | None = None
    if sys.argv[1] == "--auto-upgrade":
        auto_upgrade = {"true": True, "false": False}[sys.argv[2]]
        del sys.argv[1:3]
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
    if auto_upgrade is not None:
        driver = module.SPEC["driver"]
        module.SPEC["driver"] = {
            **driver,
            "upgradePolicy": {**driver.get("upgradePolicy", {}), "autoUpgrade": auto_upgrade},
        }
    module.main()


if __name__ == "__main__":
    main()

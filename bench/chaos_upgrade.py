"""Chaos during a driver upgrade: the operator SIGKILLed at random moments (and restarted,
as a kubelet would) while N GPU nodes upgrade their driver and the Machine Config Operator
moves the same pool to a new RHCOS. Issue 8's first chaos benchmark.

The scenario, the invariants and the measures are `ocp_gpu_harness.chaos` (see its
docstring): the same run without faults first (the baseline: wall time and API writes to
compare with), then with ``--kills`` SIGKILLs spread at random over the baseline's
duration. ``--replicas 2 --kill-leader`` runs two replicas and kills whichever leads
(a standby takes over through the Lease).

Results: a table, and ``bench/results/chaos-upgrade-<N>[-leader].json`` with the commit,
the load average and every fault fired.

Run: ``.venv/bin/python bench/chaos_upgrade.py [--nodes 500] [--kills 50] [--replicas 2 --kill-leader]``.
Exit status 1 when an invariant broke.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from _chaos import add_common_arguments, run_with_baseline


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_common_arguments(parser, nodes=500)
    parser.add_argument("--kills", type=int, default=50, help="operator SIGKILLs (default 50)")
    parser.add_argument("--replicas", type=int, default=1, help="operator replicas (default 1)")
    parser.add_argument("--kill-leader", action="store_true", help="kill the leader, not any replica")
    args = parser.parse_args(argv)
    name = args.name or f"chaos-upgrade-{args.nodes}" + ("-leader" if args.kill_leader else "")
    faults = {"operator_kills": args.kills, "replicas": args.replicas, "kill_leader": args.kill_leader}
    return run_with_baseline(args, faults, name)


if __name__ == "__main__":
    sys.exit(main())

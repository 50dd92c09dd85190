"""Upgrade day at scale (issue 24, item 5): an OpenShift upgrade and a driver version change at
once, on N GPU nodes in three MachineConfigPools, with operator SIGKILLs and apiserver restarts.

The scenario, the invariants and the measures are `ocp_gpu_harness.chaos` with its upgrade-day
options (see its docstring and `ChaosConfig`): ClusterVersion starts applying a new release and
the new RHCOS's Driver Toolkit tag appears at the moment the driver version is patched; the
simulated MCO rolls each pool to the new RHCOS side by side, each with its own
``maxUnavailable``; ClusterVersion says Completed when every pool has moved. Invariants checked
at every watch event (never two driver pods on a node, in flight <= maxParallelUpgrades, no
admin cordon lifted, no two driver DaemonSets for the same nodes) and every second (no node in
one upgrade state longer than its timeout), and at the end (every node upgrade-done on a
current Ready driver of its RHCOS, no orphan DaemonSet, every other operand DaemonSet rolled out
and Ready, the ClusterPolicy ready without an UpgradePreflight condition).

Measured, for the run without faults and the run with them: wall time (the patch -> all of the
above), where the nodes' in-flight time went (waiting on the operator versus on pods), the
node-seconds a slot stood free while a node waited, the operator's writes per node.

Results: ``bench/results/<name>.json`` and ``.md`` (default name ``upgrade-day-<N>``), headed by
the commit measured and the load average.

Run: ``.venv/bin/python bench/upgrade_day.py [--nodes 1000] [--kills 20] [--apiserver-restarts 2]
[--pool-max-unavailable 1 5 10]``. Exit status 1 when an invariant broke.
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
    add_common_arguments(parser, nodes=1000)
    parser.add_argument("--kills", type=int, default=20, help="operator SIGKILLs (default 20)")
    parser.add_argument(
        "--apiserver-restarts", type=int, default=2, help="kube-apiserver restarts (default 2)"
    )
    parser.add_argument(
        "--pool-max-unavailable",
        type=int,
        nargs="+",
        default=[1, 5, 10],
        help="one MachineConfigPool per value, with that maxUnavailable (default 1 5 10)",
    )
    args = parser.parse_args(argv)
    name = args.name or f"upgrade-day-{args.nodes}"
    scenario = {
        "pool_max_unavailable": tuple(args.pool_max_unavailable),
        "openshift_upgrade": True,
        "stack_ready": True,
        # a SIGKILLed operator container restarts in its pod (its Lease identity), with
        # controller-runtime's Lease (15/10/2 s): the 4 s one is lost again and again at load 30
        "same_pod_restarts": True,
        "lease_s": (15.0, 10.0, 2.0),
    }
    faults = {"operator_kills": args.kills, "apiserver_restarts": args.apiserver_restarts}
    heading = (
        f"Upgrade day, {args.nodes} GPU nodes in {len(args.pool_max_unavailable)} pools: OpenShift upgrade "
        f"and driver change, {args.kills} operator SIGKILLs, {args.apiserver_restarts} apiserver restarts"
    )
    return run_with_baseline(args, faults, name, scenario=scenario, markdown=heading)


if __name__ == "__main__":
    sys.exit(main())

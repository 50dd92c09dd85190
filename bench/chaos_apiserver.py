"""Chaos at the apiserver during a driver upgrade: kube-apiserver SIGKILLed and restarted
mid-pass (``--restarts``, default 5), and watches expired by etcd compaction
(``--compactions``, default 2: etcd compacted to its current revision, then the apiserver
restarted so that its watch cache starts after the compaction and every watch resuming
from before gets 410 Gone), while N GPU nodes upgrade their driver and the Machine Config
Operator moves the same pool to a new RHCOS. Issue 8's second chaos benchmark.

The scenario, the invariants and the measures are `ocp_gpu_harness.chaos`; the baseline
is the same run without faults. The operator is restarted whenever it exits (a leader
that cannot renew its Lease while the apiserver is down exits on purpose, as a kubelet
would restart it); exits not explained by an outage are reported as crashes.

Results: a table, and ``bench/results/chaos-apiserver-<N>.json``.

Run: ``.venv/bin/python bench/chaos_apiserver.py [--nodes 500] [--restarts 5] [--compactions 2]``.
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
    parser.add_argument("--restarts", type=int, default=5, help="apiserver kills and restarts (default 5)")
    parser.add_argument("--compactions", type=int, default=2, help="etcd compactions + restart (default 2)")
    parser.add_argument("--replicas", type=int, default=1, help="operator replicas (default 1)")
    args = parser.parse_args(argv)
    name = args.name or f"chaos-apiserver-{args.nodes}"
    faults = {"apiserver_restarts": args.restarts, "compactions": args.compactions, "replicas": args.replicas}
    return run_with_baseline(args, faults, name)


if __name__ == "__main__":
    sys.exit(main())

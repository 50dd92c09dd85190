"""ocp-gpu against NVIDIA's GPU Operator, side by side, with issue 13's targets checked in one table.

A wrapper around the team's measuring tool, ``../shared/tools/compare_nvidia.py`` (or
``$COMPARE_NVIDIA_TOOL``): for each size it runs both operators one after the other on a
fresh local control plane each (OpenShift mode, the same kwok GPU nodes on two RHCOS
versions, the same ClusterPolicy), ocp-gpu from HEAD's committed ``ocp_gpu/`` (so the
numbers belong to a commit while the tree changes), alternating which goes first from one
size to the next (``--first``). Then it writes, per size, ``<out>/compare-nvidia-<N>.json``
(both runs' raw results, the commit, the load average, every target with its numbers and
whether it is met) and ``<out>/compare-nvidia.md`` (the table of every size in that
directory). ``--only ocp-gpu`` measures ocp-gpu alone (5,000 nodes: only the RSS target).

At 5,000 nodes the fake nodes' Lease lasts 200 s (``--node-lease-seconds``; the tool's default,
40 s, below): kwok renews each Lease at a quarter of its duration, and 5,000 renewals every
10 s are more than kwok and the API server keep up with on two cores (nodes then turn NotReady
and their pods are evicted mid-run). ``--memory-dumps``: ocp-gpu's runs also write where its
memory is (bench/_memdump.py, native: pymalloc's arenas, the election child) next to each RSS
the tool records (before the ClusterPolicy, idle), into ``<out>/compare-nvidia-raw/``.

NVIDIA's operator is built from its source outside this repository (never committed): see
bench/README.md, "NVIDIA's operator".

``--auto-upgrade true|false`` writes ``driver.upgradePolicy.autoUpgrade`` into the policy for
both operators (the tool's policy leaves it out, and the CRDs' defaults differ: NVIDIA's false,
ours true as the seed says), so that both do the same work.

``--whole-stack``: both operators get NVIDIA's OperatorHub example policy (every operand on) instead of
the tool's driver-and-toolkit one, and the time from the ClusterPolicy to every operand pod Ready on
every GPU node is measured and held to the same target (bench/_whole_stack.py says what changes);
the start-up CPU then covers the whole stack, and the RSS peak is held to NVIDIA's too. Written to
``compare-nvidia-stack-<N>.json`` and ``compare-nvidia-stack.md``.

Run: ``.venv/bin/python bench/compare_nvidia.py --nodes 100 1000 [--quiet 120] [--moves 3]
[--auto-upgrade false] [--whole-stack]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _memdump
from _common import REPO, RESULTS_DIR, git_commit, load_average, operator_sources

TOOL = Path(os.environ.get("COMPARE_NVIDIA_TOOL", REPO.parent / "shared" / "tools" / "compare_nvidia.py"))
OPERATORS = ("nvidia", "ocp-gpu")

Result = dict[str, Any]


def _median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def _worst(values: list[float] | None) -> float | None:
    # With a handful of samples the worst one stands for the p99.
    return max(values) if values else None


def _ratio_target(name: str, pick: Callable[[Result], float | None], limit: float) -> Callable[..., Result]:
    def check(nvidia: Result | None, ours: Result, nodes: int) -> Result:
        theirs = pick(nvidia) if nvidia else None
        mine = pick(ours)
        ratio = mine / theirs if mine is not None and theirs else None
        return {
            "target": f"{name} ≤ {limit}× NVIDIA's",
            "nvidia": theirs,
            "ocp_gpu": mine,
            "ratio": None if ratio is None else round(ratio, 3),
            "met": None if ratio is None else ratio <= limit,
        }

    return check


def _zero(name: str, pick: Callable[[Result], float | None]) -> Callable[..., Result]:
    def check(nvidia: Result | None, ours: Result, nodes: int) -> Result:
        theirs = pick(nvidia) if nvidia else None
        mine = pick(ours)
        return {"target": f"{name} = 0", "nvidia": theirs, "ocp_gpu": mine, "ratio": None, "met": mine == 0}

    return check


def _rss(nvidia: Result | None, ours: Result, nodes: int) -> Result:
    mine = ours.get("rss_idle_mib")
    theirs = nvidia.get("rss_idle_mib") if nvidia else None
    if nodes >= 5000:
        return {
            "target": "RSS idle ≤ 150 MiB",
            "nvidia": theirs,
            "ocp_gpu": mine,
            "ratio": None,
            "met": mine is not None and mine <= 150,
        }
    limit = 1.0 if nodes < 1000 else 0.5
    return _ratio_target("RSS idle", lambda r: r.get("rss_idle_mib"), limit)(nvidia, ours, nodes)


TARGETS: tuple[Callable[..., Result], ...] = (
    _ratio_target(
        "ClusterPolicy → a driver DaemonSet per RHCOS version",
        lambda r: r.get("policy_to_ds_per_version_s"),
        0.5,
    ),
    _ratio_target(
        "new RHCOS version → its DaemonSet, median", lambda r: _median(r.get("new_version_to_ds_s")), 0.5
    ),
    _ratio_target(
        "new RHCOS version → its DaemonSet, worst (p99)", lambda r: _worst(r.get("new_version_to_ds_s")), 0.5
    ),
    _ratio_target(
        "last node leaves → DaemonSet deleted, median",
        lambda r: _median(r.get("last_node_leaves_to_ds_deleted_s")),
        0.5,
    ),
    _ratio_target(
        "last node leaves → DaemonSet deleted, worst (p99)",
        lambda r: _worst(r.get("last_node_leaves_to_ds_deleted_s")),
        0.5,
    ),
    _ratio_target("start-up CPU (policy created → settled)", lambda r: r.get("cpu_policy_to_settled_s"), 0.5),
    _zero("steady-state reads (the Lease's included)", lambda r: (r.get("steady") or {}).get("reads")),
    _zero(
        "steady-state writes besides the Lease renewal",
        lambda r: (r.get("steady") or {}).get("writes_excl_leases"),
    ),
    _rss,
)


# Issue 24's whole-stack targets, besides TARGETS: as for the driver path, and the RSS peak too.
WHOLE_STACK_TARGETS: tuple[Callable[..., Result], ...] = (
    _ratio_target(
        "ClusterPolicy → every operand pod Ready on every GPU node",
        lambda r: r.get("policy_to_every_operand_ready_s"),
        0.5,
    ),
    _ratio_target("RSS peak", lambda r: r.get("rss_peak_mib"), 1.0),
)


def evaluate(nvidia: Result | None, ours: Result, nodes: int, whole_stack: bool = False) -> list[Result]:
    """Every target of issue 13 against one size's two runs (the RSS one alone at 5,000), and
    with `whole_stack` issue 24's."""
    targets = (*WHOLE_STACK_TARGETS, *TARGETS) if whole_stack else TARGETS
    checks = [check(nvidia, ours, nodes) for check in targets] if nvidia else []
    return checks or [_rss(None, ours, nodes)]


def node_lease_seconds(nodes: int, asked: int | None) -> int:
    """The fake nodes' Lease duration: as asked, else 200 s from 5,000 nodes and 40 s below."""
    if asked is not None:
        return asked
    return 200 if nodes >= 5000 else 40


def run_tool(which: str, nodes: int, args: argparse.Namespace, source: Path, raw: Path) -> Result:
    """One operator at one size through the shared tool; its JSON result."""
    env = {**os.environ, "OCPGPU_SRC": str(source)}
    if args.memory_dumps and which == "ocp-gpu":
        dumps = raw / f"{which}-{nodes}-memdumps"
        dumps.mkdir(parents=True, exist_ok=True)
        env.update(_memdump.environment(dumps, native=True))
    # CPU and RSS over each operator's whole process tree (ocp-gpu's election child included).
    command = [
        sys.executable,
        str(Path(__file__).resolve().parent / "_tree_tool.py"),
        *(["--auto-upgrade", args.auto_upgrade] if args.auto_upgrade else []),
        *(["--whole-stack"] if args.whole_stack else []),
        str(TOOL),
        "--nodes",
        str(nodes),
        "--operators",
        which,
        "--quiet",
        str(args.quiet),
        "--moves",
        str(args.moves),
        "--node-lease-seconds",
        str(node_lease_seconds(nodes, args.node_lease_seconds)),
        "--out",
        str(raw),
    ]
    # The harness is imported from the source tree; the tool runs from the repository root.
    subprocess.run(command, env=env, cwd=REPO, check=True, timeout=args.timeout)
    result: Result = json.loads((raw / f"{which}-{nodes}.json").read_text())
    return result


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def markdown(out: Path, prefix: str = "compare-nvidia") -> str:
    """The table of every <prefix>-<N>.json in `out`."""
    title = "# ocp-gpu vs NVIDIA's GPU Operator, side by side (bench/compare_nvidia.py)"
    if prefix != "compare-nvidia":
        title = "# ocp-gpu vs NVIDIA's GPU Operator, every operand on (bench/compare_nvidia.py --whole-stack)"
    lines = [title, ""]
    sizes = [path for path in out.glob(f"{prefix}-*.json") if path.stem.rsplit("-", 1)[1].isdigit()]
    for path in sorted(sizes, key=lambda p: int(p.stem.rsplit("-", 1)[1])):
        summary = json.loads(path.read_text())
        lines += [
            f"## {summary['nodes']} GPU nodes — commit {summary['commit']}, {summary['measured_at']}",
            "",
            # NB: wrapped: the repository's Markdown prose stays within 120 characters a line.
            textwrap.fill(
                f"Load average at the start / end: {summary['load_average_start']} / "
                f"{summary['load_average_end']}; order: {' then '.join(summary['order'])}."
                + f" Counted: {summary.get('counted', 'the operator process alone')}."
                + f" driver.upgradePolicy.autoUpgrade: {summary.get('auto_upgrade', 'each CRD default')}.",
                width=118,
            ),
            "",
            "| target | NVIDIA | ocp-gpu | ratio | met |",
            "|---|---|---|---|---|",
        ]
        for check in summary["targets"]:
            met = {True: "yes", False: "**no**", None: "n/a"}[check["met"]]
            ratio = "" if check["ratio"] is None else f"{check['ratio']:.2f}×"
            cells = (check["target"], _cell(check["nvidia"]), _cell(check["ocp_gpu"]), ratio, met)
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[100])
    parser.add_argument("--only", choices=OPERATORS, default=None, help="run one operator (5,000: ocp-gpu)")
    parser.add_argument(
        "--first", choices=OPERATORS, default="nvidia", help="who goes first at the first size"
    )
    parser.add_argument("--quiet", type=float, default=120, help="steady-state window (s)")
    parser.add_argument("--moves", type=int, default=3, help="RHCOS version moves (latency samples)")
    parser.add_argument("--timeout", type=float, default=3600, help="per operator and size (s)")
    parser.add_argument(
        "--node-lease-seconds",
        type=int,
        default=None,
        help="fake nodes' Lease (default: 200 from 5,000 nodes, else 40)",
    )
    parser.add_argument(
        "--memory-dumps", action="store_true", help="ocp-gpu's memory breakdown with each RSS recorded"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument(
        "--auto-upgrade",
        choices=("true", "false"),
        default=None,
        help="write driver.upgradePolicy.autoUpgrade into both operators' policy"
        " (left out: each CRD's default, NVIDIA's false, ours true)",
    )
    parser.add_argument(
        "--whole-stack",
        action="store_true",
        help="NVIDIA's OperatorHub example policy, every operand on, for both (bench/_whole_stack.py)",
    )
    args = parser.parse_args()
    if not TOOL.exists():
        parser.error(f"{TOOL} not found: set COMPARE_NVIDIA_TOOL to the team's compare_nvidia.py")
    args.out.mkdir(parents=True, exist_ok=True)
    prefix = "compare-nvidia-stack" if args.whole_stack else "compare-nvidia"
    raw = args.out / f"{prefix}-raw"
    order = [args.first, *(name for name in OPERATORS if name != args.first)]
    with operator_sources("head") as (source, commit):
        for nodes in args.nodes:
            which = [args.only] if args.only else order
            start = load_average()
            runs = {name: run_tool(name, nodes, args, source, raw) for name in which}
            summary = {
                "nodes": nodes,
                "commit": commit,
                "measured_at": runs[which[0]].get("started"),
                "order": which,
                "load_average_start": start,
                "load_average_end": load_average(),
                "counted": "CPU and RSS of each operator's process tree (bench/_tree_tool.py)",
                "auto_upgrade": args.auto_upgrade
                or (
                    "true, NVIDIA's example's, for both"
                    if args.whole_stack
                    else "each CRD's default (NVIDIA false, ocp-gpu true)"
                ),
                "node_lease_seconds": node_lease_seconds(nodes, args.node_lease_seconds),
                "whole_stack": args.whole_stack,
                "targets": (
                    evaluate(runs.get("nvidia"), runs["ocp-gpu"], nodes, args.whole_stack)
                    if "ocp-gpu" in runs
                    else []
                ),
                "runs": runs,
            }
            (args.out / f"{prefix}-{nodes}.json").write_text(json.dumps(summary, indent=1) + "\n")
            order.reverse()
    (args.out / f"{prefix}.md").write_text(markdown(args.out, prefix) + "\n")
    print(markdown(args.out, prefix))
    print(f"current commit {git_commit()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

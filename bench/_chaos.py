"""What the chaos benchmarks share: the same scenario run without faults (the baseline) and
with them, each on a fresh control plane, then a table and a JSON file.

The scenario and its invariants are `ocp_gpu_harness.chaos` (the e2e tests in
tests/e2e/test_chaos.py run the same code at tens of nodes).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from _common import (
    RESULTS_DIR,
    load_average,
    log,
    machine,
    operator_sources,
    print_table,
    stop_cleanly_on_signals,
    write_result,
)

from ocp_gpu_harness import binaries, chaos
from ocp_gpu_harness.cluster import LocalControlPlane


def add_common_arguments(parser: argparse.ArgumentParser, nodes: int) -> None:
    parser.add_argument("--nodes", type=int, default=nodes, help=f"GPU nodes (default {nodes})")
    parser.add_argument("--parallel", type=int, default=10, help="maxParallelUpgrades (default 10)")
    parser.add_argument(
        "--mco-max-unavailable", type=int, default=1, help="MCO pool maxUnavailable (default 1)"
    )
    parser.add_argument("--no-mco", action="store_true", help="no RHCOS migration during the upgrade")
    parser.add_argument(
        "--admin-cordoned", type=int, default=None, help="nodes an admin cordoned (default N/50)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--fault-window",
        type=float,
        default=None,
        help="seconds after the version patch over which faults fire (default: 90%% of the baseline's wall)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the run without faults")
    parser.add_argument("--timeout", type=float, default=None, help="per run (default scales with nodes)")
    parser.add_argument(
        "--source", choices=("head", "tree"), default="head", help="operator code: HEAD or tree"
    )
    parser.add_argument("--name", default=None, help="results file name (bench/results/<name>.json)")


class _LoadSampler(threading.Thread):
    """The 1-minute load average every 10 s while a run lasts (the machine is shared)."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="load")
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(10.0):
            self.samples.append(round(os.getloadavg()[0], 2))

    def summary(self) -> dict[str, float]:
        values = self.samples or [round(os.getloadavg()[0], 2)]
        return {
            "min": min(values),
            "mean": round(sum(values) / len(values), 2),
            "max": max(values),
            "samples": len(values),
        }


def _run(config: chaos.ChaosConfig, source: str) -> tuple[chaos.ChaosResult, dict[str, Any]]:
    binaries.ensure_binaries()
    context: dict[str, Any] = {"load_average_start": load_average()}
    sampler = _LoadSampler()
    sampler.start()
    with (
        operator_sources(source) as (sources, commit),
        LocalControlPlane(start_timeout=180, node_lease_seconds=chaos.NODE_LEASE_SECONDS) as cp,
    ):
        context["commit"] = commit
        result = chaos.run_chaos(cp, config, operator_cwd=sources, log=log)
    sampler.stop.set()
    context["load_average_end"] = load_average()
    context["load_average_1m_during"] = sampler.summary()
    return result, context


def run_with_baseline(
    args: argparse.Namespace,
    faults: dict[str, Any],
    name: str,
    scenario: dict[str, Any] | None = None,
    markdown: str = "",
) -> int:
    """The baseline (unless --no-baseline), then the run with ``faults`` (ChaosConfig fields);
    ``scenario``: ChaosConfig fields of both runs. ``markdown``: also write both tables to
    ``results/<name>.md`` under that heading, headed by the commit measured and the load."""
    stop_cleanly_on_signals()
    admin = args.admin_cordoned if args.admin_cordoned is not None else max(1, args.nodes // 50)
    base = chaos.ChaosConfig(
        nodes=args.nodes,
        max_parallel=args.parallel,
        mco=not args.no_mco,
        mco_max_unavailable=args.mco_max_unavailable,
        admin_cordoned=admin,
        seed=args.seed,
        timeout_s=args.timeout or 600 + 3.0 * args.nodes,
        **(scenario or {}),
    )
    began = time.monotonic()
    output: dict[str, Any] = {
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
    }
    window = args.fault_window
    if not args.no_baseline:
        log(f"=== baseline: {args.nodes} nodes, no faults ===")
        baseline, context = _run(base, args.source)
        output["baseline"] = {**dataclasses.asdict(baseline), **context, "ok": baseline.ok}
        # NB: written now, so that a fault run that cannot finish does not lose it.
        write_result(RESULTS_DIR, f"{name}-baseline", {**output, "commit": context["commit"]})
        print_table(f"baseline, {args.nodes} nodes, no faults", chaos.summary_rows(baseline))
        window = window or max(10.0, 0.9 * baseline.wall_s)
    config = dataclasses.replace(base, fault_window_s=window or 60.0, **faults)
    log(f"=== chaos: {args.nodes} nodes, faults {faults}, over {config.fault_window_s:.0f} s ===")
    result, context = _run(config, args.source)
    output["chaos"] = {**dataclasses.asdict(result), **context, "ok": result.ok}
    output["commit"] = context["commit"]
    output["total_s"] = round(time.monotonic() - began, 1)
    if "baseline" in output:
        b = output["baseline"]
        output["against_baseline"] = {
            "wall_s": [b["wall_s"], result.wall_s],
            "writes_total": [b["writes_total"], result.writes_total],
            "wall_ratio": round(result.wall_s / max(0.1, b["wall_s"]), 2),
            "writes_ratio": round(result.writes_total / max(1, b["writes_total"]), 2),
        }
    path = write_result(RESULTS_DIR, name, output)
    rows = output_rows(output)
    print_table(f"chaos, {args.nodes} nodes ({path})", rows)
    if markdown:
        write_markdown(name, markdown, output, rows)
    return 0 if result.ok else 1


def output_rows(output: dict[str, Any]) -> list[tuple[str, str]]:
    """The printed table of a recorded run: its measures, against the baseline, the load."""
    chaos_run = output["chaos"]
    rows = chaos.summary_rows(chaos.ChaosResult(**_result_fields(chaos_run)))
    if "against_baseline" in output:
        a = output["against_baseline"]
        rows.append(
            ("wall: baseline / with faults", f"{a['wall_s'][0]} s / {a['wall_s'][1]} s ({a['wall_ratio']}x)")
        )
        rows.append(
            (
                "writes: baseline / with faults",
                f"{a['writes_total'][0]} / {a['writes_total'][1]} ({a['writes_ratio']}x)",
            )
        )
    rows.append(
        ("load average start / end", f"{chaos_run['load_average_start']} / {chaos_run['load_average_end']}")
    )
    during = chaos_run["load_average_1m_during"]
    rows.append(
        (
            "load average (1 min) during: min / mean / max",
            f"{during['min']} / {during['mean']} / {during['max']}",
        )
    )
    return rows


def rewrite_markdown(name: str, heading: str) -> Path:
    """``results/<name>.md`` again from ``results/<name>.json`` (e.g. after a change of layout)."""
    output: dict[str, Any] = json.loads((RESULTS_DIR / f"{name}.json").read_text())
    return write_markdown(name, heading, output, output_rows(output))


def write_markdown(name: str, heading: str, output: dict[str, Any], rows: list[tuple[str, str]]) -> Path:
    """``results/<name>.md``: the commit measured, when and the load, then the fault run's
    table (with the baseline beside it where a row has one) and the faults fired."""
    chaos_run = output["chaos"]
    baseline = output.get("baseline")
    base_rows = dict(chaos.summary_rows(chaos.ChaosResult(**_result_fields(baseline)))) if baseline else {}
    load = chaos_run["load_average_1m_during"]
    lines = [
        f"# {name}",
        "",
        heading,
        "",
        f"Commit measured: `{output['commit']}`; {output['measured_at']} UTC; "
        f"{output['machine'].get('cpus', '?')} CPUs; whole run {output.get('total_s')} s.",
        f"Load average (1 min) during the fault run: {load['min']} / {load['mean']} / {load['max']} "
        f"(min / mean / max)"
        + (
            f"; during the baseline: {baseline['load_average_1m_during']['mean']} (mean)."
            if baseline
            else "."
        ),
        "",
        *(
            [
                "| | without faults | with faults |",
                "|---|---|---|",
                *(f"| {what} | {base_rows.get(what, '-')} | {value} |" for what, value in rows),
            ]
            if baseline
            else ["| | this run |", "|---|---|", *(f"| {what} | {value} |" for what, value in rows)]
        ),
        "",
        "Faults fired (seconds after the version patch):",
        "",
        *(f"- {f['at_s']} s {f['kind']}: {f['detail']}" for f in chaos_run.get("faults_fired", [])),
        "",
    ]
    # prose within 120 characters (tests/unit/test_markdown_lines.py); tables stay one row a line
    wrapped = [
        wrapped_line
        for line in lines
        for wrapped_line in (
            [line]
            if line.startswith("|") or len(line) <= 118
            else textwrap.wrap(line, 118, subsequent_indent="  " if line.startswith("- ") else "")
        )
    ]
    path = RESULTS_DIR / f"{name}.md"
    path.write_text("\n".join(wrapped))
    return path


def _result_fields(recorded: dict[str, Any]) -> dict[str, Any]:
    """The ChaosResult fields of a recorded run (the JSON adds context beside them)."""
    fields = {f.name for f in dataclasses.fields(chaos.ChaosResult)}
    return {k: v for k, v in recorded.items() if k in fields}

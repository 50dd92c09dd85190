"""Issue 13's start-up CPU alone: ClusterPolicy created -> operator settled, with what it wrote and a profile.

Runs the team's side-by-side tool (``../shared/tools/compare_nvidia.py``, or
``$COMPARE_NVIDIA_TOOL``) for ocp-gpu only, with no version moves and a short steady window,
CPU and RSS counted over the operator's process tree (bench/_proc.py, as bench/compare_nvidia.py
counts them), and, with ``--profile DIR``, py-spy sampling the operator's process tree from the
moment the ClusterPolicy is created until the operator has settled (``DIR/startup.raw``, collapsed
stacks, and ``DIR/startup.top.txt``: the functions with the most samples, self and cumulative).

The figure is the tool's ``cpu_policy_to_settled_s``; the writes are its audit counts.  With
py-spy attached the CPU figure is inflated (sampling pauses the process unless ``--nonblocking``
is used, and it is): compare profiled runs with profiled runs only.

Run (under the bench lock; it starts a control plane with 100 kwok nodes):
``flock /tmp/ocp-gpu-bench.lock nice -n 5 .venv/bin/python bench/startup_profile.py --nodes 100
[--source tree|head] [--profile /tmp/prof] [--whole-stack]``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _tree_tool
import _whole_stack
from _common import REPO, load_average, operator_sources
from _proc import cpu_s, status_kib

TOOL = Path(os.environ.get("COMPARE_NVIDIA_TOOL", REPO.parent / "shared" / "tools" / "compare_nvidia.py"))


def _load_tool() -> Any:
    _tree_tool.alias_harness()
    spec = importlib.util.spec_from_file_location("compare_nvidia_tool", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.cpu_s = cpu_s
    module.status_kib = status_kib
    return module


@contextlib.contextmanager
def _sources(source: str) -> Iterator[tuple[Path, str]]:
    """bench/_common.operator_sources, or a given commit's ``ocp_gpu/`` extracted (a before/after pair)."""
    if source in ("head", "tree"):
        with operator_sources(source) as found:
            yield found
        return
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", source], capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", commit, "ocp_gpu"],
        capture_output=True,
        timeout=60,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="ocp-gpu-bench-src-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp), commit


def top_functions(raw: Path, limit: int = 60) -> str:
    """The functions with the most samples in py-spy's collapsed stacks: self, then cumulative."""
    own: collections.Counter[str] = collections.Counter()
    cumulative: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            cumulative[frame] += count
    lines = [f"{total} samples", "", "self:"]
    lines += [f"{n:6d} {100 * n / max(total, 1):5.1f}%  {f}" for f, n in own.most_common(limit)]
    lines += ["", "cumulative:"]
    lines += [f"{n:6d} {100 * n / max(total, 1):5.1f}%  {f}" for f, n in cumulative.most_common(limit)]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument(
        "--source", default="tree", help="'head' (HEAD's code), 'tree' (the work tree) or a commit"
    )
    parser.add_argument("--profile", type=Path, default=None, help="py-spy into this directory")
    parser.add_argument(
        "--no-auto-upgrade",
        action="store_true",
        help="driver.upgradePolicy.autoUpgrade: false (NVIDIA's default; ours, as the seed's, is true)",
    )
    parser.add_argument("--quiet", type=float, default=10.0, help="steady window after settling (s)")
    parser.add_argument(
        "--whole-stack",
        action="store_true",
        help="NVIDIA's OperatorHub example policy, every operand on (bench/_whole_stack.py, $NVIDIA_SRC)",
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "ocp-gpu-startup")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with _sources(args.source) as (source, commit):
        os.environ["OCPGPU_SRC"] = str(source)
        sys.path.insert(0, str(source))
        tool = _load_tool()
        if args.whole_stack:
            # NB: before the spy's patch below, which then wraps the ClusterPolicy's creation it makes;
            # imported once the operator's source is on the path (as bench/_tree_tool.py does).
            from ocp_gpu.model import releases

            _whole_stack.install(tool, releases.with_release_defaults({}), tool.OperatorProcess)
        spy_proc: list[subprocess.Popen[bytes]] = []
        pid: list[int] = []
        started = tool.OcpGpuOperator.start

        def start(self: Any) -> None:
            started(self)
            pid.append(self.pid)

        tool.OcpGpuOperator.start = start
        if args.no_auto_upgrade:
            # NB: the tool's policy has no upgradePolicy: NVIDIA's CRD then means no upgrade
            # controller at all, ours (the seed's default) autoUpgrade true and an upgrade-done
            # label (and a node patch) per GPU node once its driver pod runs.
            tool.SPEC["driver"] = {**tool.SPEC["driver"], "upgradePolicy": {"autoUpgrade": False}}
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            raw = args.profile / "startup.raw"
            spy = (
                os.environ.get("PY_SPY")
                or shutil.which("py-spy")
                or str(Path(sys.executable).parent / "py-spy")
            )
            create = tool.kubernetes.client.CustomObjectsApi.create_cluster_custom_object

            def create_and_spy(self: Any, *a: Any, **k: Any) -> Any:
                command = [spy, "record", "--pid", str(pid[-1]), "--subprocesses", "--nonblocking"]
                command += ["--format", "raw", "--rate", "200", "-o", str(raw)]
                spy_proc.append(
                    subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
                return create(self, *a, **k)

            tool.kubernetes.client.CustomObjectsApi.create_cluster_custom_object = create_and_spy
        status = tool.policy_status
        settled: list[Any] = []

        def settled_status(api: Any) -> Any:
            # Called right after the settle wait: the profile ends here.
            for proc in spy_proc:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=60)
            settled.append(status(api))
            return settled[-1]

        tool.policy_status = settled_status
        loads = [load_average()]
        sys.argv = [str(TOOL), "--moves", "0", "--quiet", str(args.quiet)]
        result = tool.run_one(
            "ocp-gpu",
            args.nodes,
            tool.argparse.Namespace(
                moves=0,
                quiet=args.quiet,
                node_lease_seconds=40,
                out=str(args.out),
                ds_timeout=0,
                settle_timeout=0,
                no_openshift_extras=False,
            ),
        )
        loads.append(load_average())
    summary = {
        "commit": commit,
        "source": args.source,
        "nodes": args.nodes,
        "load_average": loads,
        "profiled": bool(args.profile),
        "auto_upgrade": not args.no_auto_upgrade,
        "whole_stack": args.whole_stack,
        "policy_to_every_operand_ready_s": result.get("policy_to_every_operand_ready_s"),
        "cpu_policy_to_settled_s": result.get("cpu_policy_to_settled_s"),
        "settle": result.get("settle"),
        "requests_policy_to_settled": result.get("requests_policy_to_settled"),
        "requests_policy_to_settled_top": result.get("requests_policy_to_settled_top"),
        "steady": {
            k: (result.get("steady") or {}).get(k) for k in ("reads", "writes_excl_leases", "operator_cpu_s")
        },
        "policy_state_after_settle": result.get("policy_state_after_settle"),
        # NB: at a high load average the harness's simulated kubelets may still be making pods Ready
        # when the operator goes quiet: a notReady policy with DaemonSets not Ready is that, not us.
        "ds_status_after_settle": result.get("ds_status_after_settle"),
        "policy_conditions_after_settle": [
            {key: condition.get(key) for key in ("type", "status", "reason", "message")}
            for condition in (settled[-1].get("conditions") or [] if settled else [])
        ],
        "operator_error_lines": result.get("operator_error_lines"),
    }
    (args.out / f"startup-{args.nodes}.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    if args.profile and (args.profile / "startup.raw").exists():
        (args.profile / "startup.top.txt").write_text(top_functions(args.profile / "startup.raw"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

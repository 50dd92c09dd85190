"""Where the operator's memory goes at N GPU nodes: tracemalloc inside a real `ocp-gpu run`.

Starts a local control plane in OpenShift mode with N kwok GPU nodes on one RHCOS build
and the ClusterPolicy (the setup of ``drivers_at_scale.py``), runs the operator with
``PYTHONTRACEMALLOC`` and a ``sitecustomize`` that, on SIGUSR1, collects garbage and
writes tracemalloc's view (traced total; the largest allocation sites by file and by
line) next to the process's VmRSS. The dump is taken once the policy is ready and the
operator has been idle long enough for its post-burst trim (``ocp_gpu/memory.py``).

NB: tracemalloc itself costs memory and time (RSS here is higher than in
``drivers_at_scale.py``); what counts is the split: live Python objects (traced) versus
RSS (the difference is interpreter, libraries' native memory and fragmentation).

``--native``: no tracemalloc; the dump is RSS as the bench tools count it (VmRSS, the
anonymous part from smaps_rollup), pymalloc's arenas (``sys._debugmallocstats``: blocks in
use against free blocks and unused pools, i.e. fragmentation CPython cannot return) and
the election child's VmRSS.

``--policy compare``: the side-by-side tool's ClusterPolicy (``compare_nvidia.py``: the driver,
the container toolkit and the validator; every other operand off) instead of every default.
The dump is taken twice: once the operator has listed the nodes, before the ClusterPolicy
(what the node view and the imports cost), and after the idle wait (what the policy's
operands, their pods and the start-up burst add). A policy not ready in time (the simulated
node agent falling behind) is reported, and the dump is taken anyway.

Run: ``.venv/bin/python bench/memory_profile.py --nodes 1000 [--native] [--policy compare]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes.client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import drivers_at_scale as setup

from ocp_gpu.harness import binaries, openshift
from ocp_gpu.harness.cluster import LocalControlPlane
from ocp_gpu.harness.operating import OperatorProcess

SITECUSTOMIZE = """
import gc, os, signal, tracemalloc

def _dump(signum, frame):
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    by_file = snapshot.statistics("filename")
    with open(os.environ["OCP_GPU_MEMDUMP"], "w") as out:
        rss = int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) / 1024
        traced = sum(s.size for s in by_file) / 2**20
        out.write(f"traced {traced:.1f} MiB, VmRSS {rss:.1f} MiB\\n")
        out.write("-- by file --\\n")
        for stat in by_file[:25]:
            out.write(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d}  {stat.traceback[0].filename}\\n")
        out.write("-- by line --\\n")
        for stat in snapshot.statistics("lineno")[:25]:
            frame = stat.traceback[0]
            out.write(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d}  {frame.filename}:{frame.lineno}\\n")

def _native(signum, frame):
    import sys
    path = os.environ["OCP_GPU_MEMDUMP"]
    rollup = {}
    for line in open("/proc/self/smaps_rollup"):
        parts = line.split()
        if len(parts) == 3 and parts[2] == "kB":
            rollup[parts[0].rstrip(":")] = int(parts[1]) / 1024
    with open(path + ".part", "w") as out:
        out.write(f"VmRSS {rollup['Rss']:.1f} MiB, anonymous {rollup['Anonymous']:.1f} MiB\\n")
        out.write("-- pymalloc --\\n")
        out.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    os.replace(path + ".part", path)

if os.environ.get("OCP_GPU_MEMDUMP"):
    signal.signal(signal.SIGUSR1, _native if os.environ.get("OCP_GPU_NATIVE") else _dump)
"""

# The side-by-side tool's operands (../shared/tools/compare_nvidia.py's SPEC): driver (DTK) and toolkit.
COMPARE_SPEC: dict[str, Any] = {
    "operator": {"use_ocp_driver_toolkit": True},
    "daemonsets": {"updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"}},
    "driver": {"enabled": True},
    "toolkit": {"enabled": True},
    "devicePlugin": {"enabled": False},
    "dcgm": {"enabled": False},
    "dcgmExporter": {"enabled": False},
    "gfd": {"enabled": False},
    "nodeStatusExporter": {"enabled": False},
    "migManager": {"enabled": False},
    "mig": {"strategy": "single"},
    "validator": {},
}

PYMALLOC_LINES = (
    "arenas allocated current",
    "bytes in allocated blocks",
    "bytes in available blocks",
    "unused pools",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds idle before the dump")
    parser.add_argument("--native", action="store_true", help="no tracemalloc: RSS and pymalloc's arenas")
    parser.add_argument(
        "--policy",
        choices=("default", "compare"),
        default="default",
        help="compare: compare_nvidia's operands",
    )
    args = parser.parse_args(argv)
    binaries.ensure_binaries()
    with tempfile.TemporaryDirectory() as scratch, LocalControlPlane(start_timeout=180) as cp:
        Path(scratch, "sitecustomize.py").write_text(SITECUSTOMIZE)
        dump = Path(scratch, "memory.txt")
        api = cp.api_client(pool_size=64)
        openshift.install_openshift_apis(api)
        openshift.set_driver_toolkit_tags(api, {setup.V1: setup.DTK_IMAGE + "0" * 64})
        setup.install_crd(api)
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": setup.NAMESPACE}})
        setup.create_nodes_fast(api, args.nodes, 16)
        setup.wait_until(
            "nodes Ready", lambda: setup.ready_node_count(api) >= args.nodes, 120 + args.nodes * 0.1, 2
        )
        kubeconfig = cp.make_kubeconfig(setup.OPERATOR_USER, ["system:masters"])
        env = {
            "PYTHONPATH": os.pathsep.join([scratch, os.environ.get("PYTHONPATH", "")]),
            "OCP_GPU_MEMDUMP": str(dump),
            **({"OCP_GPU_NATIVE": "1"} if args.native else {"PYTHONTRACEMALLOC": "1"}),
        }
        op = OperatorProcess(kubeconfig, setup.NAMESPACE, cp.state_dir / "logs" / "operator.log", env=env)
        op.start()
        try:
            setup.wait_until("the operator leading", lambda: _role(op) == "leader", 120, 0.5)
            # The node list is in (the start-up barrier waits for it); let the burst's trim pass.
            time.sleep(args.idle)
            _report(f"{args.nodes} GPU nodes listed, no ClusterPolicy", op.pid, dump, args.native)
            setup.create_policy(api, COMPARE_SPEC if args.policy == "compare" else None)
            try:
                setup.wait_until(
                    "policy ready",
                    lambda: setup.read_policy_status(api).get("state") == "ready",
                    300 + args.nodes * 0.2,
                    2,
                )
            except TimeoutError as error:
                state = setup.read_policy_status(api).get("state")
                print(f"NB: {error}: the dump is taken anyway (policy state {state})")
            time.sleep(args.idle)
            title = f"{args.nodes} GPU nodes, policy {args.policy}, after {args.idle:.0f} s idle"
            _report(title, op.pid, dump, args.native)
        finally:
            op.stop()
    return 0


def _role(op: OperatorProcess) -> str:
    try:
        return op.role()
    except OSError:
        # Not serving /healthz yet.
        return "starting"


def _report(title: str, pid: int, dump: Path, native: bool) -> None:
    """Ask the operator for a dump (SIGUSR1) and print it."""
    dump.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    setup.wait_until("the dump", lambda: dump.exists() and dump.stat().st_size > 0, 120, 1)
    time.sleep(2)
    print(f"== {title}:", flush=True)
    text = dump.read_text()
    if native:
        head, _, stats = text.partition("-- pymalloc --\n")
        print(head + "-- pymalloc --")
        print("\n".join(line for line in stats.splitlines() if any(k in line for k in PYMALLOC_LINES)))
        for child in _children(pid):
            print(f"election child {child}: VmRSS {_vm_rss_mib(child):.1f} MiB")
    else:
        print(text)
    sys.stdout.flush()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _vm_rss_mib(pid: int) -> float:
    line = next(
        line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS")
    )
    return int(line.split()[1]) / 1024


if __name__ == "__main__":
    sys.exit(main())

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
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes.client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _memdump
import drivers_at_scale as setup

from ocp_gpu_harness import binaries, openshift
from ocp_gpu_harness.cluster import LocalControlPlane
from ocp_gpu_harness.operating import OperatorProcess

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
        env = _memdump.environment(Path(scratch), args.native)
        dump = Path(env["OCP_GPU_MEMDUMP"])
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
    text = _memdump.take(pid, dump)
    print(f"== {title}:")
    print(_memdump.summary(text, pid, native), flush=True)


if __name__ == "__main__":
    sys.exit(main())

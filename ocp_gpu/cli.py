"""The `ocp-gpu` command: run the operator and the admin tools (the demo is the harness's:
`python -m ocp_gpu_harness.demo`, run by `hack/demo.sh`)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from ocp_gpu import __version__

# `ocp-gpu <command>` -> (its module under ocp_gpu/commands/, its one-line help). Module paths, not
# modules: only the command being run is imported, so `ocp-gpu status` never pays for
# must-gather's openshift_client (or anything another command needs) at start-up.
ADMIN_COMMANDS: Final = {
    "render": (
        "render",
        "print every manifest the operator would apply (from files, or a live cluster read-only)",
    ),
    "status": ("status_command", "show each GPU node's driver, upgrade state and why it waits (read-only)"),
    "must-gather": (
        "must_gather",
        "collect the ClusterPolicy, operands, GPU nodes, Events, logs and metrics for support",
    ),
    "validate": (
        "validate",
        "validate one step of this node's GPU stack and write its marker (runs on the node)",
    ),
    "node-status": (
        "node_status",
        "serve NVIDIA's node status metrics for this node (the node status exporter)",
    ),
    "crds": ("crds", "apply or delete the CRDs this release ships (the Helm chart's CRD hooks)"),
}


def _command_in(argv: Sequence[str]) -> str | None:
    """The command word: the first argument that is not an option (the top-level options
    -v/--verbose, --version and -h take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ocp-gpu", description=__doc__)
    parser.add_argument("--version", action="version", version=f"ocp-gpu {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the operator (in a cluster or against a kubeconfig)")
    run.add_argument("--kubeconfig", type=Path, default=None, help="default: $KUBECONFIG or in-cluster")
    run.add_argument(
        "--namespace",
        default=None,
        help="operand and lease namespace (default: $OPERATOR_NAMESPACE or nvidia-gpu-operator)",
    )
    run.add_argument(
        "--metrics-bind", default="0.0.0.0:8080", help="address:port of /metrics, /healthz, /readyz"
    )
    # OpenShift's defaults for operators (kube/electing.py).
    run.add_argument(
        "--lease-duration", type=int, default=137, help="seconds a leader lease lives unrenewed (default 137)"
    )
    run.add_argument(
        "--lease-renew-deadline",
        type=float,
        default=107.0,
        help="seconds the leader keeps acting without a renewal before stepping down (default 107)",
    )
    run.add_argument(
        "--lease-retry-period", type=float, default=26.0, help="seconds between renewals (default 26)"
    )

    # The admin tools: each module under ocp_gpu/commands/ declares its own arguments and
    # entry point (add_arguments, main), so adding one is a row in ADMIN_COMMANDS. Every command
    # is listed in --help; only the one named on the command line is imported and given its
    # arguments.
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = _command_in(argv)
    tool: types.ModuleType | None = None
    for name, (module, help_text) in ADMIN_COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == chosen:
            tool = importlib.import_module(f"ocp_gpu.commands.{module}")
            sub.description = tool.__doc__
            tool.add_arguments(sub)

    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "run":
        return _run(args)
    if args.command in ADMIN_COMMANDS and tool is not None:
        return int(tool.main(args))
    parser.error(f"unknown command {args.command}")
    return 2


def _run(args: argparse.Namespace) -> int:
    # NB: before kopf is imported: kopf imports the kubernetes client when it is installed (for
    # isinstance checks on its models, and to borrow its kubeconfig when no login handler is
    # registered).  The operator uses neither (its own client: kube/sending.py, and its own
    # login: kube/connecting.py); this keeps the client's ~23 MiB of imports out of the process.
    without_kubernetes_client()
    from ocp_gpu import operator
    from ocp_gpu.kube import electing

    namespace = args.namespace or operator.default_namespace(os.environ)
    host, _, port = str(args.metrics_bind).rpartition(":")
    options = operator.RunOptions(
        kubeconfig=args.kubeconfig,
        namespace=namespace,
        metrics_address=host or "0.0.0.0",
        metrics_port=int(port),
        election=electing.ElectionSettings(
            namespace=namespace,
            lease_duration_s=args.lease_duration,
            renew_deadline_s=args.lease_renew_deadline,
            retry_period_s=args.lease_retry_period,
        ),
    )
    from ocp_gpu.kube import clients

    try:
        return asyncio.run(operator.run(options))
    except clients.ConfigError as error:
        # One line naming the file, not a traceback.
        print(f"ocp-gpu run: {error}", file=sys.stderr)
        return 2


def without_kubernetes_client() -> None:
    """Make `import kubernetes` fail in this process (unless something already imported it)."""
    sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())

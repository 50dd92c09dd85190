"""The `ocp-gpu` command: run the operator, the demo, and the admin tools."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ocp_gpu import __version__


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

    demo = commands.add_parser("demo", help="start a local control plane and show the operator at work")
    demo.add_argument("--state-dir", type=Path, default=None, help="where to keep its state (kept on exit)")
    demo.add_argument(
        "--keep-state",
        action="store_true",
        help="keep the state directory on exit (also OCP_GPU_KEEP_STATE=1)",
    )
    demo.add_argument(
        "--no-live", action="store_true", help="print snapshots (on change) instead of a live table"
    )
    demo.add_argument(
        "--follow", action="store_true", help="keep the cluster up after the scenario, until Ctrl-C"
    )
    # The default since the demo stops by itself; kept so existing scripts keep working.
    demo.add_argument("--once", action="store_true", help=argparse.SUPPRESS)

    # --- render (ocp_gpu/commands/render.py) ---
    from ocp_gpu.commands import render as render_command

    render_command.add_arguments(
        commands.add_parser(
            "render",
            help=render_command.HELP,
            description=render_command.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    # --- end render ---

    # --- status (ocp_gpu/commands/status.py) ---
    from ocp_gpu.commands import status as status_command

    status_command.add_arguments(
        commands.add_parser(
            "status",
            help=status_command.HELP,
            description=status_command.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    # --- end status ---

    # --- must-gather (ocp_gpu/commands/must_gather.py) ---
    from ocp_gpu.commands import must_gather as must_gather_command

    must_gather_command.add_arguments(
        commands.add_parser(
            "must-gather",
            help=must_gather_command.HELP,
            description=must_gather_command.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    # --- end must-gather ---

    # --- validate (ocp_gpu/commands/validate.py) ---
    from ocp_gpu.commands import validate as validate_command

    validate_command.add_arguments(
        commands.add_parser(
            "validate",
            help=validate_command.HELP,
            description=validate_command.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    # --- end validate ---

    # --- node-status (ocp_gpu/commands/node_status.py) ---
    from ocp_gpu.commands import node_status as node_status_command

    node_status_command.add_arguments(
        commands.add_parser(
            "node-status",
            help=node_status_command.HELP,
            description=node_status_command.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    # --- end node-status ---

    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "run":
        return _run(args)
    if args.command == "demo":
        from ocp_gpu import demo as demo_module

        return demo_module.main(
            state_dir=args.state_dir,
            live=not args.no_live,
            follow=args.follow and not args.once,
            keep_state=args.keep_state,
        )
    if args.command == "render":
        # --- render (ocp_gpu/commands/render.py) ---
        return render_command.main(args)
    if args.command == "status":
        # --- status (ocp_gpu/commands/status.py) ---
        return status_command.main(args)
    if args.command == "must-gather":
        # --- must-gather (ocp_gpu/commands/must_gather.py) ---
        return must_gather_command.main(args)
    if args.command == "validate":
        # --- validate (ocp_gpu/commands/validate.py) ---
        return validate_command.main(args)
    if args.command == "node-status":
        # --- node-status (ocp_gpu/commands/node_status.py) ---
        return node_status_command.main(args)
    parser.error(f"unknown command {args.command}")
    return 2


def _run(args: argparse.Namespace) -> int:
    from ocp_gpu import handlers, operator
    from ocp_gpu.kube import electing

    namespace = args.namespace or operator.default_namespace(os.environ)
    host, _, port = str(args.metrics_bind).rpartition(":")
    handlers.quiet_kopf()
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


if __name__ == "__main__":
    sys.exit(main())

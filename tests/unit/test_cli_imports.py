"""We test these aspects of what the CLI loads (no API):

- `ocp-gpu status`, `render`, `must-gather` and `validate` never import kopf (with aiohttp it costs
  seconds of start-up on a loaded machine); only `ocp-gpu run` watches.
"""

from __future__ import annotations

import subprocess
import sys


def test_the_admin_commands_do_not_import_kopf() -> None:
    probe = (
        "import sys, ocp_gpu.cli, ocp_gpu.commands.status_command, ocp_gpu.commands.render, "
        "ocp_gpu.commands.must_gather, ocp_gpu.commands.validate; print('kopf' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"


def _modules_after(argv: list[str]) -> set[str]:
    """Which of kopf / openshift_client / the command modules `ocp-gpu <argv>` imported."""
    probe = (
        "import sys, ocp_gpu.cli\n"
        "try:\n"
        f"    ocp_gpu.cli.main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('IMPORTED', ' '.join(m for m in sys.modules if m in ('kopf', 'openshift_client') "
        "or m.startswith('ocp_gpu.commands.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    # The last line: what --help printed comes before it.
    return set(out.stdout.strip().splitlines()[-1].split()) - {"IMPORTED"}


def test_ocp_gpu_status_imports_only_its_own_command() -> None:
    # `status --watch` under load starts in the time its own imports take: not must-gather's
    # openshift_client, not kopf, not the other commands.
    assert _modules_after(["status", "--help"]) == {"ocp_gpu.commands.status_command"}


def test_the_top_level_help_lists_every_command_without_importing_them() -> None:
    from ocp_gpu import cli

    assert _modules_after(["--help"]) == set()
    probe = "import ocp_gpu.cli\nocp_gpu.cli.main(['--help'])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    for name in cli.ADMIN_COMMANDS:
        assert name in out.stdout


def test_ocp_gpu_run_never_loads_the_kubernetes_client() -> None:
    # issue 13: the client (with pydantic, urllib3, requests, oauthlib) is ~23 MiB of the operator's
    # memory; kopf imports it whenever it is installed unless told it is absent.  The run path
    # imports kopf, the watches and the operator before it reads the (here missing) kubeconfig.
    probe = (
        "import sys, ocp_gpu.cli\n"
        "code = ocp_gpu.cli.main(['run', '--kubeconfig', '/nonexistent/kubeconfig'])\n"
        "loaded = sorted(m for m, module in sys.modules.items() if module is not None and "
        "m.split('.')[0] in ('kubernetes', 'urllib3', 'pydantic', 'requests', 'oauthlib'))\n"
        "print('RESULT', code, 'kopf' in sys.modules, 'ocp_gpu.watches' in sys.modules, *loaded)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip().splitlines()[-1].split() == ["RESULT", "2", "True", "True"], out.stdout

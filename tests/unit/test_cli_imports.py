"""We test these aspects of what the CLI loads (no API):

- `ocp-gpu status`, `render`, `must-gather` and `validate` never import kopf (with aiohttp it costs
  seconds of start-up on a loaded machine); only `ocp-gpu run` watches.
"""

from __future__ import annotations

import subprocess
import sys


def test_the_admin_commands_do_not_import_kopf() -> None:
    probe = (
        "import sys, ocp_gpu.cli, ocp_gpu.commands.status, ocp_gpu.commands.render, "
        "ocp_gpu.commands.must_gather, ocp_gpu.commands.validate; print('kopf' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"

"""Fixtures for the OLM tests: opm and the bundle validators, built from Go modules.

``olm_tools``: the directory holding `opm` and `validate-bundle`
(hack/build-olm-tools.sh, built once into ~/.cache/ocp-gpu and skipped when present).
Skipped only with ``OCP_GPU_SKIP_E2E=1`` (a machine without Go), like the end-to-end tests.
OLM itself (`olm`, `catalog`: hack/build-olm.sh) is built before the session too when
test_olm_install.py is selected and OLM's source is on the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ocp_gpu_harness import olm

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "build-olm-tools.sh"
SKIP = os.environ.get("OCP_GPU_SKIP_E2E") == "1"


def tools_dir() -> Path:
    printed = subprocess.run(
        ["bash", str(SCRIPT), "--print-dir"], capture_output=True, text=True, check=True, timeout=30
    )
    return Path(printed.stdout.strip())


def _missing() -> bool:
    directory = tools_dir()
    return not all((directory / name).is_file() for name in ("opm", "validate-bundle"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the tools before any test runs (NB: not in a fixture, where pytest-timeout
    would kill a cold build), with its progress shown."""
    if SKIP or not any("olm_tools" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    capture = session.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        # NB: always run: the script also rebuilds validate-bundle when its source changed.
        subprocess.run(["bash", str(SCRIPT)], check=True, stdout=sys.stderr, timeout=3600)
        wants_olm = any("olm_bins" in getattr(item, "fixturenames", ()) for item in session.items)
        if wants_olm and olm.source_dir() is not None and not olm.is_built():
            olm.build(progress=lambda line: print(line, end="", file=sys.stderr, flush=True))


@pytest.fixture(scope="session")
def olm_tools() -> Path:
    if SKIP:
        pytest.skip("OCP_GPU_SKIP_E2E=1: opm and the bundle validators are not built")
    if _missing():
        subprocess.run(["bash", str(SCRIPT)], check=True, timeout=3600)
    return tools_dir()


@pytest.fixture(scope="module")
def olm_bins() -> Path:
    """OLM's `olm` and `catalog` (hack/build-olm.sh); skipped, saying how to get them, without its source."""
    if olm.source_dir() is None:
        pytest.skip(olm.SOURCE_HELP)
    if not olm.is_built():
        olm.build()
    return olm.bin_dir()

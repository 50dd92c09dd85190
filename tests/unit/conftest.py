"""Options and fixtures for the unit tests.

`--update-golden` rewrites the golden files under tests/unit/golden/ from what the code
renders now, instead of comparing with them; review the diff before committing it:

    .venv/bin/pytest tests/unit --update-golden

NB: pytest only reads options from conftest files it loads at startup, i.e. those on
the path of the arguments; a bare `pytest --update-golden` (testpaths=tests) does not
load this file that early, so there `OCP_GPU_UPDATE_GOLDEN=1 pytest` does the same.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ocp_gpu_harness import helm as helm_harness
from ocp_gpu_harness.binaries import HelmTools

GOLDEN_DIR = Path(__file__).parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/unit/golden/** from the current rendering instead of comparing",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True when the run should rewrite golden files."""
    return bool(request.config.getoption("--update-golden", default=False)) or (
        os.environ.get("OCP_GPU_UPDATE_GOLDEN") == "1"
    )


@pytest.fixture
def golden_dir() -> Path:
    return GOLDEN_DIR


# helm offline (template, lint: no cluster) and the chart with its NFD dependency, once a module.
@pytest.fixture(scope="module")
def helm(helm_tools: HelmTools, tmp_path_factory: pytest.TempPathFactory) -> helm_harness.Helm:
    return helm_harness.Helm(helm_tools, None, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def chart(helm_tools: HelmTools, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return helm_harness.prepare_chart(helm_tools, tmp_path_factory.mktemp("chart"))

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

"""A script of `hack/` loaded as a module, for the tests that check what it generates or does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
HACK = ROOT / "hack"


def load(script: str, module_name: str | None = None, *, on_path: bool = False) -> ModuleType:
    """`hack/<script>.py` as the module `module_name` (the script's name if None).

    Registered in sys.modules before it runs: its dataclasses look their module up there.
    `on_path`: hack/ goes on sys.path first, for a script that imports its neighbours."""
    if on_path:
        sys.path.insert(0, str(HACK))
    name = module_name or script
    spec = importlib.util.spec_from_file_location(name, HACK / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

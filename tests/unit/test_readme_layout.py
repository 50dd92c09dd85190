"""We test these aspects of the "Layout" section of docs/architecture.md against the tree:

- every module of the `ocp_gpu` package is listed under its own package folder, feature folders
  nested in their layer's (a module added, moved or renamed without its line fails);
- every module the section lists exists there (a line left behind by a removal fails).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "ocp_gpu"


def listed_modules() -> set[str]:
    """`folder/module.py` for every module named in the ocp_gpu/ part of the Layout block."""
    section = re.search(r"^## Layout\n.*?^```\n(.*?)^```", ARCHITECTURE.read_text(), re.M | re.S)
    assert section, "docs/architecture.md has no Layout section with a code block"
    found: set[str] = set()
    folder = None
    # the folder each indentation's modules belong to: a `name/` line at indent i holds the
    # modules listed at indent i + 2 (feature folders nest: planning/drivers/ ...)
    folders: dict[int, str] = {}
    for line in section.group(1).splitlines():
        if re.match(r"\S", line):
            # a top-level entry: only ocp_gpu/ is checked (hack/, tests/ ... are not packages)
            folder = "" if line.startswith("ocp_gpu/") else None
            folders = {2: ""}
            continue
        if folder is None:
            continue
        indent = len(line) - len(line.lstrip())
        sub = re.match(r"\s*(\w+)/", line)
        if sub and indent in folders:
            folder = folders[indent] + sub.group(1) + "/"
            folders = {i: f for i, f in folders.items() if i <= indent}
            folders[indent + 2] = folder
        elif re.match(r"\s*\w+\.py", line) and indent in folders:
            folder = folders[indent]
        found.update(folder + name for name in re.findall(r"(?<![\w/.])(\w+\.py)\b", line))
    return found


def tree_modules() -> set[str]:
    return {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"}


def test_every_module_has_its_line() -> None:
    missing = tree_modules() - listed_modules()
    assert not missing, f"docs/architecture.md Layout lacks: {sorted(missing)}"


def test_every_listed_module_exists() -> None:
    stale = listed_modules() - tree_modules()
    assert not stale, f"docs/architecture.md Layout lists modules that do not exist: {sorted(stale)}"

"""We test these aspects of the path `spec.driver.version` takes, from the ClusterPolicy's spec to
the server-side apply of the driver DaemonSet, as docs/architecture.md ("Following one value")
lists it module by module:

- it crosses at most 10 modules (the issue's bound), each listed once, each a module of ocp_gpu;
- every hop the table names (`module.function`) is real: the listed module calls (or builds)
  that function through the next module, and that module defines it; every module after the
  first is reached by a hop from an earlier one, and the last hands the value to the transport;
- the planned and rendered middle of the path is the route the value really takes: planning and
  rendering a policy with `driver.version` calls every function the table names there, and the
  version ends up in the driver container's image.

A module added on the way (a hop through a new module), or a listed module or function gone,
fails here until the table (and its count) says so.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from ocp_gpu.desired import driver_manifests
from tests.unit.test_driver_versions import _desired, _images

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "ocp_gpu"
# The bound (issue 22: "crosses <= 10 modules").
MOST_MODULES = 10
VERSION = "580.95.05"


def rows() -> list[tuple[str, list[tuple[str, str]]]]:
    """(module path under ocp_gpu/, [(module stem, function), ...]) for every row of the table."""
    section = re.search(r"^### Following one value.*?\n(.*?)(?=^#)", ARCHITECTURE.read_text(), re.M | re.S)
    assert section, "docs/architecture.md has no 'Following one value' section"
    found = []
    for line in section.group(1).splitlines():
        match = re.match(r"\|\s*(\d+)\s*\|\s*`([\w/]+\.py)`\s*\|.*\|(.*)\|\s*$", line)
        if match:
            assert int(match.group(1)) == len(found) + 1, f"rows are numbered in order: {line}"
            hops = re.findall(r"`(\w+)\.(\w+)`", match.group(3))
            found.append((match.group(2), hops))
    return found


def tree(path: str) -> ast.Module:
    return ast.parse((PACKAGE / path).read_text())


def defines(module: ast.Module, name: str) -> bool:
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
        for node in module.body
    )


def references(module: ast.Module, stem: str, name: str) -> bool:
    """`stem.name` used in the module (house style: call through the module), or `name` imported
    from a module `stem` and used."""
    imported = any(
        isinstance(node, ast.ImportFrom)
        and (node.module or "").rsplit(".", 1)[-1] == stem
        and any(alias.name == name for alias in node.names)
        for node in ast.walk(module)
    )
    for node in ast.walk(module):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == name
            and isinstance(node.value, ast.Name)
            and node.value.id == stem
        ):
            return True
        if imported and isinstance(node, ast.Name) and node.id == name:
            return True
    return False


def test_the_path_crosses_at_most_ten_modules() -> None:
    paths = [path for path, _ in rows()]
    assert 1 < len(paths) <= MOST_MODULES, paths
    assert len(set(paths)) == len(paths), "each module once"
    for path in paths:
        assert (PACKAGE / path).is_file(), f"{path} is listed but does not exist"


def test_every_hop_is_a_call_into_the_next_module() -> None:
    table = rows()
    stems = {Path(path).stem: path for path, _ in table}
    reached = {table[0][0]}
    for path, hops in table:
        assert path in reached, f"{path}: no earlier module hands the value to it"
        module = tree(path)
        for stem, name in hops:
            if stem == "requesting":
                # Below the apply call: the transport (kube/requesting, kube/sending), not counted.
                assert path == table[-1][0], f"{path}: only the last module hands the value to the transport"
                assert defines(tree("kube/requesting.py"), name)
            else:
                assert stem in stems, f"{path}: `{stem}.{name}` goes to a module the table does not list"
                assert defines(tree(stems[stem]), name), f"{stems[stem]} defines no {name}"
                reached.add(stems[stem])
            assert references(module, stem, name), f"{path} does not call `{stem}.{name}`"
    assert any(stem == "requesting" for stem, _ in table[-1][1]), "the last module sends the value"


def _calls(during: Any) -> set[tuple[str, str]]:
    """(module stem, function name) of every ocp_gpu function called while `during()` runs."""
    seen: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("ocp_gpu."):
                seen.add((module.rsplit(".", 1)[-1], frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        during()
    finally:
        sys.setprofile(None)
    return seen


def _planned_hops() -> Iterator[tuple[str, str]]:
    """The hops of the table between the reconcilers and the apply (pure: planning and rendering)."""
    pure = ("desired/", "planning/", "model/images.py", "rendering/")
    for path, hops in rows():
        if path.startswith(pure):
            yield from hops


def test_the_planned_hops_are_the_route_the_value_takes() -> None:
    driver_manifests.clear()  # NB: else a cached rendering skips the renderer's calls
    found: list[Any] = []
    called = _calls(lambda: found.append(_desired({"driver": {"version": VERSION}}, None)))
    images = _images(found[0])
    assert images and all(f":{VERSION}-" in image for image in images), images
    missing = [hop for hop in _planned_hops() if hop not in called]
    assert not missing, f"the table names hops the value does not take: {missing}"

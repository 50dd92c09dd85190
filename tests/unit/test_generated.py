"""We test these aspects of generated files (hack/generate.py):

- every generated copy in the repository is up to date with its source (run
  hack/generate.py after editing ocp_gpu/crds/, then commit both);
- each copy says where it comes from and how to regenerate it;
- a stale or missing copy is detected and named, and `--check` exits non-zero.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest

from tests import hack_scripts

ROOT = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    return hack_scripts.load("generate", "hack_generate")


generate = load_generator()
TARGETS = [copy.target for copy in generate.COPIES]


def test_generated_files_are_up_to_date() -> None:
    assert generate.stale() == [], "run hack/generate.py and commit the result"


@pytest.mark.parametrize("target", TARGETS)
def test_copies_name_their_source(target: str) -> None:
    first_line = (ROOT / target).read_text().splitlines()[0]
    assert first_line.startswith("# generated from ocp_gpu/crds/")
    assert "edit that file and run hack/generate.py" in first_line


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the sources and generated files, to break without touching the repository."""
    for relative in [
        *(path for copy in generate.COPIES for path in (copy.source, copy.target)),
        *generate.BUILT,
        *generate.BUILT_INPUTS,
    ]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, tmp_path / relative)
    return tmp_path


@pytest.mark.parametrize("target", TARGETS)
def test_a_stale_copy_is_named(tree: Path, target: str) -> None:
    # NB: an edit every copy has room for (not every CRD names the ClusterPolicy).
    (tree / target).write_text((tree / target).read_text().replace("kind:", "kind: ", 1))
    assert generate.stale(tree) == [target]


@pytest.mark.parametrize("target", TARGETS)
def test_a_missing_copy_is_named(tree: Path, target: str) -> None:
    (tree / target).unlink()
    assert generate.stale(tree) == [target]


@pytest.mark.parametrize("source", sorted({copy.source for copy in generate.COPIES}))
def test_an_edited_source_makes_every_copy_of_it_stale(tree: Path, source: str) -> None:
    (tree / source).write_text((tree / source).read_text() + "\n")
    assert generate.stale(tree) == [copy.target for copy in generate.COPIES if copy.source == source]


@pytest.mark.parametrize("target", sorted(generate.BUILT))
def test_a_stale_built_file_is_named(tree: Path, target: str) -> None:
    (tree / target).write_text((tree / target).read_text() + "# edited by hand\n")
    assert generate.stale(tree) == [target]


@pytest.mark.parametrize("target", sorted(generate.BUILT))
def test_built_files_name_their_source(target: str) -> None:
    head = (ROOT / target).read_text()[:300]
    # JSON has no comments: values.schema.json says it in its "$comment".
    marker = '"$comment": "generated from ' if target.endswith(".json") else "# generated from "
    assert marker in head and "run hack/generate.py" in head


def test_check_exits_non_zero_naming_the_file(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(generate, "ROOT", tree)
    assert generate.main(["--check"]) == 0
    (tree / TARGETS[0]).write_text("stale\n")
    assert generate.main(["--check"]) == 1
    assert f"{TARGETS[0]} is out of date" in capsys.readouterr().err
    assert generate.main([]) == 0
    assert generate.main(["--check"]) == 0

"""We test these aspects of how the repository waits for objects:

- no command in the repository waits with ``kubectl wait --for=condition=…`` (or ``oc wait``, or
  ``--for=jsonpath=…``): right after an object is created its status may have no conditions
  yet, and for a CRD (``status.conditions: null``) kubectl then fails at once instead of
  waiting (issue 31: one demo run in four).  Poll instead (``harness/crds.py``
  `wait_until_served` for CRDs).  ``--for=delete`` and ``--for=create`` are fine;
- the check finds such a wait in each form it takes here (an argument list, a shell string, an
  f-string, a shell script, a Markdown code block) and leaves prose alone (docstrings, comments,
  Markdown outside code blocks), so it can fail.

Scanned: every file git tracks, Python through its syntax tree (string constants, docstrings
excepted), other text line by line (comment lines excepted; Markdown only in fenced blocks).
"""

from __future__ import annotations

import ast
import itertools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
THIS_FILE = Path(__file__).resolve()

# A condition (or a field) of the object's status, which may not exist yet.
STATUS_WAIT = re.compile(r"--for[= ](?:condition|jsonpath)\b")
# A shell command line running kubectl's or oc's wait on such a condition.
SHELL_WAIT = re.compile(r"\b(?:kubectl|oc)\b.*\bwait\b.*--for[= ](?:condition|jsonpath)\b")
# The two-argument form: ["--for", "condition=Ready"].
SPLIT_FOR_VALUE = re.compile(r"^(?:condition|jsonpath)=")
FIX = "poll the object instead (harness/crds.py wait_until_served for a CRD; a wait_for loop otherwise)"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (prose about waits, not waits)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def python_status_waits(source: str) -> Iterator[int]:
    """Line numbers of the status waits in Python source."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        is_text = isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        if is_text and STATUS_WAIT.search(node.value):
            yield node.lineno
        if isinstance(node, ast.List | ast.Tuple | ast.Call):
            items = node.elts if isinstance(node, ast.List | ast.Tuple) else node.args
            words = [item.value if isinstance(item, ast.Constant) else None for item in items]
            for word, following in itertools.pairwise(words):
                if word == "--for" and isinstance(following, str) and SPLIT_FOR_VALUE.match(following):
                    yield node.lineno


def text_status_waits(text: str, markdown: bool) -> Iterator[int]:
    """Line numbers of the status waits in a shell script, manifest or Markdown document."""
    in_code = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if markdown and stripped.startswith("```"):
            in_code = not in_code
            continue
        if markdown and not in_code:
            continue
        if stripped.startswith("#") and not markdown:
            continue
        if SHELL_WAIT.search(line):
            yield number


def _tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return [REPO / name for name in listed.split("\0") if name]


def status_waits_in(path: Path) -> list[int]:
    try:
        text = path.read_text()
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        return []
    if path.suffix == ".py":
        return list(python_status_waits(text))
    return list(text_status_waits(text, markdown=path.suffix == ".md"))


def test_no_command_waits_for_a_status_that_may_not_exist_yet() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for path in _tracked_files()
        if path != THIS_FILE
        for line in status_waits_in(path)
    ]
    assert not found, f"kubectl/oc wait on a status condition at {', '.join(found)}: {FIX}"


# NB: the samples below are what the scan above must catch; this file is left out of it.
CAUGHT_PYTHON = {
    "argument list": 'subprocess.run(["kubectl", "wait", "--for=condition=Established", "crd/x"])',
    "split flag": 'subprocess.run(["kubectl", "wait", "--for", "condition=Ready", "pod/x"])',
    "tuple": 'command = ("oc", "wait", "--for=jsonpath={.status.phase}=Running", "pod/x")',
    "shell string": 'os.system("kubectl wait --for=condition=Available deploy/x")',
    "f-string": 'os.system(f"kubectl --kubeconfig {path} wait --for=condition=Established crd/{name}")',
}
LEFT_PYTHON = {
    "docstring": 'def f():\n    """Not `kubectl wait --for=condition=Established`: it fails."""\n',
    "comment": "# NB: not kubectl wait --for=condition=Established\nx = 1\n",
    "delete": 'subprocess.run(["kubectl", "wait", "--for=delete", "pod/x"])',
    "create": 'subprocess.run(["kubectl", "wait", "--for=create", "crd/x"])',
}


@pytest.mark.parametrize("source", CAUGHT_PYTHON.values(), ids=CAUGHT_PYTHON.keys())
def test_python_waits_on_a_status_are_found(source: str) -> None:
    assert list(python_status_waits(source)) == [1]


@pytest.mark.parametrize("source", LEFT_PYTHON.values(), ids=LEFT_PYTHON.keys())
def test_python_prose_and_other_waits_are_left_alone(source: str) -> None:
    assert list(python_status_waits(source)) == []


def test_shell_scripts_and_markdown_code_are_scanned_but_not_their_prose() -> None:
    script = (
        "set -e\n# not: kubectl wait --for=condition=Ready\nkubectl -n x wait --for=condition=Ready pod/a\n"
    )
    assert list(text_status_waits(script, markdown=False)) == [3]
    document = (
        "Do not run `kubectl wait --for=condition=Established` right after the apply.\n"
        "```bash\n"
        "kubectl apply -f crd.yaml\n"
        "kubectl wait --for=condition=Established crd/clusterpolicies.nvidia.com\n"
        "kubectl wait --for=delete pod/x\n"
        "```\n"
    )
    assert list(text_status_waits(document, markdown=True)) == [4]

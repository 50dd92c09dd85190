"""We test these aspects of what the repository refers to, so that it works from a fresh clone
on any machine:

- no tracked script, test, module or document names a path of the machine it was written on
  (an absolute path under /work/ or /root/, a `.mirror/` snapshot directory) or a tool of the
  environment it was written in (the `fetch` tool and its kin);
- hack/build-olm.sh takes OLM's source from OCP_GPU_OLM_SRC, else from the repository's
  git-ignored .cache/operator-lifecycle-manager, and nowhere else; without either it fails
  saying how to get it, and the OLM test's skip reason says the same (harness/olm.SOURCE_HELP).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ocp_gpu_harness import olm

ROOT = Path(__file__).resolve().parents[2]

# What only one machine has.  NB: the lookbehind keeps an API path such as
# /api/v1/namespaces/work/pods (a namespace named "work") out.
MACHINE_PATHS = {
    "an absolute path under /work": re.compile(r"(?<![\w.~-])/work/"),
    "an absolute path in root's home": re.compile(r"(?<![\w.~-])/root/"),
    "a snapshot directory of the machine's mirror": re.compile(r"/\.mirror/"),
    "a tool of the authoring environment": re.compile(
        r"\b(fetch|search|find_files|find_repos|find_string|read_file)`? tool\b"
    ),
}

# Not checked: measurements as recorded (their log tails quote the paths of the machine that ran
# them), and this file, which names the patterns.
# NB: NVIDIA's captured rendering names paths inside its containers (/root/gpu-params), not of a machine.
NOT_CHECKED = ("bench/results/", "tests/unit/test_repo_paths.py", "tests/unit/data/nvidia-dra/")


def tracked_text_files() -> dict[str, str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    found = {}
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if name.startswith(NOT_CHECKED) or not path.is_file():
            continue
        try:
            found[name] = path.read_text()
        except UnicodeDecodeError:
            continue  # binary
    return found


def test_no_tracked_file_names_a_path_or_tool_of_one_machine() -> None:
    files = tracked_text_files()
    assert any(name.startswith("hack/") for name in files) and "README.md" in files
    offences = [
        f"{name}:{number}: {what}: {line.strip()}"
        for name, text in files.items()
        for number, line in enumerate(text.splitlines(), 1)
        for what, pattern in MACHINE_PATHS.items()
        if pattern.search(line)
    ]
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize(
    ("line", "caught"),
    [
        ('SRC="${OCP_GPU_OLM_SRC:-/work/.mirror/x+y/repo}"', True),
        ("# the snapshot the project's `fetch` tool leaves", True),
        ("cd /root/src", True),
        ('("DELETE", "/api/v1/namespaces/work/pods/p1")', False),
        ("~/.cache/ocp-gpu/bin", False),
    ],
)
def test_the_patterns_catch_what_they_are_for(line: str, caught: bool) -> None:
    assert any(pattern.search(line) for pattern in MACHINE_PATHS.values()) is caught


# --- where hack/build-olm.sh finds OLM's source --------------------------------------------


def build_olm(repo: Path, *args: str, source: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a copy of hack/build-olm.sh as if `repo` were the repository."""
    env = {k: v for k, v in os.environ.items() if k != "OCP_GPU_OLM_SRC"}
    env["OCP_GPU_CACHE"] = str(repo / "cache")
    if source is not None:
        env["OCP_GPU_OLM_SRC"] = source
    return subprocess.run(
        ["bash", str(repo / "hack" / "build-olm.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "hack").mkdir()
    shutil.copy(ROOT / "hack" / "build-olm.sh", tmp_path / "hack" / "build-olm.sh")
    return tmp_path


def test_build_olm_finds_no_source_elsewhere_and_says_how_to_get_one(repo: Path) -> None:
    assert build_olm(repo, "--print-src").stdout == ""
    failed = build_olm(repo)
    assert failed.returncode == 1
    assert f"no OLM source at {repo}/.cache/operator-lifecycle-manager" in failed.stderr
    assert "OCP_GPU_OLM_SRC" in failed.stderr and "operator-lifecycle-manager" in failed.stderr
    # the OLM test's skip reason names both places too
    assert "OCP_GPU_OLM_SRC" in olm.SOURCE_HELP and ".cache/operator-lifecycle-manager" in olm.SOURCE_HELP


def test_build_olm_takes_the_repositorys_cache_or_the_variable(repo: Path, tmp_path: Path) -> None:
    cached = repo / ".cache" / "operator-lifecycle-manager"
    cached.mkdir(parents=True)
    (cached / "go.mod").write_text("module github.com/operator-framework/operator-lifecycle-manager\n")
    assert build_olm(repo, "--print-src").stdout.strip() == str(cached)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "go.mod").write_text("module github.com/operator-framework/operator-lifecycle-manager\n")
    assert build_olm(repo, "--print-src", source=str(elsewhere)).stdout.strip() == str(elsewhere)
    # the variable, when set, is the only place looked at
    assert build_olm(repo, "--print-src", source=str(tmp_path / "absent")).stdout == ""

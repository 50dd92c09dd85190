"""We test these aspects of the Python package as users install it (not editable):

- the wheel built from the source tree carries every template folder of the top-level
  `templates/<folder>/NNNN_<kind>.yaml.j2` (whatever folders exist now) as
  `ocp_gpu/templates/<folder>/…`, the CRD, `py.typed`, and every other non-Python file
  under ocp_gpu/ (data the code reads);
- installed with its dependencies into a fresh venv, outside the checkout, the
  `ocp-gpu` entry point answers `--version` with the project's version and
  `ocp-gpu render` renders driver manifests from its own installed templates (no
  source tree and no OCP_GPU_TEMPLATES on the way).

NB: installing the dependencies needs the package index (PyPI or its mirror), as
hack/setup.sh does; pip's cache makes later runs fast.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"

NODES = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "gpu-1",
                "labels": {
                    "feature.node.kubernetes.io/pci-10de.present": "true",
                    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
                    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
                    "feature.node.kubernetes.io/kernel-version.full": "5.15.0-91-generic",
                },
            },
            "status": {"nodeInfo": {"osImage": "Ubuntu 22.04.3 LTS"}},
        }
    ],
}
POLICY = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "cluster-policy"},
    "spec": {"driver": {"version": "550.90.07"}},
}


def _version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the tree (the build writes build/ and egg-info)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    # ocp_gpu_harness/ too: the build sees the whole tree a release build sees, and must leave it out.
    for folder in ("ocp_gpu", "templates", "ocp_gpu_harness"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        # pip's isolated build: the build backend pyproject.toml asks for, as users get it
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("ocp_gpu-*.whl")
    return built


def test_the_wheel_carries_every_template_folder(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {f"ocp_gpu/{path.relative_to(ROOT).as_posix()}" for path in TEMPLATES.glob("*/*.yaml.j2")}
    assert {"state-driver", "state-container-toolkit"} <= {Path(name).parent.name for name in templates}
    assert templates <= names, f"missing from the wheel: {sorted(templates - names)}"
    assert "ocp_gpu/crds/clusterpolicies.nvidia.com.yaml" in names
    assert "ocp_gpu/py.typed" in names


def test_the_wheel_carries_no_test_rig(wheel: Path) -> None:
    """The local control plane, the simulations and the demo stay in the checkout (issue 22)."""
    names = zipfile.ZipFile(wheel).namelist()
    assert not [name for name in names if name.startswith("ocp_gpu_harness/")], "the harness is in the wheel"
    assert not [name for name in names if "/harness/" in name or name.endswith("demo.py")], names
    assert any(name == "ocp_gpu/commands/validate.py" for name in names), "the validator program must ship"


def test_the_wheel_carries_every_data_file_of_the_package(wheel: Path) -> None:
    """Anything under ocp_gpu/ that is not Python is data the code reads: it must ship."""
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "ocp_gpu").rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    }
    assert data <= names, f"add to [tool.setuptools.package-data] in pyproject.toml: {sorted(data - names)}"


@pytest.mark.timeout(900)
def test_installed_wheel_runs_version_and_render(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    subprocess.run(
        [str(bin_dir / "pip"), "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        check=True,
        capture_output=True,
        timeout=800,
    )
    # NB: outside the checkout, with nothing pointing back at it.
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "OCP_GPU_TEMPLATES", "VIRTUAL_ENV"}}
    work = tmp_path / "work"
    work.mkdir()
    version = subprocess.run(
        [str(bin_dir / "ocp-gpu"), "--version"], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"ocp-gpu {_version()}"

    (work / "policy.yaml").write_text(yaml.safe_dump(POLICY))
    (work / "nodes.yaml").write_text(yaml.safe_dump(NODES))
    rendered = subprocess.run(
        [str(bin_dir / "ocp-gpu"), "render", "--policy", "policy.yaml", "--nodes", "nodes.yaml"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rendered.returncode == 0, rendered.stderr
    documents = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
    daemonsets = [doc for doc in documents if doc["kind"] == "DaemonSet"]
    by_name = {ds["metadata"]["name"]: ds for ds in daemonsets}
    assert "nvidia-driver-daemonset-ubuntu22.04" in by_name, sorted(by_name)
    image = by_name["nvidia-driver-daemonset-ubuntu22.04"]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ]
    assert image.endswith("/driver:550.90.07-ubuntu22.04")
    # the templates came from the installed package, not from this checkout
    probe = "from ocp_gpu.rendering import templating; print(templating.templates_dir())"
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", probe],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert Path(where.stdout.strip()).is_relative_to(env_dir), where.stdout


def test_the_templates_live_at_the_top_level_only() -> None:
    """The design's layout: templates/ beside ocp_gpu/, not a second copy inside it."""
    assert (TEMPLATES / "state-driver" / "0500_daemonset.yaml.j2").is_file()
    assert not (ROOT / "ocp_gpu" / "templates").exists(), "templates belong in the top-level templates/"

"""We test these aspects of the operator's Dockerfile (it cannot be built here; hadolint
lints it in hack/lint.sh):

- multi-stage on UBI 9: a Python build stage, a UBI minimal runtime stage;
- the runtime stage runs as a non-root numeric user and starts `ocp-gpu run`;
- the Red Hat / OpenShift certification labels are all there, and the license is in
  /licenses;
- it installs the package from pyproject.toml and ocp_gpu/ (templates included), so
  every `ocp-gpu` subcommand (`run`, `validate`, ...) is in the image;
- its version label defaults to the package's version;
- `ocp-gpu` (the validator's and node status exporter's command) is on the non-root user's PATH.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "Dockerfile").read_text()
# Instructions with continuation lines joined and comments dropped.
LINES = [
    line.strip()
    for line in re.sub(
        r"\\\n", " ", "\n".join(row for row in TEXT.splitlines() if not row.lstrip().startswith("#"))
    ).splitlines()
    if line.strip()
]
STAGES: list[list[str]] = []
for line in LINES:
    if line.startswith("FROM "):
        STAGES.append([])
    if STAGES:
        STAGES[-1].append(line)
RUNTIME = STAGES[-1]
CERTIFICATION_LABELS = ("name", "vendor", "version", "release", "summary", "description", "maintainer")


def _labels(stage: list[str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for line in stage:
        if line.startswith("LABEL "):
            for pair in shlex.split(line.removeprefix("LABEL ")):
                key, _, value = pair.partition("=")
                labels[key] = value
    return labels


def test_multi_stage_on_ubi9() -> None:
    assert len(STAGES) == 2
    args = dict(
        line.removeprefix("ARG ").split("=", 1) for line in LINES if line.startswith("ARG ") and "=" in line
    )
    assert STAGES[0][0] == "FROM ${UBI_PYTHON} AS build"
    assert args["UBI_PYTHON"].startswith("registry.access.redhat.com/ubi9/python-3")
    assert RUNTIME[0] == "FROM ${UBI_MINIMAL}"
    assert args["UBI_MINIMAL"].startswith("registry.access.redhat.com/ubi9/ubi-minimal")
    assert any(line.startswith("COPY --from=build ") for line in RUNTIME)


def test_runtime_is_non_root_and_runs_the_operator() -> None:
    users = [line.split()[1] for line in RUNTIME if line.startswith("USER ")]
    assert users and users[-1].isdigit() and int(users[-1]) != 0
    assert json.loads(
        next(line for line in RUNTIME if line.startswith("ENTRYPOINT ")).removeprefix("ENTRYPOINT ")
    ) == ["ocp-gpu"]
    assert json.loads(next(line for line in RUNTIME if line.startswith("CMD ")).removeprefix("CMD ")) == [
        "run"
    ]


def test_certification_labels_and_licenses() -> None:
    labels = _labels(RUNTIME)
    assert all(labels.get(key) for key in CERTIFICATION_LABELS), labels
    assert "COPY LICENSE /licenses/LICENSE" in RUNTIME
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_installs_the_whole_package() -> None:
    build = "\n".join(STAGES[0])
    assert "COPY --chown=1001:0 ocp_gpu ./ocp_gpu" in build
    assert "pyproject.toml" in build and "pip install" in build


def test_version_label_defaults_to_the_package_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"ARG VERSION={version}" in RUNTIME
    assert _labels(RUNTIME)["version"] == "${VERSION}"


def test_ocp_gpu_is_on_the_path_of_the_non_root_user() -> None:
    # The validator's and node status exporter's pods run `ocp-gpu validate …`/`ocp-gpu node-status`
    # from this image (releases.OPERATOR_IMAGE): the command must resolve by PATH for user 1001.
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "ocp-gpu" in scripts
    build = "\n".join(STAGES[0])
    venv = re.search(r"-m venv (\S+)", build)
    assert venv is not None and f"{venv[1]}/bin/pip install --no-cache-dir /tmp/wheels/" in build
    assert f"COPY --from=build {venv[1]} {venv[1]}" in RUNTIME
    env = " ".join(line for line in RUNTIME if line.startswith("ENV "))
    path = re.search(r"PATH=(\S+)", env)
    assert path is not None and f"{venv[1]}/bin" in path[1].split(":")
    copied_at = RUNTIME.index(f"COPY --from=build {venv[1]} {venv[1]}")
    user_at = max(i for i, line in enumerate(RUNTIME) if line.startswith("USER "))
    assert user_at > copied_at and RUNTIME[user_at].split()[1] != "0"
    # Nothing after USER switches back to root or moves the program.
    assert not [line for line in RUNTIME[user_at + 1 :] if line.startswith(("USER ", "RUN ", "COPY "))]

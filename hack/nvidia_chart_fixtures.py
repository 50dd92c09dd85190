#!/usr/bin/env python3
"""Render NVIDIA's gpu-operator chart for each of NVIDIA's Helm inputs; write what it makes.

tests/unit/test_helm_nvidia_inputs.py checks that our chart, given the same input, makes the
same ClusterPolicy, NVIDIADriver and config ConfigMaps.  NVIDIA's chart is not ours to commit
(and not reachable from CI): this script, run by hand outside CI, reads it from a local git
copy of NVIDIA/gpu-operator at a tag and writes, for every case of
tests/unit/data/nvidia-helm/cases.yaml, those objects as NVIDIA's chart renders them into
tests/unit/data/nvidia-helm/expected/<case>.yaml, plus NVIDIA's values.yaml as an input
(tests/unit/data/nvidia-helm/nvidia-values.yaml).  Each file names the commit it came from.

    git clone --bare https://github.com/NVIDIA/gpu-operator .cache/upstream/NVIDIA+gpu-operator
    .venv/bin/python hack/nvidia_chart_fixtures.py --git-dir .cache/upstream/NVIDIA+gpu-operator --ref v26.7.0

(.cache/ is git-ignored; $OCP_GPU_UPSTREAM names another directory of such clones.)

The same helm renders both charts (harness.binaries.ensure_helm: hack/build-helm.sh).  NB: at
the tag, NVIDIA's Chart.yaml says version v1.0.0-devel and appVersion main-latest; its release
packaging sets both to the tag (the published chart's validator image is gpu-operator:<tag>),
and so does this script before rendering.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ocp_gpu_harness import binaries  # noqa: E402

DATA = ROOT / "tests" / "unit" / "data" / "nvidia-helm"
CHART_PATH = "deployments/gpu-operator"
# NVIDIA's templates whose objects our chart makes too.
TEMPLATES = (
    "templates/clusterpolicy.yaml",
    "templates/nvidiadriver.yaml",
    "templates/plugin_config.yaml",
    "templates/mig_config.yaml",
    "templates/dcgm_exporter_config.yaml",
)
RELEASE = "gpu-operator"
NAMESPACE = "gpu-operator"


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def extract_chart(repo: Path, ref: str, dest: Path) -> Path:
    """NVIDIA's chart directory at `ref`, with the version its release packaging gives it."""
    archive = git(repo, "archive", "--format=tar", ref, CHART_PATH)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    chart = dest / CHART_PATH
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"] = meta["appVersion"] = ref
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return chart


def render(helm: Path, chart: Path, args: list[str]) -> list[dict[str, Any]]:
    """The objects of TEMPLATES that NVIDIA's chart renders for `args` (run in DATA)."""
    shown = [arg for template in TEMPLATES for arg in ("--show-only", template)]
    result = subprocess.run(
        [str(helm), "template", RELEASE, str(chart), "--namespace", NAMESPACE, *args, *shown],
        capture_output=True,
        text=True,
        cwd=DATA,
        check=False,
    )
    # NB: --show-only of a template that renders nothing fails with "could not find template";
    # render each one alone then.
    if result.returncode != 0:
        documents: list[dict[str, Any]] = []
        for template in TEMPLATES:
            one = subprocess.run(
                [
                    str(helm),
                    "template",
                    RELEASE,
                    str(chart),
                    "--namespace",
                    NAMESPACE,
                    *args,
                    "--show-only",
                    template,
                ],
                capture_output=True,
                text=True,
                cwd=DATA,
                check=False,
            )
            if one.returncode == 0:
                documents += [d for d in yaml.safe_load_all(one.stdout) if d]
            elif "could not find template" not in one.stderr:
                raise SystemExit(f"helm failed for {args}:\n{one.stderr}")
        return documents
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    upstream = Path(os.environ.get("OCP_GPU_UPSTREAM", ROOT / ".cache" / "upstream"))
    parser.add_argument("--git-dir", dest="repo", type=Path, default=upstream / "NVIDIA+gpu-operator")
    parser.add_argument("--ref", default="v26.7.0")
    args = parser.parse_args(argv)
    commit = git(args.repo, "rev-parse", f"{args.ref}^{{commit}}").decode().strip()
    source = f"NVIDIA/gpu-operator@{commit} ({args.ref})"
    helm = binaries.ensure_helm().helm
    version = subprocess.run([str(helm), "version", "--short"], capture_output=True, text=True).stdout.strip()

    values = git(args.repo, "show", f"{args.ref}:{CHART_PATH}/values.yaml").decode()
    (DATA / "nvidia-values.yaml").write_text(
        f"# NVIDIA's chart values, {CHART_PATH}/values.yaml of {source}, unchanged below this\n"
        "# comment (hack/nvidia_chart_fixtures.py): the input of the nvidia-values case.\n" + values
    )
    cases = yaml.safe_load((DATA / "cases.yaml").read_text())["cases"]
    expected = DATA / "expected"
    expected.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        chart = extract_chart(args.repo, args.ref, Path(tmp))
        for name, case_args in cases.items():
            documents = render(helm, chart, [str(arg) for arg in case_args])
            header = (
                f"# What NVIDIA's chart ({CHART_PATH} of {source}) renders for the case {name!r}\n"
                f"# of cases.yaml ({' '.join(map(str, case_args))}): written by\n"
                f"# hack/nvidia_chart_fixtures.py with helm {version}.  Do not edit.\n"
            )
            body = yaml.safe_dump_all(documents, sort_keys=True, width=1000)
            (expected / f"{name}.yaml").write_text(header + body)
            print(f"wrote {expected / name}.yaml ({len(documents)} objects)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

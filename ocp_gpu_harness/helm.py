"""Running real helm (built from Go modules, harness.binaries.ensure_helm) on charts/ocp-gpu.

SIMULATION of one step: `helm dependency update charts/ocp-gpu`, which fetches Node Feature
Discovery's chart from its chart repository (not reachable here).  `prepare_chart` copies the
chart and puts NFD's chart source (from NFD's Go module, same release) into its charts/
directory, where `helm dependency update` would put the packaged chart; helm loads a chart
directory and a .tgz the same way.  Everything after that is helm itself.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ocp_gpu_harness.binaries import HelmTools, repo_root

CHART_NAME = "ocp-gpu"
NFD_CHART_NAME = "node-feature-discovery"


def chart_source() -> Path:
    return repo_root() / "charts" / CHART_NAME


def prepare_chart(tools: HelmTools, dest: Path) -> Path:
    """A copy of charts/ocp-gpu under `dest` with its NFD dependency in charts/ (see module doc)."""
    chart = dest / CHART_NAME
    if chart.exists():
        shutil.rmtree(chart)
    shutil.copytree(chart_source(), chart, ignore=shutil.ignore_patterns("charts"))
    shutil.copytree(tools.nfd_chart, chart / "charts" / NFD_CHART_NAME)
    return chart


class Helm:
    """helm with a fixed kubeconfig; each call returns the finished process (never raises on
    helm's own failure, so a test can assert on helm's message)."""

    def __init__(self, tools: HelmTools, kubeconfig: Path | None, home: Path) -> None:
        self.tools = tools
        self.kubeconfig = kubeconfig
        # NB: helm keeps its cache, config and release data dirs under $HOME by default;
        # a test's own directories keep runs independent.
        self._env = {
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
        }

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        command = [str(self.tools.helm), *args]
        if self.kubeconfig is not None:
            command += ["--kubeconfig", str(self.kubeconfig)]
        return subprocess.run(
            command, capture_output=True, text=True, env=self._env, timeout=timeout, check=False
        )

    def check(self, *args: str, timeout: float = 180) -> str:
        """Run and return stdout; AssertionError with helm's stderr when it fails."""
        result = self.run(*args, timeout=timeout)
        if result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result.stdout

    def template(self, chart: Path, *args: str, namespace: str = "gpu-operator") -> str:
        return self.check("template", CHART_NAME, str(chart), "--namespace", namespace, *args)

    def values_args(self, sets: Sequence[str]) -> list[str]:
        return [arg for value in sets for arg in ("--set", value)]

"""We test these aspects of `ocp-gpu must-gather` (ocp_gpu/commands/must_gather.py) with a
source that stands in for the API (no server):

- each NVIDIADriver and GPUCluster is written, spec and status, and the Events about them in
  `default` are kept beside those about ClusterPolicies;
- where their CRD is not served nothing is written for them and the gather goes on, saying
  nothing (an optional API, not a failure).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ocp_gpu.commands import must_gather
from ocp_gpu.kube import gathering
from ocp_gpu.planning import must_gather_plan


class Source:
    """Lists what it was given by plural; a plural it was not given is not served."""

    name = "test"

    def __init__(self, listed: dict[str, list[dict[str, Any]]]) -> None:
        self.listed = listed

    def list(self, resource: must_gather_plan.Resource, namespace: str | None = None) -> list[dict[str, Any]]:
        if resource.plural not in self.listed:
            raise gathering.NotServedError(resource.plural)
        return self.listed[resource.plural]

    def get(self, resource: must_gather_plan.Resource, name: str, namespace: str | None = None) -> None:
        return None

    def logs(self, namespace: str, pod: str, container: str, previous: bool) -> str:
        return ""

    def describe(self, resource: must_gather_plan.Resource, name: str, namespace: str | None = None) -> str:
        return ""

    def raw(self, path: str) -> str:
        return ""


def event(involved: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{involved}.1"},
        "involvedObject": {"name": involved},
        "lastTimestamp": "2026-11-28T00:00:00Z",
        "reason": "R",
    }


def test_gpu_clusters_and_nvidia_drivers_are_gathered(tmp_path: Path) -> None:
    cluster = {
        "kind": "GPUCluster",
        "metadata": {"name": "gpu-cluster", "managedFields": [{}]},
        "spec": {"draDriver": {}},
        "status": {"state": "notReady"},
    }
    source = Source(
        {
            "clusterpolicies": [],
            "nvidiadrivers": [{"kind": "NVIDIADriver", "metadata": {"name": "pool"}, "spec": {}}],
            "gpuclusters": [cluster],
            "nodes": [],
            "events": [event("gpu-cluster"), event("pool"), event("other")],
        }
    )
    out = must_gather.gather(source, tmp_path, namespaces=[])  # type: ignore[arg-type]
    written = yaml.safe_load((tmp_path / "cluster/gpuclusters/gpu-cluster.yaml").read_text())
    assert written["status"] == {"state": "notReady"} and "managedFields" not in written["metadata"]
    assert (tmp_path / "cluster/nvidiadrivers/pool.yaml").is_file()
    events = yaml.safe_load((tmp_path / "namespaces/default/events.yaml").read_text())
    assert sorted(e["involvedObject"]["name"] for e in events) == ["gpu-cluster", "pool"]
    assert not [f for f in out.failures if "GPUCluster" in f or "NVIDIADriver" in f]


def test_without_their_crds_nothing_is_written_for_them(tmp_path: Path) -> None:
    source = Source({"clusterpolicies": [], "nodes": [], "events": []})
    out = must_gather.gather(source, tmp_path, namespaces=[])  # type: ignore[arg-type]
    assert not (tmp_path / "cluster/gpuclusters").exists()
    assert not (tmp_path / "cluster/nvidiadrivers").exists()
    assert not [f for f in out.failures if "GPUCluster" in f or "NVIDIADriver" in f]

"""We test these aspects of the operator's /metrics, scraped from a running operator on the
local control plane (OpenShift emulation) and parsed with prometheus_client's text parser:

(a) every metric docs/metrics.md lists (generated from ocp_gpu/metrics.py) is served, with
    exactly its documented label names, and NVIDIA's gauges have NVIDIA's values for a cluster
    with one RHCOS version lacking its driver-toolkit tag (rhcos_tags_missing 1, the version
    named, the DaemonSet of the other version ready, the status gauge, the NFD gauge);
(b) the tag appears -> rhcos_tags_missing 0, the per-version series gone, status 1 and a last
    success timestamp;
(c) a broken ImageStream (a tag without a name, RHBZ#2015024) -> imagestream_broken 1, still enabled;
(d) the ImageStream deleted -> imagestream_missing 1 and enabled -1;
(e) the ClusterPolicy deleted -> reconciliation status -1 (unavailable).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from ocp_gpu_harness import nodes as fake_nodes
from ocp_gpu_harness import openshift as openshift_emulation
from ocp_gpu_harness.cluster import unique_name
from ocp_gpu_harness.operating import OperatorProcess
from tests import hack_scripts

from .conftest import READY_S, STEP_S, Operated, wait_for

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
V1 = "416.94.202407030122-0"
V2 = "417.94.202410090854-0"
DTK = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"
TAGS = {V1: DTK + "1" * 64, V2: DTK + "2" * 64}
PREFIX = "gpu_operator_openshift_driver_toolkit_"


def load_generator() -> ModuleType:
    return hack_scripts.load("gen_metric_docs")


def scrape(proc: OperatorProcess) -> dict[str, list[tuple[dict[str, str], float]]]:
    """sample name -> [(labels, value)], from the operator's real /metrics."""
    code, text = proc.http_get("/metrics")
    assert code == 200
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float | None:
    found = [v for labels, v in samples.get(name, []) if not labels]
    return found[0] if found else None


def gauges_are(proc: OperatorProcess, **expected: float) -> Any:
    samples = scrape(proc)
    got = {name: value(samples, PREFIX + name) for name in expected}
    return samples if got == expected else None


def all_served(samples: Any, documented: list[Any]) -> Any:
    """The samples, once every documented metric has one (None before)."""
    if samples is None or any(metric.name not in samples for metric in documented):
        return None
    return samples


def status_is(proc: OperatorProcess, expected: float) -> Any:
    samples = scrape(proc)
    return samples if value(samples, "gpu_operator_reconciliation_status") == expected else None


def test_every_documented_metric_is_served_with_its_labels_and_tracks_the_imagestream(
    openshift: client.ApiClient,
    namespace: str,
    operated: Operated,
) -> None:
    kube = openshift
    documented = load_generator().documented()
    openshift_emulation.set_driver_toolkit_tags(kube, {V1: TAGS[V1]})
    names = [unique_name("gpu") for _ in range(2)]
    fake_nodes.create_nodes(
        kube, [fake_nodes.gpu_node(names[0], rhcos=V1), fake_nodes.gpu_node(names[1], rhcos=V2)]
    )
    try:
        proc = operated.run()
        # (a) V2 has no tag: NVIDIA's gauge says so, ours names the version.
        # The gauges can settle before the pass's first write is counted, and a labelled
        # counter has no sample until then: wait for both.
        samples = wait_for(
            lambda: all_served(
                gauges_are(proc, enabled=1, rhcos_tags_missing=1, imagestream_missing=0), documented
            ),
            STEP_S,
            what="rhcos_tags_missing 1 and every documented metric served",
        )
        assert samples["ocp_gpu_driver_toolkit_tag_missing"] == [({"rhcos_version": V2}, 1.0)]
        for metric in documented:
            assert metric.name in samples, f"{metric.name} is documented but not served"
            for labels, _ in samples[metric.name]:
                assert tuple(sorted(labels)) == tuple(sorted(metric.labels)), metric.name
        assert value(samples, "gpu_operator_gpu_nodes_total") is not None
        assert value(samples, "gpu_operator_gpu_nodes_total") >= 2  # type: ignore[operator]
        assert value(samples, "gpu_operator_reconciliation_has_nfd_labels") == 1
        assert value(samples, "gpu_operator_reconciliation_total") >= 1  # type: ignore[operator]
        assert value(samples, PREFIX + "nfd_too_old") == 0
        assert value(samples, PREFIX + "imagestream_broken") == 0
        assert value(samples, "ocp_gpu_is_leader") == 1
        assert value(samples, "gpu_operator_driver_auto_upgrade_enabled") == value(
            samples, "gpu_operator_auto_upgrade_enabled"
        )
        # Only the documented names (plus counters' _created samples) are served.
        served = {name for name in samples if not name.endswith("_created")}
        assert served - {m.name for m in documented} == set()

        # (b) the tag appears: the version leaves the series; the policy gets ready.
        openshift_emulation.set_driver_toolkit_tags(kube, TAGS)
        samples = wait_for(
            lambda: gauges_are(proc, enabled=1, rhcos_tags_missing=0), STEP_S, what="rhcos_tags_missing 0"
        )
        assert samples.get("ocp_gpu_driver_toolkit_tag_missing", []) == []
        samples = wait_for(lambda: status_is(proc, 1), READY_S, what="reconciliation status 1 (ready)")
        assert (value(samples, "gpu_operator_reconciliation_last_success_ts_seconds") or 0) > 1.7e9

        # (c) a tag without a name (RHBZ#2015024): broken, the named tags still serve.
        custom = client.CustomObjectsApi(kube)
        stream = custom.get_namespaced_custom_object(
            "image.openshift.io", "v1", "openshift", "imagestreams", "driver-toolkit"
        )
        tags = [*stream["status"]["tags"], {"tag": "", "items": []}]
        custom.patch_namespaced_custom_object_status(
            "image.openshift.io",
            "v1",
            "openshift",
            "imagestreams",
            "driver-toolkit",
            {"status": {"tags": tags}},
        )
        wait_for(
            lambda: gauges_are(proc, enabled=1, imagestream_broken=1, imagestream_missing=0),
            STEP_S,
            what="imagestream_broken 1",
        )

        # (d) the ImageStream deleted: missing, and the Driver Toolkit cannot be enabled.
        custom.delete_namespaced_custom_object(
            "image.openshift.io", "v1", "openshift", "imagestreams", "driver-toolkit"
        )
        wait_for(
            lambda: gauges_are(proc, enabled=-1, imagestream_missing=1, imagestream_broken=0),
            STEP_S,
            what="imagestream_missing 1, enabled -1",
        )

        # (e) no ClusterPolicy: unavailable.
        custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
        wait_for(lambda: status_is(proc, -1), STEP_S, what="reconciliation status -1")
    finally:
        fake_nodes.delete_nodes(kube, names)

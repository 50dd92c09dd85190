"""ocp-gpu's rendering against NVIDIA's own, for the policies of tests/unit/data/nvidia-conformance/.

We test these aspects:
- every case of cases.yaml has a fixture captured from NVIDIA's operator at the release we pin
  (hack/capture_nvidia_conformance.py), and ocp-gpu renders the case without errors;
- per operand container (image, command, args, env names and values, volume mounts with their
  host paths, security context) and per pod (tolerations, selectors, affinity, host namespaces,
  runtime class, service account), and per ConfigMap and RuntimeClass, every difference from
  NVIDIA's rendering is listed in docs/differences-from-nvidia.md;
- every difference the document lists still occurs in at least one case (so it stays true);
- the document's table parser and the wildcard matching do what the document says.
"""

from __future__ import annotations

import functools

import pytest

from ocp_gpu.model import releases
from tests.unit import _conformance as conformance
from tests.unit import test_nvidia_dra_conformance

CASES = {case.name: case for case in conformance.cases()}


@functools.cache
def _differences(name: str) -> tuple[conformance.Difference, ...]:
    return tuple(conformance.differences(CASES[name]))


def test_every_case_is_captured_from_the_pinned_nvidia_release() -> None:
    assert sorted(CASES) == sorted(conformance.case_names())
    for case in CASES.values():
        assert case.header["nvidia"]["commit"] == releases.SOURCE.commit, case.name
        daemonsets = [o for o in case.nvidia if o["kind"] == "DaemonSet"]
        assert len(daemonsets) >= 9, f"{case.name}: NVIDIA rendered {len(daemonsets)} DaemonSets"


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_difference_from_nvidia_is_documented(name: str) -> None:
    rows = conformance.documented()
    unlisted = [str(d) for d in _differences(name) if conformance.row_for(d.key, rows) is None]
    assert not unlisted, (
        f"{len(unlisted)} differences from NVIDIA's rendering of {name!r} are not in "
        f"{conformance.DOC.name} (fix them, or add a row saying why):\n" + "\n".join(unlisted)
    )


def test_every_documented_difference_still_occurs() -> None:
    # NB: the DRA driver's rows are NVIDIA's GPUCluster's, checked by test_nvidia_dra_conformance.
    dra = conformance.documented(test_nvidia_dra_conformance.dra_section())
    rows = {key: why for key, why in conformance.documented().items() if key not in dra}
    used = {conformance.row_for(d.key, rows) for name in CASES for d in _differences(name)}
    stale = [str(row) for row in rows if row not in used]
    assert not stale, (
        f"{conformance.DOC.name} lists differences no captured case shows any more (remove them):\n"
        + "\n".join(stale)
    )


def test_the_document_rows_are_read_with_wildcards() -> None:
    text = (
        "| operand | container | field | why |\n|---|---|---|---|\n"
        "| `nvidia-dcgm` | `nvidia-dcgm-ctr` | `command` | we run it |\n"
        "| `*` | `init:*-validation` | `*` | our validator |\n"
    )
    rows = conformance.documented(text)
    assert list(rows.values()) == ["we run it", "our validator"]
    exact = conformance.Key("nvidia-dcgm", "nvidia-dcgm-ctr", "command")
    assert conformance.row_for(exact, rows) == exact
    wild = conformance.Key("gpu-feature-discovery", "init:toolkit-validation", "env X")
    assert conformance.row_for(wild, rows) == conformance.Key("*", "init:*-validation", "*")
    assert conformance.row_for(conformance.Key("nvidia-dcgm", "nvidia-dcgm-ctr", "args"), rows) is None


def test_a_changed_rendering_is_a_difference() -> None:
    # The comparison can fail: NVIDIA's own rendering with one env value changed differs there.
    case = CASES["operatorhub"]
    nvidia = [dict(o) for o in case.nvidia]
    plugin = next(o for o in nvidia if o["metadata"]["name"] == "nvidia-dcgm")
    mine = conformance.copy.deepcopy(plugin)
    mine["spec"]["template"]["spec"]["containers"][0]["image"] = "example.com/dcgm:1"
    found = list(conformance.compare_daemonsets("x", "nvidia-dcgm", mine, plugin))
    assert [d.key for d in found] == [conformance.Key("nvidia-dcgm", "nvidia-dcgm-ctr", "image")]
    assert list(conformance.compare_daemonsets("x", "nvidia-dcgm", plugin, plugin)) == []

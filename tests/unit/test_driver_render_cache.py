"""We test these aspects: the driver rendering's cache (desired/driver_manifests.render_driver_state).

- a node on a new RHCOS version adds one desired entry, and only that DaemonSet is rendered
  (twice: draft and digest); the others are reused as they were;
- a key losing its nodes, or a node joining a key, renders nothing;
- a changed policy renders every DaemonSet again;
- whatever the cache holds, the output equals a cold render (same objects, same order:
  template file order, DaemonSets in plan order).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from ocp_gpu.desired import driver_manifests
from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands import driver_rendering
from tests.unit._drivers import V416, V417, plan, rhcos_node

INPUTS = driver_rendering.DriverRenderInputs(
    namespace=labels.OPENSHIFT_NAMESPACE,
    openshift=True,
    manager_image="nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0",
    openshift_version="4.16",
)
POLICY = policy_parser.parse_policy({})


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each template file is rendered, from a cold cache."""
    driver_manifests.clear()
    counted: Counter[str] = Counter()
    real = templating.render_template

    def counting(name: str, context: Any, **kwargs: Any) -> list[dict[str, Any]]:
        counted[name] += 1
        return real(name, context, **kwargs)

    monkeypatch.setattr(templating, "render_template", counting)
    return counted


def cold(desired: Any, policy: Any = POLICY) -> list[dict[str, Any]]:
    """The pure rendering, no cache involved."""
    return driver_rendering.render_driver_state(desired, policy, INPUTS)


def test_a_new_version_renders_only_its_daemonset(renders: Counter[str]) -> None:
    one = plan([rhcos_node("a", V416), rhcos_node("b", V416)]).desired
    two = plan([rhcos_node("a", V416), rhcos_node("b", V417)]).desired
    before = driver_manifests.render_driver_state(one, POLICY, INPUTS)
    renders.clear()

    after = driver_manifests.render_driver_state(two, POLICY, INPUTS)

    assert renders == Counter({driver_rendering.DAEMONSET_TEMPLATE: 2})
    kept = next(m for m in before if m["kind"] == "DaemonSet")
    assert any(m is kept for m in after)
    assert after == cold(two)


def test_a_key_losing_its_nodes_or_a_node_joining_renders_nothing(renders: Counter[str]) -> None:
    two = plan([rhcos_node("a", V416), rhcos_node("b", V417)]).desired
    driver_manifests.render_driver_state(two, POLICY, INPUTS)
    renders.clear()

    joined = driver_manifests.render_driver_state(
        plan([rhcos_node("a", V416), rhcos_node("b", V417), rhcos_node("c", V417)]).desired, POLICY, INPUTS
    )
    left = plan([rhcos_node("a", V416), rhcos_node("b", V416)]).desired
    shrunk = driver_manifests.render_driver_state(left, POLICY, INPUTS)

    assert renders == Counter()
    assert joined == cold(two)
    assert shrunk == cold(left)


def test_a_policy_change_renders_every_daemonset_again(renders: Counter[str]) -> None:
    two = plan([rhcos_node("a", V416), rhcos_node("b", V417)]).desired
    driver_manifests.render_driver_state(two, POLICY, INPUTS)
    renders.clear()
    edited = policy_parser.parse_policy({"daemonsets": {"priorityClassName": "gpu-critical"}})

    after = driver_manifests.render_driver_state(two, edited, INPUTS)

    assert renders[driver_rendering.DAEMONSET_TEMPLATE] == 4
    assert all(
        m["spec"]["template"]["spec"]["priorityClassName"] == "gpu-critical"
        for m in after
        if m["kind"] == "DaemonSet"
    )
    assert after == cold(two, edited)


def test_daemonsets_come_last_in_plan_order() -> None:
    two = plan([rhcos_node("a", V416), rhcos_node("b", V417)]).desired
    rendered = cold(two)
    kinds = [m["kind"] for m in rendered]
    assert kinds[-2:] == ["DaemonSet", "DaemonSet"] and "DaemonSet" not in kinds[:-2]
    assert [m["metadata"]["name"] for m in rendered[-2:]] == [entry.name for entry in two]

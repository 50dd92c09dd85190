"""We test these aspects of desired/operand_render_cache: a pass that renders what the last one did
gets the very same kept manifests (no render, no copy) with their applied hashes; a changed input
renders again; the kept manifests equal what rendering/ renders."""

from __future__ import annotations

from ocp_gpu.desired import operand_render_cache
from ocp_gpu.kube import applying
from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.planning import platforms
from ocp_gpu.planning.operands import monitoring_planning, operand_planning
from ocp_gpu.rendering import monitoring_rendering
from ocp_gpu.rendering.operands import operand_catalog, operand_common, operand_rendering

IMAGE = ImageRef("nvcr.io/nvidia/k8s-device-plugin:v0.17.0")


def inputs(namespace: str = "gpu") -> operand_common.OperandRenderInputs:
    return operand_common.OperandRenderInputs(namespace, True, IMAGE)


def test_the_same_inputs_get_the_kept_manifests_and_hashes() -> None:
    operand_render_cache.clear()
    policy = policy_parser.parse_policy({})
    first = operand_render_cache.operand_manifests(operand_catalog.DEVICE_PLUGIN, policy, inputs())
    # A new but equal policy (each pass parses its own): the kept objects, not a copy.
    again = operand_render_cache.operand_manifests(
        operand_catalog.DEVICE_PLUGIN, policy_parser.parse_policy({}), inputs()
    )
    assert first and all(a.manifest is b.manifest for a, b in zip(first, again, strict=True))
    assert [kept.applied_hash for kept in first] == [applying.applied_hash(kept.manifest) for kept in first]
    assert [kept.manifest for kept in first] == operand_rendering.render_operand(
        operand_catalog.DEVICE_PLUGIN, policy, inputs()
    )


def test_a_changed_input_renders_again() -> None:
    operand_render_cache.clear()
    policy = policy_parser.parse_policy({})
    first = operand_render_cache.operand_manifests(operand_catalog.DEVICE_PLUGIN, policy, inputs())
    moved = operand_render_cache.operand_manifests(operand_catalog.DEVICE_PLUGIN, policy, inputs("elsewhere"))
    # Cluster-scoped objects (RBAC) have no namespace.
    assert {kept.manifest["metadata"].get("namespace") for kept in moved} - {None} == {"elsewhere"}
    assert first[0].applied_hash != moved[0].applied_hash
    changed = policy_parser.parse_policy({"devicePlugin": {"env": [{"name": "X", "value": "1"}]}})
    hashes = {
        kept.applied_hash
        for kept in operand_render_cache.operand_manifests(
            operand_catalog.DEVICE_PLUGIN, changed, inputs("elsewhere")
        )
    }
    assert hashes != {kept.applied_hash for kept in moved}


def test_monitoring_manifests_are_kept_too() -> None:
    operand_render_cache.clear()
    policy = policy_parser.parse_policy({})
    plan = monitoring_planning.plan_operator_monitoring(
        policy,
        platforms.Platform(platforms.PlatformKind.OPENSHIFT, "test"),
        {monitoring_planning.MONITORING_GROUP},
        {},
    )
    render_inputs = monitoring_rendering.MonitoringRenderInputs("gpu", plan)
    first = operand_render_cache.monitoring_manifests(policy, render_inputs)
    again = operand_render_cache.monitoring_manifests(policy_parser.parse_policy({}), render_inputs)
    assert first and all(a.manifest is b.manifest for a, b in zip(first, again, strict=True))
    assert [kept.manifest for kept in first] == monitoring_rendering.render_monitoring_state(
        policy, render_inputs
    )


def test_a_disabled_operand_with_no_object_left_needs_no_render() -> None:
    component = operand_rendering.component(operand_catalog.DCGM)
    assert not operand_planning.has_objects([], component)
    assert not operand_planning.has_objects(
        [operand_rendering.component(operand_catalog.DEVICE_PLUGIN), ""], component
    )
    assert operand_planning.has_objects(["", component], component)

"""We test these aspects of the operand declarations (each `rendering/operands/<operand>.py`'s
`OPERAND`, listed by `rendering/operands/operand_catalog.py`), against what each operand renders:

- its watch sources: the kinds it declares are exactly the kinds its templates render (every
  switch on), and each is a kind the owned-object watches watch (kube/owning.OWNED_KINDS);
- its images: the images its pods run are exactly its declared ones (its own section's, and
  the validator's for the marker waits), each with a default in the operator's environment;
- the sections it reads are ClusterPolicy sections, other than its own;
- its deploy label: every GPU node gets it but the MIG manager's, which MIG-capable nodes get;
- one module per operand, each declaring one operand, in the catalog's order.
"""

from __future__ import annotations

from typing import Any

import pytest

from ocp_gpu.kube import owning
from ocp_gpu.model import images, operand_types
from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import policy_parser, policy_spec
from ocp_gpu.rendering.operands import driver_rendering, operand_catalog, operand_common, operand_rendering
from tests.unit import _crd_schema
from tests.unit.test_driver_rendering import SCENARIOS

OWN_IMAGE = ImageRef("registry.example.com/own/operand:1")
WAIT_IMAGE = ImageRef("registry.example.com/validator/wait:1")
MANAGER_IMAGE = ImageRef("registry.example.com/driver-manager/manager:1")
# Every switch that adds objects on: both ServiceMonitors (with monitoring.coreos.com served), the
# DRA driver's ComputeDomains.
EVERYTHING_ON: dict[str, Any] = {
    "dcgmExporter": {"serviceMonitor": {"enabled": True}},
    "draDriver": {"computeDomains": {"enabled": True}},
}

all_generic = pytest.mark.parametrize("operand", operand_catalog.GENERIC, ids=lambda o: o.name)


def rendered(operand: operand_types.Operand) -> list[dict[str, Any]]:
    inputs = operand_common.OperandRenderInputs(
        "gpu", True, OWN_IMAGE, monitoring_api=True, wait_image=WAIT_IMAGE, driver_manager_image=MANAGER_IMAGE
    )
    return operand_rendering.render_operand(operand, policy_parser.parse_policy(EVERYTHING_ON), inputs)


def pod_images(manifests: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for manifest in manifests:
        if manifest["kind"] == "DaemonSet":
            pod = manifest["spec"]["template"]["spec"]
            for container in pod.get("initContainers", []) + pod["containers"]:
                found.add(container["image"])
    return found


@all_generic
def test_declared_kinds_are_what_the_templates_render(operand: operand_types.Operand) -> None:
    assert {m["kind"] for m in rendered(operand)} == set(operand.kinds)


def test_the_drivers_declared_kinds_are_what_its_templates_render() -> None:
    kinds: set[str] = set()
    for desired, spec, inputs in SCENARIOS.values():
        kinds |= {
            m["kind"]
            for m in driver_rendering.render_driver_state(desired, policy_parser.parse_policy(spec), inputs)
        }
    assert kinds == set(operand_catalog.DRIVER.kinds)


@pytest.mark.parametrize("operand", operand_catalog.OPERANDS, ids=lambda o: o.name)
def test_declared_kinds_are_watched(operand: operand_types.Operand) -> None:
    assert set(operand.kinds) <= {row.kind for row in owning.OWNED_KINDS}
    assert len(set(operand.kinds)) == len(operand.kinds)


@all_generic
def test_declared_images_are_what_its_pods_run(operand: operand_types.Operand) -> None:
    expected = {
        OWN_IMAGE
        if section == operand.section
        else MANAGER_IMAGE
        if section.endswith(".driverManager")
        else WAIT_IMAGE
        for section in operand.images
    }
    assert pod_images(rendered(operand)) == expected


@pytest.mark.parametrize("operand", operand_catalog.OPERANDS, ids=lambda o: o.name)
def test_declared_images_and_sections_exist(operand: operand_types.Operand) -> None:
    assert operand.section in operand.images
    assert set(operand.images) <= set(images.DEFAULT_IMAGE_ENV)
    sections = set(_crd_schema.spec_schema()["properties"])
    assert {operand.section, *operand.reads} <= sections
    assert operand.section not in operand.reads


def test_deploy_labels_by_declaration() -> None:
    deploy = operand_catalog.DEPLOY_LABELS
    assert deploy.mig_capable == (operand_catalog.MIG_MANAGER.deploy_label,)
    assert deploy.while_enabled == (operand_catalog.DRA_DRIVER.deploy_label,)
    assert set(deploy.container_stack) | set(deploy.vm_stacks) == {
        operand.deploy_label for operand in operand_catalog.OPERANDS
    }
    # NVIDIA's gpuStateLabels of the VM workloads, of the operands ocp-gpu deploys.
    assert set(deploy.vm[policy_spec.GpuWorkload.VM_PASSTHROUGH]) == {
        "nvidia.com/gpu.deploy.vfio-manager",
        "nvidia.com/gpu.deploy.sandbox-device-plugin",
        "nvidia.com/gpu.deploy.sandbox-validator",
    }
    assert not set(deploy.container_stack) & set(deploy.vm_stacks)


def test_one_module_per_operand() -> None:
    # Each operand's OPERAND is declared in the module its RENDERING (or its driver rendering) comes from.
    modules = {operand_catalog.RENDERINGS[o.name].context.__module__ for o in operand_catalog.GENERIC}
    assert len(modules) == len(operand_catalog.GENERIC)
    for operand in operand_catalog.GENERIC:
        module = operand_catalog.RENDERINGS[operand.name].context.__module__
        assert module.startswith("ocp_gpu.rendering.operands.")
        assert __import__(module, fromlist=["OPERAND"]).OPERAND is operand
    assert len({o.name for o in operand_catalog.OPERANDS}) == len(operand_catalog.OPERANDS)

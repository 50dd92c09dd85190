"""We test these aspects of a node's workload (planning/operands/workloads.py) and of the deploy
labels each workload gets (planning/operands/node_labels.py, NVIDIA's gpuStateLabels):

- sandbox workloads off: every node runs containers; a node labelled vm-* is named back with
  the label and the fix, and keeps the container stack;
- on: the label decides, `defaultWorkload` for a node without one; a value that is none of the
  three is named back and the node's deploy labels are left as they are (nothing running is taken);
- vm-passthrough gets the VFIO manager, sandbox device plugin and sandbox validator labels and
  loses the container stack's; vm-vgpu gets the vGPU manager, vGPU device manager, sandbox device
  plugin and validator; back to container: the VM labels go, the container ones come back;
- an admin's "false" is kept wherever it is; `gpu.deploy.operands=false` removes every "true";
- `stack_of` reads which stack a node's labels show;
- hypothesis: after the patch a node never carries "true" deploy labels of two stacks, planning
  again gives None, a bad label never changes a deploy label, and an admin's "false" never changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.model import labels
from ocp_gpu.model.policy import policy_parser, policy_spec
from ocp_gpu.planning.operands import node_labels, workloads
from ocp_gpu.planning.operands.workloads import Workload

WORKLOAD = labels.GPU_WORKLOAD_CONFIG
CONTAINER_LABELS = tuple(
    labels.deploy_label(name)
    for name in (
        "driver",
        "container-toolkit",
        "operator-validator",
        "device-plugin",
        "dcgm",
        "dcgm-exporter",
        "gpu-feature-discovery",
    )
)
PASSTHROUGH_LABELS = tuple(
    labels.deploy_label(n) for n in ("vfio-manager", "sandbox-device-plugin", "sandbox-validator")
)
VGPU_LABELS = tuple(
    labels.deploy_label(n)
    for n in ("vgpu-manager", "vgpu-device-manager", "sandbox-device-plugin", "sandbox-validator")
)
DEPLOY = node_labels.DeployLabels(
    every_gpu_node=CONTAINER_LABELS,
    mig_capable=(labels.deploy_label("mig-manager"),),
    while_enabled=(labels.deploy_label("dra-driver"),),
    exclusive=((labels.deploy_label("dra-driver"), labels.deploy_label("device-plugin")),),
    vm={Workload.VM_PASSTHROUGH: PASSTHROUGH_LABELS, Workload.VM_VGPU: VGPU_LABELS},
)
STACKS = {
    Workload.CONTAINER: frozenset(DEPLOY.container_stack),
    Workload.VM_PASSTHROUGH: frozenset(PASSTHROUGH_LABELS),
    Workload.VM_VGPU: frozenset(VGPU_LABELS),
}
GPU = {labels.NFD_NVIDIA_PCI: "true", labels.GPU_PRESENT: "true"}
ON = policy_spec.SandboxWorkloadsSpec(enabled=True)
OFF = policy_spec.SandboxWorkloadsSpec()


def apply(node: Mapping[str, str], patch: Mapping[str, str | None] | None) -> dict[str, str]:
    result = dict(node)
    for key, value in (patch or {}).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def settle(node: Mapping[str, str], workload: Workload | None) -> dict[str, str]:
    return apply(node, node_labels.plan_node_labels(node, DEPLOY, None, frozenset(), workload))


def true_keys(node: Mapping[str, str]) -> set[str]:
    """The operand deploy labels the node carries as "true"."""
    return {
        key
        for key, value in node.items()
        if value == "true" and key.startswith(labels.GPU_DEPLOY_PREFIX) and key != labels.GPU_DEPLOY_OPERANDS
    }


# --- select_workload -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "sandbox", "expected", "problem"),
    [
        (None, OFF, Workload.CONTAINER, None),
        ("container", OFF, Workload.CONTAINER, None),
        ("vm-passthrough", OFF, Workload.CONTAINER, "spec.sandboxWorkloads.enabled=true"),
        ("vm-vgpu", OFF, Workload.CONTAINER, "spec.sandboxWorkloads.enabled=true"),
        (None, ON, Workload.CONTAINER, None),
        (
            None,
            policy_spec.SandboxWorkloadsSpec(enabled=True, default_workload=Workload.VM_PASSTHROUGH),
            Workload.VM_PASSTHROUGH,
            None,
        ),
        ("vm-passthrough", ON, Workload.VM_PASSTHROUGH, None),
        ("vm-vgpu", ON, Workload.VM_VGPU, None),
        ("container", ON, Workload.CONTAINER, None),
        ("vm-passthru", ON, None, "set the label to one of them or remove it"),
        ("vm-passthru", OFF, None, "set the label to one of them or remove it"),
    ],
)
def test_select_workload(
    label: str | None,
    sandbox: policy_spec.SandboxWorkloadsSpec,
    expected: Workload | None,
    problem: str | None,
) -> None:
    node = {} if label is None else {WORKLOAD: label}
    choice = workloads.select_workload("gpu-1", node, sandbox)
    assert choice.workload == expected
    if problem is None:
        assert choice.problem is None
    else:
        assert choice.problem is not None
        assert problem in choice.fix
        assert "gpu-1" in choice.problem and WORKLOAD in choice.problem


# --- the deploy labels per workload ----------------------------------------------------------


@pytest.mark.parametrize("workload", list(Workload))
def test_a_new_node_gets_exactly_its_stack(workload: Workload) -> None:
    node = settle(GPU, workload)
    assert true_keys(node) == set(STACKS[workload]) - {labels.deploy_label("mig-manager")} - (
        {labels.deploy_label("dra-driver")}
    )


def test_container_to_passthrough_and_back() -> None:
    container = settle(GPU, Workload.CONTAINER)
    passthrough = settle(container, Workload.VM_PASSTHROUGH)
    assert true_keys(passthrough) == set(PASSTHROUGH_LABELS)
    vgpu = settle(passthrough, Workload.VM_VGPU)
    assert true_keys(vgpu) == set(VGPU_LABELS)
    assert labels.deploy_label("vfio-manager") not in vgpu
    back = settle(vgpu, Workload.CONTAINER)
    assert true_keys(back) == set(CONTAINER_LABELS)


def test_an_admins_false_is_kept_across_a_move() -> None:
    node = {**settle(GPU, Workload.CONTAINER), labels.deploy_label("dcgm"): "false"}
    moved = settle(node, Workload.VM_PASSTHROUGH)
    assert moved[labels.deploy_label("dcgm")] == "false"
    node = {**GPU, labels.deploy_label("vfio-manager"): "false"}
    assert settle(node, Workload.VM_PASSTHROUGH)[labels.deploy_label("vfio-manager")] == "false"


def test_a_paused_container_label_goes_on_a_move() -> None:
    # The MIG manager's pause value is the container stack's: a VM node runs none of it.
    node = {**settle(GPU, Workload.CONTAINER), labels.deploy_label("device-plugin"): "paused-for-mig-change"}
    assert labels.deploy_label("device-plugin") not in settle(node, Workload.VM_PASSTHROUGH)


def test_a_bad_label_leaves_the_deploy_labels() -> None:
    node = settle(GPU, Workload.CONTAINER)
    assert node_labels.plan_node_labels(node, DEPLOY, None, frozenset(), None) is None


def test_opted_out_vm_node_loses_its_stack() -> None:
    node = {**settle(GPU, Workload.VM_VGPU), labels.GPU_DEPLOY_OPERANDS: "false"}
    assert true_keys(settle(node, Workload.VM_VGPU)) == set()


def test_a_vm_node_that_lost_its_gpu_loses_its_stack() -> None:
    node = settle(GPU, Workload.VM_PASSTHROUGH)
    node.pop(labels.NFD_NVIDIA_PCI)
    assert true_keys(settle(node, Workload.VM_PASSTHROUGH)) == set()


def test_stack_of() -> None:
    assert workloads.stack_of(settle(GPU, Workload.CONTAINER), DEPLOY.vm) is Workload.CONTAINER
    assert workloads.stack_of(settle(GPU, Workload.VM_PASSTHROUGH), DEPLOY.vm) is Workload.VM_PASSTHROUGH
    assert workloads.stack_of(settle(GPU, Workload.VM_VGPU), DEPLOY.vm) is Workload.VM_VGPU
    assert workloads.stack_of(GPU, DEPLOY.vm) is Workload.CONTAINER


# --- invariants ------------------------------------------------------------------------------

_KEYS = [*DEPLOY.container_stack, *DEPLOY.vm_stacks, labels.GPU_DEPLOY_OPERANDS]
_node_labels = st.dictionaries(
    st.sampled_from(_KEYS), st.sampled_from(["true", "false", "paused-for-mig-change", ""]), max_size=12
).map(lambda found: {**GPU, **found})
_workloads = st.sampled_from([*Workload, None])


@given(_node_labels, _workloads)
def test_never_two_stacks(node: dict[str, str], workload: Workload | None) -> None:
    after = settle(node, workload)
    if workload is None and node.get(labels.GPU_DEPLOY_OPERANDS) != "false":
        # A bad label: no deploy label changes (an opted-out node loses them all, as any other).
        assert {k: v for k, v in after.items() if k in _KEYS} == {k: v for k, v in node.items() if k in _KEYS}
        return
    if workload is None:
        assert true_keys(after) == set()
        return
    shown = [w for w, keys in STACKS.items() if true_keys(after) & (keys - STACKS[workload])]
    assert not shown, f"{workload} node also carries {shown}: {after}"
    assert true_keys(after) <= STACKS[workload]


@given(_node_labels, _workloads)
def test_idempotent_and_false_kept(node: dict[str, str], workload: Workload | None) -> None:
    after = settle(node, workload)
    assert node_labels.plan_node_labels(after, DEPLOY, None, frozenset(), workload) is None
    for key, value in node.items():
        if value == "false":
            assert after.get(key) == "false"


def test_sandbox_workloads_parsed_with_nvidias_defaults() -> None:
    assert policy_parser.parse_policy({}).sandbox_workloads == OFF
    parsed = policy_parser.parse_policy(
        {"sandboxWorkloads": {"enabled": True, "defaultWorkload": "vm-passthrough", "mode": "kubevirt"}}
    ).sandbox_workloads
    assert parsed.enabled and parsed.default_workload is Workload.VM_PASSTHROUGH
    assert parsed.mode is policy_spec.SandboxMode.KUBEVIRT


def test_a_node_moved_to_a_vm_stack_runs_no_driver() -> None:
    from ocp_gpu.planning.drivers import driver_coverage

    passthrough = {**settle(GPU, Workload.VM_PASSTHROUGH), WORKLOAD: "vm-passthrough"}
    assert labels.runs_vm_stack(passthrough)
    assert not driver_coverage.wants_driver(passthrough)
    # Its stale upgrade state goes (no driver there to upgrade).
    assert node_labels.reads_upgrade_state(passthrough)
    stale = {**passthrough, labels.UPGRADE_STATE: "upgrade-done"}
    assert node_labels.plan_node_labels(stale, DEPLOY, None, frozenset(), Workload.VM_PASSTHROUGH) == {
        labels.UPGRADE_STATE: None
    }
    # Labelled back to containers, the move held by its VMs: still no driver there.
    held = {**passthrough, WORKLOAD: "container"}
    assert labels.runs_vm_stack(held) and not driver_coverage.wants_driver(held)
    # Labelled for VMs but still on the container stack (sandboxWorkloads off, or not moved yet).
    container = {**settle(GPU, Workload.CONTAINER), WORKLOAD: "vm-passthrough"}
    assert not labels.runs_vm_stack(container)
    assert driver_coverage.wants_driver(container)


def test_runs_vm_stack_is_the_rule_for_every_mix_of_its_labels() -> None:
    """The rule as the docstring says it, over every combination of the labels it reads."""
    keys = [labels.deploy_label(operand) for operand in labels.VM_STACK_OPERANDS]
    for workload, driver, *vm_values in itertools.product(
        (None, "container", "vm-passthrough", "vm-vgpu"),
        (None, "true", "false"),
        *[(None, "true", "false")] * 4,
    ):
        node = {key: value for key, value in zip(keys, vm_values, strict=True) if value is not None}
        if workload is not None:
            node[WORKLOAD] = workload
        if driver is not None:
            node[labels.deploy_label("driver")] = driver
        vm = workload in ("vm-passthrough", "vm-vgpu") or "true" in vm_values
        assert labels.runs_vm_stack(node) == (vm and driver is None), node

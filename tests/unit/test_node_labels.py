"""We test these aspects of the node label plan (planning/operands/node_labels.py):

- a new GPU node gets gpu.present and every operand's deploy label; a labelled one gets nothing;
- an admin's deploy label "false" is kept; only missing deploy labels are added;
- `nvidia.com/gpu.deploy.operands=false`: no deploy label is added, ours ("true") are removed;
- a node that lost its GPU loses gpu.present and our deploy labels, keeps the admin's "false";
- a CPU node is never touched, whatever other labels it carries;
- MIG: a MIG-capable GPU node (GFD's mig.capable, else an A100/A30/H100 product, never a vGPU
  host) gets gpu.deploy.mig-manager=true and, with the MIG manager on, mig.config=<default>
  unless it has one; a deploy label paused-for-mig-change (the MIG manager's) is never reset;
- hypothesis: applying the patch then planning again gives None (idempotent, so a quiet
  cluster sees no writes), a CPU node never gets a patch, no foreign label is ever touched,
  and an admin's "false" is never changed.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.model import labels
from ocp_gpu.planning.operands import node_labels
from ocp_gpu.rendering.operands import operand_catalog

GPU = {labels.NFD_NVIDIA_PCI: "true"}
DEPLOY = operand_catalog.DEPLOY_LABELS
DEPLOY_ALL = {operand.deploy_label: "true" for operand in operand_catalog.EVERY_GPU_NODE}
LABELLED_GPU = {**GPU, labels.GPU_PRESENT: "true", **DEPLOY_ALL}
FOREIGN = {"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/worker": ""}
DRIVER_OFF = {labels.deploy_label("driver"): "false"}
OPT_OUT = {labels.GPU_DEPLOY_OPERANDS: "false"}


def apply(node: Mapping[str, str], patch: Mapping[str, str | None] | None) -> dict[str, str]:
    result = dict(node)
    for key, value in (patch or {}).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


PLANS: dict[str, tuple[dict[str, str], dict[str, str | None] | None]] = {
    "new GPU node": ({**FOREIGN, **GPU}, {labels.GPU_PRESENT: "true", **DEPLOY_ALL}),
    "labelled GPU node": (LABELLED_GPU, None),
    "gpu.present wrong": ({**LABELLED_GPU, labels.GPU_PRESENT: "false"}, {labels.GPU_PRESENT: "true"}),
    "one deploy label missing": (
        {k: v for k, v in LABELLED_GPU.items() if k != labels.deploy_label("dcgm")},
        {labels.deploy_label("dcgm"): "true"},
    ),
    "admin's false kept": ({**LABELLED_GPU, **DRIVER_OFF}, None),
    "admin's false on a new GPU node": (
        {**GPU, **DRIVER_OFF},
        {labels.GPU_PRESENT: "true", **{k: "true" for k in DEPLOY_ALL if k not in DRIVER_OFF}},
    ),
    "opted out before labelling": ({**GPU, **OPT_OUT}, {labels.GPU_PRESENT: "true"}),
    "opted out after labelling": ({**LABELLED_GPU, **OPT_OUT}, dict.fromkeys(DEPLOY_ALL)),
    "opted out, admin's false stays": (
        {**LABELLED_GPU, **OPT_OUT, **DRIVER_OFF},
        {k: None for k in DEPLOY_ALL if k not in DRIVER_OFF},
    ),
    "opt-out label set to true means nothing": ({**LABELLED_GPU, labels.GPU_DEPLOY_OPERANDS: "true"}, None),
    "GPU gone": (
        {**FOREIGN, labels.GPU_PRESENT: "true", **DEPLOY_ALL},
        {labels.GPU_PRESENT: None, **dict.fromkeys(DEPLOY_ALL)},
    ),
    "GPU gone, admin's false stays": (
        {labels.GPU_PRESENT: "true", **DEPLOY_ALL, **DRIVER_OFF},
        {labels.GPU_PRESENT: None, **{k: None for k in DEPLOY_ALL if k not in DRIVER_OFF}},
    ),
    "NFD label false": (
        {**LABELLED_GPU, labels.NFD_NVIDIA_PCI: "false"},
        {labels.GPU_PRESENT: None, **dict.fromkeys(DEPLOY_ALL)},
    ),
    "CPU node": (dict(FOREIGN), None),
    "CPU node with only admin labels": ({**FOREIGN, **OPT_OUT, **DRIVER_OFF}, None),
    "CPU node with an unknown operand label": ({labels.deploy_label("mig-manager"): "true"}, None),
    "empty node": ({}, None),
}


@pytest.mark.parametrize(("node", "expected"), PLANS.values(), ids=PLANS.keys())
def test_plan(node: dict[str, str], expected: dict[str, str | None] | None) -> None:
    assert node_labels.plan_node_labels(node, DEPLOY) == expected


_OUR_KEYS = [labels.GPU_PRESENT, labels.GPU_DEPLOY_OPERANDS, *DEPLOY_ALL, labels.NFD_NVIDIA_PCI]
_VALUES = st.sampled_from(["true", "false", "", "yes"])
_NODES = st.dictionaries(
    st.sampled_from([*_OUR_KEYS, *FOREIGN, labels.deploy_label("mig-manager")]),
    _VALUES,
    max_size=len(_OUR_KEYS) + 3,
)


@given(_NODES)
def test_planning_again_after_the_patch_gives_none(node: dict[str, str]) -> None:
    patched = apply(node, node_labels.plan_node_labels(node, DEPLOY))
    assert node_labels.plan_node_labels(patched, DEPLOY) is None


@given(_NODES)
def test_cpu_nodes_are_never_touched(node: dict[str, str]) -> None:
    ours = {labels.GPU_PRESENT, *DEPLOY_ALL}
    cpu_node = {k: v for k, v in node.items() if k not in ours and k != labels.NFD_NVIDIA_PCI}
    assert node_labels.plan_node_labels(cpu_node, DEPLOY) is None


@given(_NODES)
def test_only_our_labels_are_touched_and_admin_false_is_kept(node: dict[str, str]) -> None:
    patch = node_labels.plan_node_labels(node, DEPLOY) or {}
    assert set(patch) <= {labels.GPU_PRESENT, *DEPLOY_ALL, MIG_MANAGER}
    for key, value in node.items():
        if key in DEPLOY_ALL and value == "false":
            assert key not in patch


MIG_MANAGER = operand_catalog.MIG_MANAGER.deploy_label
CAPABLE = {labels.MIG_CAPABLE: "true"}
PAUSED = {labels.deploy_label("device-plugin"): labels.PAUSED_FOR_MIG_CHANGE}

MIG_PLANS: dict[str, tuple[dict[str, str], str | None, dict[str, str | None] | None]] = {
    "MIG-capable: manager label and default config": (
        {**LABELLED_GPU, **CAPABLE},
        "all-disabled",
        {MIG_MANAGER: "true", labels.MIG_CONFIG: "all-disabled"},
    ),
    "MIG manager disabled: deploy label only": ({**LABELLED_GPU, **CAPABLE}, None, {MIG_MANAGER: "true"}),
    "default '': no config label": ({**LABELLED_GPU, **CAPABLE}, "", {MIG_MANAGER: "true"}),
    "the admin's config is kept": (
        {**LABELLED_GPU, **CAPABLE, MIG_MANAGER: "true", labels.MIG_CONFIG: "all-1g.10gb"},
        "all-disabled",
        None,
    ),
    "an admin's false for the manager is kept": (
        {**LABELLED_GPU, **CAPABLE, MIG_MANAGER: "false", labels.MIG_CONFIG: "all-disabled"},
        "all-disabled",
        None,
    ),
    "GFD says not capable": ({**LABELLED_GPU, labels.MIG_CAPABLE: "false"}, "all-disabled", None),
    "no GFD label: an A100 product is": (
        {**LABELLED_GPU, labels.GPU_PRODUCT: "NVIDIA-A100-SXM4-80GB"},
        "all-disabled",
        {MIG_MANAGER: "true", labels.MIG_CONFIG: "all-disabled"},
    ),
    "no GFD label: a T4 is not": ({**LABELLED_GPU, labels.GPU_PRODUCT: "Tesla-T4"}, "all-disabled", None),
    "a vGPU host never": (
        {**LABELLED_GPU, **CAPABLE, labels.VGPU_HOST_DRIVER_VERSION: "550.90"},
        "all-disabled",
        None,
    ),
    "paused for a MIG change: left alone": (
        {**LABELLED_GPU, **CAPABLE, MIG_MANAGER: "true", labels.MIG_CONFIG: "all-1g.10gb", **PAUSED},
        "all-disabled",
        None,
    ),
    "opted out: the manager label goes too": (
        {**LABELLED_GPU, **CAPABLE, MIG_MANAGER: "true", **OPT_OUT},
        "all-disabled",
        dict.fromkeys([*DEPLOY_ALL, MIG_MANAGER]),
    ),
    "GPU gone: the manager label goes too": (
        {labels.GPU_PRESENT: "true", **DEPLOY_ALL, MIG_MANAGER: "true"},
        "all-disabled",
        {labels.GPU_PRESENT: None, **dict.fromkeys([*DEPLOY_ALL, MIG_MANAGER])},
    ),
}


@pytest.mark.parametrize(("node", "default", "expected"), MIG_PLANS.values(), ids=MIG_PLANS.keys())
def test_mig_plan(node: dict[str, str], default: str | None, expected: dict[str, str | None] | None) -> None:
    assert node_labels.plan_node_labels(node, DEPLOY, default) == expected


_MIG_NODES = st.dictionaries(
    st.sampled_from(
        [*_OUR_KEYS, MIG_MANAGER, labels.MIG_CAPABLE, labels.MIG_CONFIG, labels.deploy_label("dcgm")]
    ),
    st.sampled_from(["true", "false", "", labels.PAUSED_FOR_MIG_CHANGE, "all-1g.10gb"]),
    max_size=len(_OUR_KEYS) + 4,
)


@given(_MIG_NODES, st.sampled_from([None, "", "all-disabled"]))
def test_mig_labelling_is_idempotent_and_never_resets_a_pause(
    node: dict[str, str], default: str | None
) -> None:
    patch = node_labels.plan_node_labels(node, DEPLOY, default)
    assert node_labels.plan_node_labels(apply(node, patch), DEPLOY, default) is None
    for key, value in node.items():
        if value == labels.PAUSED_FOR_MIG_CHANGE and key.startswith(labels.GPU_DEPLOY_PREFIX):
            assert key not in (patch or {})
    if labels.MIG_CONFIG in node:
        assert labels.MIG_CONFIG not in (patch or {})


ENABLED = labels.UPGRADE_ENABLED_ANNOTATION


@pytest.mark.parametrize(
    ("node", "annotations", "auto_upgrade", "expected"),
    [
        (GPU, {}, True, {ENABLED: "true"}),
        (GPU, {ENABLED: "true"}, True, None),
        (GPU, {ENABLED: "false"}, True, {ENABLED: "true"}),
        (GPU, {ENABLED: "true"}, False, {ENABLED: None}),
        (GPU, {}, False, None),
        # no valid policy with drivers enabled: nothing changes either way
        (GPU, {ENABLED: "true"}, None, None),
        (GPU, {}, None, None),
        # CPU nodes are never touched
        ({}, {}, True, None),
        ({}, {ENABLED: "true"}, False, None),
    ],
)
def test_upgrade_enabled_annotation(
    node: dict[str, str], annotations: dict[str, str], auto_upgrade: bool | None, expected: object
) -> None:
    assert node_labels.plan_upgrade_annotation(node, annotations, auto_upgrade) == expected


@pytest.mark.parametrize(
    ("opt_out", "state", "removed"),
    [
        ({labels.deploy_label("driver"): "false"}, "upgrade-done", True),
        ({labels.deploy_label("driver"): "false"}, "upgrade-required", True),
        ({labels.GPU_DEPLOY_OPERANDS: "false"}, "upgrade-done", True),
        # mid-upgrade: the label stays until the upgrade lifts its cordon
        ({labels.deploy_label("driver"): "false"}, "pod-restart-required", False),
        ({labels.deploy_label("driver"): "false"}, "upgrade-failed", False),
        # not opted out: the upgrade controller owns the label
        ({}, "upgrade-done", False),
    ],
)
def test_an_opted_out_node_loses_an_idle_upgrade_state(
    opt_out: dict[str, str], state: str, removed: bool
) -> None:
    node = {**GPU, **{k: "true" for k in DEPLOY_ALL}, labels.GPU_PRESENT: "true", **opt_out}
    node[labels.UPGRADE_STATE] = state
    patch = node_labels.plan_node_labels(node, DEPLOY) or {}
    assert (labels.UPGRADE_STATE in patch and patch[labels.UPGRADE_STATE] is None) is removed

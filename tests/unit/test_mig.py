"""We test these aspects of MIG (model/mig_catalog.py, planning/operands/mig_planning.py,
rendering/operands/mig_manager.py):

- the default mig-parted config: version v1, all-disabled / all-enabled / all-balanced and one
  all-<profile> per profile of the A100 40GB, A100 80GB / H100 80GB and A30 families; a
  profile two families make in different numbers gets one entry per family, by device id;
- what applying a config makes (`mig_devices`): per family, MIG off for all-disabled, an
  unknown config or a file of another format refused with the reason;
- MIG capability as NVIDIA reads it (GFD's label first, then the product name, never vGPU);
- the state labels read back: failed nodes, the summary, the condition message;
- the rendered objects: our two ConfigMaps only when the policy names none, the DaemonSet
  mounting whichever applies, NVIDIA's env, selecting nvidia.com/gpu.deploy.mig-manager=true.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from ocp_gpu.model import images, labels, mig_catalog
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.planning.operands import mig_planning
from ocp_gpu.rendering.operands import mig_manager, operand_catalog, operand_common, operand_rendering

A100_80 = "0x20B210DE"
A100_40 = "0x20B010DE"
H100_80 = "0x233010DE"
A30 = "0x20B710DE"


def test_the_default_configs_have_the_standard_names() -> None:
    document = mig_catalog.default_configs()
    assert document["version"] == "v1"
    names = set(document["mig-configs"])
    assert {
        "all-disabled",
        "all-enabled",
        "all-balanced",
        "all-1g.5gb",
        "all-1g.10gb",
        "all-2g.20gb",
        "all-3g.40gb",
        "all-7g.80gb",
        "all-1g.10gb.me",
        "all-1g.6gb",
    } <= names
    # A round trip through the ConfigMap's text gives the same document.
    assert yaml.safe_load(mig_manager.config_text()) == document


MAKES = {
    "1g.10gb on an A100 80GB": ("all-1g.10gb", A100_80, 2, {"1g.10gb": 14}),
    "1g.10gb on an A100 40GB": ("all-1g.10gb", A100_40, 1, {"1g.10gb": 4}),
    "1g.10gb on an H100 80GB": ("all-1g.10gb", H100_80, 1, {"1g.10gb": 7}),
    "3g.40gb on an A100 80GB": ("all-3g.40gb", A100_80, 4, {"3g.40gb": 8}),
    "balanced on an A100 80GB": ("all-balanced", A100_80, 1, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
    "balanced on an A30": ("all-balanced", A30, 2, {"1g.6gb": 4, "2g.12gb": 2}),
    "all-disabled": ("all-disabled", A100_80, 8, {}),
    "all-enabled: MIG on, no devices": ("all-enabled", A100_80, 8, {}),
    "a profile the GPU does not have: filtered out": ("all-1g.10gb", A30, 1, {}),
}


@pytest.mark.parametrize(("name", "device", "gpus", "expected"), MAKES.values(), ids=MAKES.keys())
def test_what_a_config_makes(name: str, device: str, gpus: int, expected: dict[str, int]) -> None:
    assert mig_planning.mig_devices(mig_catalog.default_configs(), name, device, gpus) == expected


@pytest.mark.parametrize(
    ("document", "name", "says"),
    [
        (mig_catalog.default_configs(), "all-9g.1tb", "no MIG config 'all-9g.1tb'"),
        ({"version": "v2", "mig-configs": {}}, "all-disabled", "not a mig-parted v1"),
        ("not yaml at all", "all-disabled", "not a mig-parted v1"),
    ],
)
def test_a_config_that_cannot_apply_says_why(document: Any, name: str, says: str) -> None:
    with pytest.raises(mig_planning.MigConfigError, match=says):
        mig_planning.mig_devices(document, name, A100_80, 1)


def test_an_admin_file_with_a_single_filter_string() -> None:
    document = {
        "version": "v1",
        "mig-configs": {
            "mine": [
                {"device-filter": A30, "devices": "all", "mig-enabled": True, "mig-devices": {"4g.24gb": 1}}
            ]
        },
    }
    assert mig_planning.mig_devices(document, "mine", A30.lower(), 3) == {"4g.24gb": 3}
    assert mig_planning.mig_devices(document, "mine", A100_80, 3) == {}


CAPABLE = {
    "GFD true": ({labels.MIG_CAPABLE: "true"}, True),
    "GFD false beats an A100 product": (
        {labels.MIG_CAPABLE: "false", labels.GPU_PRODUCT: "NVIDIA-A100-SXM4-80GB"},
        False,
    ),
    "H100 product": ({labels.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"}, True),
    "A30 product": ({labels.GPU_PRODUCT: "NVIDIA-A30"}, True),
    "L4 product": ({labels.GPU_PRODUCT: "NVIDIA-L4"}, False),
    "vGPU host": ({labels.MIG_CAPABLE: "true", labels.VGPU_HOST_DRIVER_VERSION: "550"}, False),
    "nothing known": ({}, False),
}


@pytest.mark.parametrize(("node", "expected"), CAPABLE.values(), ids=CAPABLE.keys())
def test_mig_capability_as_nvidia_reads_it(node: dict[str, str], expected: bool) -> None:
    assert mig_planning.is_mig_capable(node) is expected


def test_states_read_back() -> None:
    nodes = {
        "a": {labels.MIG_CONFIG: "all-1g.10gb", labels.MIG_CONFIG_STATE: "failed"},
        "b": {labels.MIG_CONFIG: "all-disabled", labels.MIG_CONFIG_STATE: "success"},
        "c": {labels.MIG_CONFIG: "all-balanced", labels.MIG_CONFIG_STATE: "pending"},
        "d": {labels.MIG_CONFIG: "all-disabled"},
        "cpu": {},
    }
    states = mig_planning.mig_nodes(nodes)
    assert [s.node for s in states] == ["a", "b", "c", "d"]
    assert mig_planning.summarize(states) == {"failed": 1, "pending": 1, "success": 1, "unknown": 1}
    failed = mig_planning.failed_nodes(nodes)
    assert failed == [mig_planning.MigNodeState("a", "all-1g.10gb", "failed")]
    message = mig_planning.describe_failed(failed)
    assert "a (nvidia.com/mig.config=all-1g.10gb)" in message and "Fix:" in message
    many = [mig_planning.MigNodeState(f"n{i}", "x", "failed") for i in range(5)]
    assert "(+2 more)" in mig_planning.describe_failed(many)


def render(spec: dict[str, Any]) -> list[dict[str, Any]]:
    inputs = operand_common.OperandRenderInputs("gpu-operator", True, images.ImageRef("nvcr.io/nvidia/mig:1"))
    return operand_rendering.render_operand(
        operand_catalog.MIG_MANAGER, policy_parser.parse_policy(spec), inputs
    )


def test_our_configmaps_only_when_the_policy_names_none() -> None:
    ours = {m["metadata"]["name"]: m for m in render({}) if m["kind"] == "ConfigMap"}
    assert set(ours) == {"default-mig-parted-config", "default-gpu-clients"}
    assert (
        yaml.safe_load(ours["default-mig-parted-config"]["data"]["config.yaml"])
        == mig_catalog.default_configs()
    )
    admin = render({"migManager": {"config": {"name": "mine"}, "gpuClientsConfig": {"name": "clients"}}})
    assert [m for m in admin if m["kind"] == "ConfigMap"] == []
    (daemonset,) = [m for m in admin if m["kind"] == "DaemonSet"]
    volumes = {
        v["name"]: v.get("configMap", {}).get("name")
        for v in daemonset["spec"]["template"]["spec"]["volumes"]
    }
    assert volumes["mig-parted-config"] == "mine" and volumes["gpu-clients"] == "clients"


def test_the_daemonset_selects_mig_capable_nodes_with_nvidias_env() -> None:
    (daemonset,) = [
        m
        for m in render(
            {
                "migManager": {
                    "env": [{"name": "WITH_REBOOT", "value": "true"}, {"name": "CONFIG_FILE", "value": "/x"}]
                }
            }
        )
        if m["kind"] == "DaemonSet"
    ]
    pod = daemonset["spec"]["template"]["spec"]
    assert daemonset["metadata"]["name"] == "nvidia-mig-manager"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.deploy.mig-manager": "true"}
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["containers"][0]["env"]}
    # The policy's WITH_REBOOT wins; CONFIG_FILE is ours (it names the mounted file).
    assert env["WITH_REBOOT"] == "true"
    assert env["CONFIG_FILE"] == "/mig-parted-config/config.yaml"
    assert env["GPU_CLIENTS_FILE"] == "/gpu-clients/clients.yaml"
    assert env["DEFAULT_GPU_CLIENTS_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_state_counts_cover_every_state_for_the_gauge() -> None:
    nodes = {
        "a": {labels.MIG_CONFIG: "all-1g.10gb", labels.MIG_CONFIG_STATE: "failed"},
        "b": {labels.MIG_CONFIG: "all-3g.40gb", labels.MIG_CONFIG_STATE: "failed"},
        "c": {labels.MIG_CONFIG: "all-disabled", labels.MIG_CONFIG_STATE: "success"},
        "d": {labels.MIG_CONFIG: "all-disabled"},
        "e": {labels.MIG_CONFIG_STATE: "bogus"},
        "cpu": {},
    }
    assert mig_planning.state_counts(nodes) == {"pending": 0, "success": 1, "failed": 2, "rebooting": 0}
    # No MIG node at all: every state reads 0 (the alert resolves).
    assert set(mig_planning.state_counts({"cpu": {}}).values()) == {0}


ADMIN_MAPS = {"migManager": {"config": {"name": "mine"}, "gpuClientsConfig": {"name": "clients"}}}


@pytest.mark.parametrize(
    ("keys", "field", "words"),
    [
        (
            {"mine": None, "clients": ("clients.yaml",)},
            "spec.migManager.config.name",
            "ConfigMap 'mine' does not exist in namespace 'gpu-operator'",
        ),
        (
            {"mine": ("config.yaml",), "clients": None},
            "spec.migManager.gpuClientsConfig.name",
            "ConfigMap 'clients' does not exist",
        ),
        (
            {"mine": ("configs.yaml", "other"), "clients": ("clients.yaml",)},
            "spec.migManager.config.name",
            "has no key 'config.yaml', the file the pod reads (it has: configs.yaml, other)",
        ),
        (
            {"mine": ("config.yaml",), "clients": ()},
            "spec.migManager.gpuClientsConfig.name",
            "has no key 'clients.yaml'",
        ),
        (None, "spec.migManager.config.name", "cannot be read offline"),
    ],
)
def test_an_admin_config_map_that_cannot_serve_the_mig_manager_is_a_problem_naming_the_field(
    keys: dict[str, tuple[str, ...] | None] | None, field: str, words: str
) -> None:
    from ocp_gpu.planning import config_maps

    named, required = operand_rendering.named_config_maps(
        operand_catalog.MIG_MANAGER, policy_parser.parse_policy(ADMIN_MAPS)
    )
    problem = config_maps.missing_config_map_problem(named, keys, "gpu-operator", required)
    assert problem is not None and problem.field == field and words in problem.message
    assert field in problem.fix or "--live" in problem.fix


def test_admin_config_maps_with_their_keys_are_no_problem_and_ours_are_not_checked() -> None:
    from ocp_gpu.planning import config_maps

    named, required = operand_rendering.named_config_maps(
        operand_catalog.MIG_MANAGER, policy_parser.parse_policy(ADMIN_MAPS)
    )
    keys = {"mine": ("config.yaml",), "clients": ("clients.yaml", "x")}
    assert config_maps.missing_config_map_problem(named, keys, "gpu-operator", required) is None
    # Ours (no name in the policy): nothing to read, nothing to judge.
    assert (
        operand_rendering.named_config_maps(operand_catalog.MIG_MANAGER, policy_parser.parse_policy({}))[0]
        == {}
    )
    # The keys judged are the ones the DaemonSet's env points the container at.
    (daemonset,) = [m for m in render(ADMIN_MAPS) if m["kind"] == "DaemonSet"]
    env = {e["name"]: e.get("value") for e in daemonset["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["CONFIG_FILE"].endswith("/" + required["spec.migManager.config.name"])
    assert env["GPU_CLIENTS_FILE"].endswith("/" + required["spec.migManager.gpuClientsConfig.name"])

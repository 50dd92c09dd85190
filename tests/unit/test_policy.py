"""We test these aspects of the ClusterPolicy model (CRD schema, parse_policy, validate_policy):

- the CRD's shape: group, scope, names, status subresource, printer columns, the shared
  image/env/resources schemas identical across components;
- defaults: `parse_policy` fills in exactly the CRD's `default:` values (the server-defaulted
  empty spec parses to the same Policy), and every CRD default is a field parse_policy reads;
- defaults that are not in the CRD: nvidiaDriverRoot, migStrategy (with NVIDIA's spec.mig.strategy),
  NVIDIA's podDeletion laid over gpuPodDeletion;
- NVIDIA's sample ClusterPolicy conforms to the schema and parses as written, with no problem;
  NVIDIA's OperatorHub example, as the API server stores it, with no warning either;
- podDeletion and gpuPodDeletion: either alone is no problem; both written with different values
  is a warning naming both values (a gpuPodDeletion field at its default may be the server's);
- off-server input of the wrong shape raises PolicyParseError naming the field;
- every semantic check of validate_policy, each naming its field, fix and severity;
- label selectors, resourceConfig entries (same expression as the CRD's CEL rule), maxUnavailable scaling;
- hypothesis: any schema-valid spec parses and validates without raising, and server
  defaulting never changes what a spec means.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocp_gpu.model.policy import policy_checks, policy_parser, policy_spec, resource_config, selectors
from ocp_gpu.model.policy.policy_problems import Severity
from tests.unit._crd_schema import (
    apply_defaults,
    default_leaves,
    load_crd,
    root_schema,
    schema_errors,
    spec_schema,
    sub_schema,
    values,
)

DATA = Path(__file__).parent / "data"
NVIDIA_SAMPLE = DATA / "nvidia-clusterpolicy.yaml"

# Every default image the operator's Deployment carries (NVIDIA's names, OLM-style digests).
FULL_ENV = {
    "DRIVER_IMAGE": "nvcr.io/nvidia/driver@sha256:" + "b" * 64,
    "DRIVER_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0",
    "CONTAINER_TOOLKIT_IMAGE": "nvcr.io/nvidia/k8s/container-toolkit:v1.17.5-ubi8",
    "DEVICE_PLUGIN_IMAGE": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1-ubi9",
    "DCGM_IMAGE": "nvcr.io/nvidia/cloud-native/dcgm:4.1.1-2-ubuntu22.04",
    "DCGM_EXPORTER_IMAGE": "nvcr.io/nvidia/k8s/dcgm-exporter:4.1.1-4.0.4-ubuntu22.04",
    "GFD_IMAGE": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1-ubi9",
    "VALIDATOR_IMAGE": "quay.io/ocp-gpu/ocp-gpu:0.1.0",
    "MIG_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.8.0-ubuntu20.04",
}

COMPONENTS = (
    "driver",
    "toolkit",
    "devicePlugin",
    "dcgm",
    "dcgmExporter",
    "gfd",
    "migManager",
    "nodeStatusExporter",
    "validator",
)


def nvidia_sample() -> dict[str, Any]:
    sample: dict[str, Any] = yaml.safe_load(NVIDIA_SAMPLE.read_text())
    return sample


def problems_of(spec: dict[str, Any], env: dict[str, str] | None = None) -> set[tuple[str, Severity]]:
    found = policy_checks.validate_policy(policy_parser.parse_policy(spec), FULL_ENV if env is None else env)
    return {(problem.field, problem.severity) for problem in found}


def set_path(spec: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    node = spec
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return spec


# --- the CRD -------------------------------------------------------------------------


def test_crd_identity() -> None:
    crd = load_crd()
    assert crd["metadata"]["name"] == "clusterpolicies.nvidia.com"
    assert crd["spec"]["group"] == "nvidia.com"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"] == {
        "kind": "ClusterPolicy",
        "listKind": "ClusterPolicyList",
        "plural": "clusterpolicies",
        "singular": "clusterpolicy",
    }
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("State", ".status.state"),
        ("Age", ".metadata.creationTimestamp"),
    ]


def test_status_schema() -> None:
    status = root_schema()["properties"]["status"]["properties"]
    assert status["state"]["enum"] == ["ready", "notReady", "ignored"]
    assert set(status["conditions"]["items"]["properties"]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }
    assert set(status["driverDaemonSets"]["items"]["properties"]) == {
        "name",
        "key",
        "image",
        "dtkImage",
        "nodes",
        "ready",
    }
    assert {"namespace", "observedGeneration", "platform"} <= set(status)


ENUMS = {
    ("driver", "imagePullPolicy"): ["Always", "IfNotPresent", "Never"],
    ("daemonsets", "updateStrategy"): ["RollingUpdate", "OnDelete"],
    ("driver", "kernelModuleType"): ["auto", "open", "proprietary"],
    ("devicePlugin", "migStrategy"): ["none", "single", "mixed"],
    ("devicePlugin", "deviceListStrategy"): ["envvar", "volume-mounts", "cdi-annotations", "cdi-cri"],
    ("devicePlugin", "deviceIDStrategy"): ["uuid", "index"],
}


@pytest.mark.parametrize(("path", "expected"), ENUMS.items(), ids=[".".join(p) for p in ENUMS])
def test_enums_are_the_wire_values_of_the_model(path: tuple[str, ...], expected: list[str]) -> None:
    assert sub_schema(spec_schema(), path)["enum"] == expected


def test_model_enums_match_the_crd() -> None:
    for enum_type, path in (
        (policy_spec.ImagePullPolicy, ("driver", "imagePullPolicy")),
        (policy_spec.UpdateStrategy, ("daemonsets", "updateStrategy")),
        (policy_spec.KernelModuleType, ("driver", "kernelModuleType")),
        (policy_spec.MigStrategy, ("devicePlugin", "migStrategy")),
        (policy_spec.DeviceListStrategy, ("devicePlugin", "deviceListStrategy")),
        (policy_spec.DeviceIDStrategy, ("devicePlugin", "deviceIDStrategy")),
        (policy_spec.ContainerRuntime, ("operator", "defaultRuntime")),
    ):
        assert [member.value for member in enum_type] == sub_schema(spec_schema(), path)["enum"]


SHARED_FIELDS = ("imagePullPolicy", "imagePullSecrets", "env", "args", "resources")


@pytest.mark.parametrize("field", SHARED_FIELDS)
def test_shared_component_fields_have_one_schema(field: str) -> None:
    """Generated once, edited by hand since: the copies must not drift apart."""
    schemas = [spec_schema()["properties"][component]["properties"][field] for component in COMPONENTS]
    assert all(schema == schemas[0] for schema in schemas)


def test_env_is_a_typed_list_keyed_by_name() -> None:
    env = spec_schema()["properties"]["driver"]["properties"]["env"]
    assert env["x-kubernetes-list-type"] == "map"
    assert env["x-kubernetes-list-map-keys"] == ["name"]
    assert set(env["items"]["properties"]) == {"name", "value"}


def test_max_unavailable_is_int_or_string_with_a_pattern() -> None:
    for path in (
        ("driver", "upgradePolicy", "maxUnavailable"),
        ("daemonsets", "rollingUpdate", "maxUnavailable"),
    ):
        schema = sub_schema(spec_schema(), path)
        assert schema["x-kubernetes-int-or-string"] is True
        assert schema["pattern"] == "^[0-9]+%?$"


def _resource_config_cel_regex() -> str:
    schema = sub_schema(spec_schema(), ("devicePlugin", "resourceConfig"))
    (rule,) = schema["x-kubernetes-validations"]
    assert "spec.devicePlugin.resourceConfig" in rule["message"]
    match = re.fullmatch(r"self == '' \|\| self\.matches\('(?P<regex>[^']+)'\)", rule["rule"])
    assert match, rule["rule"]
    return match["regex"]


RESOURCE_CONFIG_TEXTS = (
    "gpu:sharedgpu:4",
    "gpu:a:1,mig-3g.20gb:small:2",
    "gpu:a:0",
    "gpu::1",
    "gpu:a:1,",
    ",gpu:a:1",
    "gpu:a:1, gpu:b:2",
    "GPU:a:1",
    "gpu:a:01",
    "gpu:a:1:2",
    "a.b-c:d:10",
    "-a:b:1",
    "a:b-:1",
)


@pytest.mark.parametrize("text", RESOURCE_CONFIG_TEXTS)
def test_resource_config_cel_rule_agrees_with_the_model(text: str) -> None:
    """The server's CEL rule and validate_policy accept the same resourceConfig strings."""
    accepted_by_cel = re.search(_resource_config_cel_regex(), text) is not None
    assert accepted_by_cel == (resource_config.parse_resource_config(text)[1] == ())


_ENTRY_PARTS = st.sampled_from(["gpu", "mig-3g.20gb", "a", "A", "-x", "x.", "", "0", "01", "4", " gpu"])


@given(st.lists(st.tuples(_ENTRY_PARTS, _ENTRY_PARTS, _ENTRY_PARTS), min_size=1, max_size=4))
def test_resource_config_cel_rule_agrees_on_any_entries(entries: list[tuple[str, str, str]]) -> None:
    text = ",".join(":".join(entry) for entry in entries)
    accepted_by_cel = re.search(_resource_config_cel_regex(), text) is not None
    assert accepted_by_cel == (resource_config.parse_resource_config(text)[1] == ())


# --- defaults ----------------------------------------------------------------------


def test_server_defaulted_empty_spec_parses_like_the_empty_spec() -> None:
    defaulted = apply_defaults(spec_schema(), {})
    assert defaulted["driver"]["upgradePolicy"]["gpuPodDeletion"] == {
        "force": False,
        "timeoutSeconds": 300,
        "deleteEmptyDir": False,
    }
    assert policy_parser.parse_policy(defaulted) == policy_parser.parse_policy({}) == policy_spec.Policy()


def test_seed_upgrade_policy_defaults() -> None:
    upgrade = policy_parser.parse_policy({}).driver.upgrade_policy
    assert upgrade == policy_spec.UpgradePolicy(
        auto_upgrade=True,
        max_parallel_upgrades=1,
        max_unavailable="25%",
        wait_for_completion=policy_spec.WaitForCompletion(
            timeout_seconds=0, pod_selector=policy_spec.PodSelector("")
        ),
        gpu_pod_deletion=policy_spec.GpuPodDeletion(force=False, timeout_seconds=300, delete_empty_dir=False),
        drain=policy_spec.Drain(
            enable=False,
            force=False,
            pod_selector=policy_spec.PodSelector(""),
            timeout_seconds=300,
            delete_empty_dir=False,
        ),
    )


def _another_value(default: Any, schema: dict[str, Any]) -> Any:
    """A schema-valid value different from `default`."""
    if "enum" in schema:
        return next(value for value in schema["enum"] if value != default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 7
    if schema.get("x-kubernetes-int-or-string"):
        return "37%"
    return default + "-changed" if default else "changed"


DEFAULT_LEAVES = default_leaves(spec_schema())


@pytest.mark.parametrize(
    ("path", "default", "schema"), DEFAULT_LEAVES, ids=[".".join(path) for path, _, _ in DEFAULT_LEAVES]
)
def test_every_crd_default_is_read_by_parse_policy(
    path: tuple[str, ...], default: Any, schema: dict[str, Any]
) -> None:
    """Setting the default explicitly changes nothing; setting another value changes the Policy."""
    assert policy_parser.parse_policy(set_path({}, path, default)) == policy_parser.parse_policy({})
    assert policy_parser.parse_policy(
        set_path({}, path, _another_value(default, schema))
    ) != policy_parser.parse_policy({})


def test_crd_has_the_seed_defaults() -> None:
    leaves = {".".join(path): default for path, default, _ in DEFAULT_LEAVES}
    assert {key: value for key, value in leaves.items() if key.startswith("driver.upgradePolicy.")} == {
        "driver.upgradePolicy.autoUpgrade": True,
        "driver.upgradePolicy.maxParallelUpgrades": 1,
        "driver.upgradePolicy.maxUnavailable": "25%",
        "driver.upgradePolicy.waitForCompletion.timeoutSeconds": 0,
        "driver.upgradePolicy.waitForCompletion.podSelector": "",
        "driver.upgradePolicy.gpuPodDeletion.force": False,
        "driver.upgradePolicy.gpuPodDeletion.timeoutSeconds": 300,
        "driver.upgradePolicy.gpuPodDeletion.deleteEmptyDir": False,
        "driver.upgradePolicy.drain.enable": False,
        "driver.upgradePolicy.drain.force": False,
        "driver.upgradePolicy.drain.podSelector": "",
        "driver.upgradePolicy.drain.timeoutSeconds": 300,
        "driver.upgradePolicy.drain.deleteEmptyDir": False,
    }


ENABLED_BY_DEFAULT = {
    "driver": True,
    "toolkit": True,
    "devicePlugin": True,
    "dcgm": True,
    "dcgmExporter": True,
    "gfd": True,
    "migManager": True,
    "nodeStatusExporter": False,
    "validator": True,
    # Not in NVIDIA's ClusterPolicy (its GPUCluster's DRA driver): off unless asked for.
    "draDriver": False,
    # NVIDIA's defaults: on, deployed only with sandboxWorkloads.enabled (Policy.deploys).
    "vfioManager": True,
    "sandboxDevicePlugin": True,
    # NVIDIA's IsEnabled: off unless set (its vGPU manager image is the admin's to build).
    "vgpuManager": False,
    "vgpuDeviceManager": False,
}


def test_component_switches_default_as_nvidias() -> None:
    components = policy_parser.parse_policy({}).components()
    assert {key: component.enabled for key, component in components.items()} == ENABLED_BY_DEFAULT


DRIVER_ROOTS = {
    "driver deployed by us": ({}, "/run/nvidia/driver"),
    "driver on the host": ({"driver": {"enabled": False}}, "/"),
    "explicit root wins": (
        {"driver": {"enabled": False}, "devicePlugin": {"nvidiaDriverRoot": "/opt/nv"}},
        "/opt/nv",
    ),
}


@pytest.mark.parametrize(("spec", "root"), DRIVER_ROOTS.values(), ids=DRIVER_ROOTS.keys())
def test_nvidia_driver_root_follows_the_driver(spec: dict[str, Any], root: str) -> None:
    assert policy_parser.parse_policy(spec).device_plugin.nvidia_driver_root == root


MIG_STRATEGIES = {
    "neither": ({}, "none", set()),
    "nvidia's mig.strategy": ({"mig": {"strategy": "single"}}, "single", set()),
    "ours": ({"devicePlugin": {"migStrategy": "mixed"}}, "mixed", set()),
    "both agree": ({"mig": {"strategy": "mixed"}, "devicePlugin": {"migStrategy": "mixed"}}, "mixed", set()),
    "both disagree: ours wins, error": (
        {"mig": {"strategy": "single"}, "devicePlugin": {"migStrategy": "mixed"}},
        "mixed",
        {("spec.devicePlugin.migStrategy", Severity.ERROR)},
    ),
}


@pytest.mark.parametrize(("spec", "strategy", "expected"), MIG_STRATEGIES.values(), ids=MIG_STRATEGIES.keys())
def test_mig_strategy_precedence(
    spec: dict[str, Any], strategy: str, expected: set[tuple[str, Severity]]
) -> None:
    assert policy_parser.parse_policy(spec).device_plugin.mig_strategy == strategy
    assert problems_of(spec) == expected


def test_nvidias_pod_deletion_overrides_field_by_field() -> None:
    upgrade = {
        "gpuPodDeletion": {"force": True, "timeoutSeconds": 300, "deleteEmptyDir": False},
        "podDeletion": {"timeoutSeconds": 60},
    }
    parsed = policy_parser.parse_policy({"driver": {"upgradePolicy": upgrade}})
    assert parsed.driver.upgrade_policy.gpu_pod_deletion == policy_spec.GpuPodDeletion(
        force=True, timeout_seconds=60, delete_empty_dir=False
    )
    # gpuPodDeletion's 300 is the default the server writes: no conflict
    assert parsed.alias_conflicts == ()


def test_both_names_disagreeing_is_one_conflict_per_setting_naming_both_values() -> None:
    upgrade = {
        "gpuPodDeletion": {"force": True, "timeoutSeconds": 120, "deleteEmptyDir": True},
        "podDeletion": {"force": False, "timeoutSeconds": 120},
    }
    spec = {"driver": {"upgradePolicy": upgrade}}
    parsed = policy_parser.parse_policy(spec)
    assert parsed.driver.upgrade_policy.gpu_pod_deletion == policy_spec.GpuPodDeletion(
        force=False, timeout_seconds=120, delete_empty_dir=True
    )
    assert parsed.alias_conflicts == (
        policy_spec.AliasConflict(
            used=f"{policy_spec.POD_DELETION_ALIAS}.force",
            used_value=False,
            ignored=f"{policy_spec.GPU_POD_DELETION}.force",
            ignored_value=True,
        ),
    )
    (problem,) = policy_checks.validate_policy(parsed, FULL_ENV)
    assert problem.severity is Severity.WARNING
    assert problem.field == "spec.driver.upgradePolicy.podDeletion.force"
    assert problem.message.startswith(
        "false is used; spec.driver.upgradePolicy.gpuPodDeletion.force says true and is ignored"
    )
    # the same after server defaulting
    assert policy_parser.parse_policy(apply_defaults(spec_schema(), spec)) == parsed


# --- NVIDIA's sample ---------------------------------------------------------------


def test_nvidia_sample_conforms_to_the_schema() -> None:
    sample = nvidia_sample()
    assert (sample["apiVersion"], sample["kind"]) == ("nvidia.com/v1", "ClusterPolicy")
    assert schema_errors(spec_schema(), sample["spec"]) == []


def test_nvidia_sample_parses_as_written() -> None:
    parsed = policy_parser.parse_policy(nvidia_sample()["spec"])
    assert parsed.operator.default_runtime is policy_spec.ContainerRuntime.CRIO
    assert parsed.operator.use_ocp_driver_toolkit is True
    assert parsed.daemonsets.tolerations == (
        policy_spec.Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),
    )
    assert parsed.daemonsets.max_unavailable == "1"
    assert parsed.driver.image == policy_spec.ImageSpec(
        repository="nvcr.io/nvidia", name="driver", version="570.124.06"
    )
    assert parsed.driver.licensing.nls_enabled is True
    assert [variable.name for variable in parsed.driver.manager.env][:2] == [
        "ENABLE_GPU_POD_EVICTION",
        "ENABLE_AUTO_DRAIN",
    ]
    assert parsed.driver.upgrade_policy.gpu_pod_deletion == policy_spec.GpuPodDeletion(
        force=False, timeout_seconds=600, delete_empty_dir=True
    )
    assert parsed.device_plugin.mig_strategy is policy_spec.MigStrategy.SINGLE
    assert parsed.device_plugin.resources.as_wire() == {
        "limits": {"memory": "512Mi"},
        "requests": {"cpu": "100m"},
    }
    assert parsed.dcgm_exporter.service_monitor.enabled is True
    assert parsed.dcgm_exporter.service_monitor.additional_labels == {"release": "prometheus"}
    assert parsed.dcgm_exporter.service_monitor.relabelings[0]["targetLabel"] == "instance"
    assert parsed.node_status_exporter.enabled is True
    assert parsed.validator.plugin_env == (policy_spec.EnvVar(name="WITH_WORKLOAD", value="false"),)


def test_nvidia_sample_has_no_problem() -> None:
    # It sets NVIDIA's podDeletion (timeoutSeconds 600, deleteEmptyDir true) and no gpuPodDeletion.
    assert problems_of(nvidia_sample()["spec"]) == set()
    stored = apply_defaults(spec_schema(), nvidia_sample()["spec"])
    assert problems_of(stored) == set()


def test_nvidias_operatorhub_example_as_stored_has_no_warning() -> None:
    """NVIDIA's own example (its v26.7.0 CSV's alm-examples, unchanged), defaulted as the server does."""
    example = yaml.safe_load((DATA / "nvidia-operatorhub-clusterpolicy.yaml").read_text())
    assert example["spec"]["driver"]["upgradePolicy"]["podDeletion"]
    stored = apply_defaults(spec_schema(), example["spec"])
    assert "gpuPodDeletion" in stored["driver"]["upgradePolicy"]  # both names now, as on the server
    parsed = policy_parser.parse_policy(stored)
    assert parsed.alias_conflicts == ()
    assert [
        p for p in policy_checks.validate_policy(parsed, FULL_ENV) if p.severity is Severity.WARNING
    ] == []


def test_nvidia_sample_means_the_same_after_server_defaulting() -> None:
    spec = nvidia_sample()["spec"]
    assert policy_parser.parse_policy(apply_defaults(spec_schema(), spec)) == policy_parser.parse_policy(spec)


# --- wrong shapes (only a file can hold them) -----------------------------------------

WRONG_SHAPES = {
    "string for a bool": ({"driver": {"enabled": "yes"}}, "spec.driver.enabled"),
    "bool for an int": (
        {"driver": {"upgradePolicy": {"maxParallelUpgrades": True}}},
        "spec.driver.upgradePolicy.maxParallelUpgrades",
    ),
    "unknown enum value": ({"devicePlugin": {"migStrategy": "all"}}, "spec.devicePlugin.migStrategy"),
    "list for an object": ({"daemonsets": []}, "spec.daemonsets"),
    "int in a string list": ({"driver": {"imagePullSecrets": [1]}}, "spec.driver.imagePullSecrets[0]"),
    "env entry not an object": ({"toolkit": {"env": ["A=1"]}}, "spec.toolkit.env[0]"),
    "quantity as a list": ({"gfd": {"resources": {"limits": {"cpu": [1]}}}}, "spec.gfd.resources.limits.cpu"),
}


@pytest.mark.parametrize(("spec", "field"), WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_wrong_shapes_raise_naming_the_field(spec: dict[str, Any], field: str) -> None:
    assert schema_errors(spec_schema(), spec) != []
    with pytest.raises(policy_parser.PolicyParseError) as error:
        policy_parser.parse_policy(spec)
    assert error.value.field == field
    assert str(error.value).startswith(f"{field}: expected")


def test_nulls_mean_unset() -> None:
    assert policy_parser.parse_policy(
        {"driver": {"version": None, "upgradePolicy": None}}
    ) == policy_parser.parse_policy({})


# --- semantic checks -----------------------------------------------------------------

E, W = Severity.ERROR, Severity.WARNING
UPGRADE = ("driver", "upgradePolicy")

SEMANTIC_PROBLEMS: dict[str, tuple[dict[str, Any], set[tuple[str, Severity]]]] = {
    "valid defaults": ({}, set()),
    "wait selector does not parse": (
        set_path({}, (*UPGRADE, "waitForCompletion", "podSelector"), "app in (a"),
        {("spec.driver.upgradePolicy.waitForCompletion.podSelector", E)},
    ),
    "drain selector does not parse": (
        set_path({}, (*UPGRADE, "drain", "podSelector"), "app==,"),
        {("spec.driver.upgradePolicy.drain.podSelector", E)},
    ),
    "drain selector parses": (
        set_path({}, (*UPGRADE, "drain", "podSelector"), "app=train,tier notin (web)"),
        set(),
    ),
    "maxUnavailable 0 with autoUpgrade": (
        set_path({}, (*UPGRADE, "maxUnavailable"), 0),
        {("spec.driver.upgradePolicy.maxUnavailable", E)},
    ),
    "maxUnavailable '0%' with autoUpgrade": (
        set_path({}, (*UPGRADE, "maxUnavailable"), "0%"),
        {("spec.driver.upgradePolicy.maxUnavailable", E)},
    ),
    "maxUnavailable '0' while paused is fine": (
        {"driver": {"upgradePolicy": {"maxUnavailable": "0", "autoUpgrade": False}}},
        set(),
    ),
    "maxUnavailable not a count (file only)": (
        set_path({}, (*UPGRADE, "maxUnavailable"), "a lot"),
        {("spec.driver.upgradePolicy.maxUnavailable", E)},
    ),
    "negative timeout (file only)": (
        set_path({}, (*UPGRADE, "drain", "timeoutSeconds"), -1),
        {("spec.driver.upgradePolicy.drain.timeoutSeconds", E)},
    ),
    "operand rolling update with maxUnavailable 0": (
        {"daemonsets": {"rollingUpdate": {"maxUnavailable": "0"}}},
        {("spec.daemonsets.rollingUpdate.maxUnavailable", E)},
    ),
    "operand OnDelete ignores maxUnavailable": (
        {"daemonsets": {"updateStrategy": "OnDelete", "rollingUpdate": {"maxUnavailable": 0}}},
        set(),
    ),
    "driver image cannot be resolved": (
        {"driver": {"repository": "nvcr.io/nvidia/", "version": "570.1"}},
        {("spec.driver.repository", E)},
    ),
    "driver version is not a tag": ({"driver": {"version": "570.1 beta"}}, {("spec.driver.version", E)}),
    "precompiled with a digest": (
        {"driver": {"usePrecompiled": True, "version": "sha256:" + "c" * 64}},
        {("spec.driver.version", E)},
    ),
    "precompiled with proprietary modules": (
        {"driver": {"usePrecompiled": True, "version": "570", "kernelModuleType": "proprietary"}},
        {("spec.driver.kernelModuleType", W)},
    ),
    "fallback without a version": (
        {"driver": {"usePrecompiled": True, "version": "570", "precompiledFallback": {"enabled": True}}},
        {("spec.driver.precompiledFallback.version", E)},
    ),
    "fallback with an invalid version": (
        {"driver": {"usePrecompiled": True, "precompiledFallback": {"enabled": True, "version": "570+1"}}},
        {("spec.driver.precompiledFallback.version", E)},
    ),
    "fallback without precompiled": (
        {"driver": {"precompiledFallback": {"enabled": True, "version": "570.124.06"}}},
        {("spec.driver.precompiledFallback.enabled", W)},
    ),
    "fallback on another branch": (
        {
            "driver": {
                "usePrecompiled": True,
                "version": "570",
                "precompiledFallback": {"enabled": True, "version": "550.1"},
            }
        },
        {("spec.driver.precompiledFallback.version", W)},
    ),
    "fallback on the same branch": (
        {
            "driver": {
                "usePrecompiled": True,
                "version": "570",
                "precompiledFallback": {"enabled": True, "version": "570.124.06"},
            }
        },
        set(),
    ),
    "resourceConfig entry malformed": (
        {"devicePlugin": {"resourceConfig": "gpu:sharedgpu:4,mig-3g.20gb:small"}},
        {("spec.devicePlugin.resourceConfig", E)},
    ),
    "resourceConfig zero replicas": (
        {"devicePlugin": {"resourceConfig": "gpu:shared:0"}},
        {("spec.devicePlugin.resourceConfig", E)},
    ),
    "resourceConfig renames one resource twice": (
        {"devicePlugin": {"resourceConfig": "gpu:a:2,gpu:b:4"}},
        {("spec.devicePlugin.resourceConfig", E)},
    ),
    "resourceConfig valid": (
        {"devicePlugin": {"resourceConfig": "gpu:sharedgpu:4,mig-3g.20gb:small:2", "migStrategy": "mixed"}},
        set(),
    ),
    "resourceConfig MIG entry without migStrategy mixed has no effect": (
        {"devicePlugin": {"resourceConfig": "gpu:sharedgpu:4,mig-3g.20gb:small:2"}},
        {("spec.devicePlugin.resourceConfig", W)},
    ),
    "duplicate env names (file only)": (
        {"toolkit": {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}},
        {("spec.toolkit.env", E)},
    ),
    "duplicate validator env names": (
        {"validator": {"cuda": {"env": [{"name": "X"}, {"name": "X"}]}}},
        {("spec.validator.cuda.env", E)},
    ),
    "no driver but toolkit and plugin need one": (
        {"driver": {"enabled": False}},
        {("spec.driver.enabled", W)},
    ),
    "no driver and nothing needs one": (
        {"driver": {"enabled": False}, "toolkit": {"enabled": False}, "devicePlugin": {"enabled": False}},
        set(),
    ),
    "nvidia's podDeletion alone": (
        {"driver": {"upgradePolicy": {"podDeletion": {"force": True, "timeoutSeconds": 60}}}},
        set(),
    ),
    "the seed's gpuPodDeletion alone": (
        {"driver": {"upgradePolicy": {"gpuPodDeletion": {"force": True, "timeoutSeconds": 60}}}},
        set(),
    ),
    "both names, the same values": (
        {"driver": {"upgradePolicy": {"gpuPodDeletion": {"force": True}, "podDeletion": {"force": True}}}},
        set(),
    ),
    "both names, podDeletion against gpuPodDeletion's default": (
        {
            "driver": {
                "upgradePolicy": {
                    "gpuPodDeletion": {"timeoutSeconds": 300},
                    "podDeletion": {"timeoutSeconds": 0},
                }
            }
        },
        set(),
    ),
    "both names, different values": (
        {
            "driver": {
                "upgradePolicy": {
                    "gpuPodDeletion": {"timeoutSeconds": 120},
                    "podDeletion": {"timeoutSeconds": 600},
                }
            }
        },
        {(f"{policy_spec.POD_DELETION_ALIAS}.timeoutSeconds", W)},
    ),
}


@pytest.mark.parametrize(("spec", "expected"), SEMANTIC_PROBLEMS.values(), ids=SEMANTIC_PROBLEMS.keys())
def test_semantic_problems(spec: dict[str, Any], expected: set[tuple[str, Severity]]) -> None:
    assert problems_of(spec) == expected


@pytest.mark.parametrize(("spec", "expected"), SEMANTIC_PROBLEMS.values(), ids=SEMANTIC_PROBLEMS.keys())
def test_every_problem_says_what_and_how_to_fix(
    spec: dict[str, Any], expected: set[tuple[str, Severity]]
) -> None:
    for problem in policy_checks.validate_policy(policy_parser.parse_policy(spec), FULL_ENV):
        assert problem.field.startswith("spec.")
        assert problem.message and problem.fix
        assert str(problem) == f"{problem.field}: {problem.message} ({problem.fix})"


def test_disabled_components_need_no_image() -> None:
    spec = {key: {"enabled": False} for key in COMPONENTS if key != "validator"}
    assert problems_of(spec, env={"VALIDATOR_IMAGE": FULL_ENV["VALIDATOR_IMAGE"]}) == set()


def test_missing_operator_env_names_each_enabled_component() -> None:
    fields = {field for field, _ in problems_of({}, env={})}
    assert fields == {
        "spec.driver.repository",
        "spec.driver.manager.repository",
        "spec.toolkit.repository",
        "spec.devicePlugin.repository",
        "spec.dcgm.repository",
        "spec.dcgmExporter.repository",
        "spec.gfd.repository",
        "spec.migManager.repository",
        "spec.validator.repository",
    }


# --- selectors, resourceConfig, maxUnavailable -----------------------------------------

VALID_SELECTORS = {
    "": (),
    "app=training": (selectors.SelectorRequirement("app", "=", ("training",)),),
    "app==a, tier != web": (
        selectors.SelectorRequirement("app", "=", ("a",)),
        selectors.SelectorRequirement("tier", "!=", ("web",)),
    ),
    "example.com/job in (a,b),!skip": (
        selectors.SelectorRequirement("example.com/job", "in", ("a", "b")),
        selectors.SelectorRequirement("skip", "!"),
    ),
    "gpu notin (x), present": (
        selectors.SelectorRequirement("gpu", "notin", ("x",)),
        selectors.SelectorRequirement("present", "exists"),
    ),
    "empty=": (selectors.SelectorRequirement("empty", "=", ("",)),),
    "n>3": (selectors.SelectorRequirement("n", ">", ("3",)),),
}

INVALID_SELECTORS = (
    "app in (a",
    "app in ()",
    "=x",
    "a b",
    "a,",
    "a=b=c",
    "-bad=x",
    "a=no spaces",
    "bad/prefix/key=x",
    "a in (b c)",
    "x>y",
    "Upper.Case.com/a=b",
    "a=" + "v" * 64,
)


@pytest.mark.parametrize(("text", "expected"), VALID_SELECTORS.items(), ids=repr)
def test_valid_selectors(text: str, expected: tuple[selectors.SelectorRequirement, ...]) -> None:
    assert selectors.parse_label_selector(text) == expected


@pytest.mark.parametrize("text", INVALID_SELECTORS, ids=repr)
def test_invalid_selectors(text: str) -> None:
    with pytest.raises(ValueError):
        selectors.parse_label_selector(text)


RESOURCE_CONFIGS = {
    "": ((), ()),
    "gpu:sharedgpu:4": (
        (resource_config.ResourceRename(resource="gpu", new_name="sharedgpu", replicas=4),),
        (),
    ),
    "mig-3g.20gb:small:2,mig-3g.20gb:gpu:1": (
        (
            resource_config.ResourceRename(resource="mig-3g.20gb", new_name="small", replicas=2),
            resource_config.ResourceRename(resource="mig-3g.20gb", new_name="gpu", replicas=1),
        ),
        (),
    ),
    "gpu:shared:0,gpu::2, gpu:a:1": ((), ("gpu:shared:0", "gpu::2", " gpu:a:1")),
}


@pytest.mark.parametrize(("text", "expected"), RESOURCE_CONFIGS.items(), ids=repr)
def test_resource_config_entries(text: str, expected: tuple[Any, Any]) -> None:
    assert resource_config.parse_resource_config(text) == expected


SCALED = {
    "count": (3, 10, 3),
    "count as string": ("2", 10, 2),
    "25% of 10 rounds up": ("25%", 10, 3),
    "25% of 4": ("25%", 4, 1),
    "1% of 1 node": ("1%", 1, 1),
    "0%": ("0%", 100, 0),
    "100%": ("100%", 7, 7),
}


@pytest.mark.parametrize(("value", "total", "expected"), SCALED.values(), ids=SCALED.keys())
def test_scaled_max_unavailable(value: int | str, total: int, expected: int) -> None:
    assert policy_spec.scaled_max_unavailable(value, total) == expected


# --- properties ------------------------------------------------------------------------


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(values(spec_schema()))
def test_schema_valid_specs_never_raise(spec: dict[str, Any]) -> None:
    parsed = policy_parser.parse_policy(spec)
    problems = policy_checks.validate_policy(parsed, FULL_ENV)
    assert all(problem.field.startswith("spec.") for problem in problems)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(values(spec_schema()))
def test_server_defaulting_never_changes_the_meaning(spec: dict[str, Any]) -> None:
    assert policy_parser.parse_policy(apply_defaults(spec_schema(), spec)) == policy_parser.parse_policy(spec)

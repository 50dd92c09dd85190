"""We test these aspects of the device plugin's config file (rendering/operands/plugin_config.py)
and of resourceConfig checking (model/policy/resource_config.py):

- every seed-002 option lands at the plugin's field with its value (a named matrix);
- the seed's resourceConfig examples (`gpu:sharedgpu:4`, `mig-3g.20gb:small:2`,
  `mig-3g.20gb:gpu:1`) render to time-slicing / resources entries and advertise what
  the seed says, under each MIG strategy;
- the round trip: for any resourceConfig that validate passes and any node, what a
  plugin reading the rendered file advertises equals the seed's meaning of the entries
  (hypothesis), replicas multiply, and renames never lose a device;
- NVIDIA's plugin (renames ignored) still shares, under the original name;
- a single-strategy node the plugin refuses advertises nothing;
- every refused resourceConfig names the field and the entry at fault, with a fix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ocp_gpu.model.policy import policy_checks, policy_parser, policy_spec, resource_config
from ocp_gpu.model.policy.policy_problems import Severity
from ocp_gpu.rendering.operands import plugin_config

FIELD = "spec.devicePlugin.resourceConfig"


def _plugin(**device_plugin: Any) -> policy_spec.DevicePluginSpec:
    return policy_parser.parse_policy({"devicePlugin": device_plugin}).device_plugin


def _at(config: Mapping[str, Any], path: str) -> Any:
    value: Any = config
    for key in path.split("."):
        value = value[key]
    return value


# --- every seed option: (devicePlugin fields) -> (config path, value) ---------------

SEED_OPTIONS = {
    "failOnInitError default": ({}, "flags.failOnInitError", True),
    "failOnInitError false": ({"failOnInitError": False}, "flags.failOnInitError", False),
    "compatWithCPUManager default": ({}, "flags.plugin.passDeviceSpecs", False),
    "compatWithCPUManager passes device specs": (
        {"compatWithCPUManager": True},
        "flags.plugin.passDeviceSpecs",
        True,
    ),
    "migStrategy default": ({}, "flags.migStrategy", "none"),
    "migStrategy single": ({"migStrategy": "single"}, "flags.migStrategy", "single"),
    "migStrategy mixed": ({"migStrategy": "mixed"}, "flags.migStrategy", "mixed"),
    "deviceListStrategy default (CDI)": (
        {},
        "flags.plugin.deviceListStrategy",
        ["cdi-annotations", "cdi-cri"],
    ),
    "deviceListStrategy volume-mounts": (
        {"deviceListStrategy": "volume-mounts"},
        "flags.plugin.deviceListStrategy",
        "volume-mounts",
    ),
    "deviceIDStrategy default": ({}, "flags.plugin.deviceIDStrategy", "uuid"),
    "deviceIDStrategy index": ({"deviceIDStrategy": "index"}, "flags.plugin.deviceIDStrategy", "index"),
    "nvidiaDriverRoot default (containerized driver)": ({}, "flags.nvidiaDriverRoot", "/run/nvidia/driver"),
    "nvidiaDriverRoot host": ({"nvidiaDriverRoot": "/"}, "flags.nvidiaDriverRoot", "/"),
    "resourceConfig sharing": (
        {"resourceConfig": "gpu:sharedgpu:4"},
        "sharing.timeSlicing.resources",
        [{"name": "nvidia.com/gpu", "rename": "nvidia.com/sharedgpu", "replicas": 4}],
    ),
    "resourceConfig MIG sharing": (
        {"resourceConfig": "mig-3g.20gb:small:2", "migStrategy": "mixed"},
        "sharing.timeSlicing.resources",
        [{"name": "nvidia.com/mig-3g.20gb", "rename": "nvidia.com/small", "replicas": 2}],
    ),
    "resourceConfig MIG as gpu (a rename: time-slicing refuses 1 replica)": (
        {"resourceConfig": "mig-3g.20gb:gpu:1", "migStrategy": "mixed"},
        "resources",
        {"mig": [{"pattern": "3g.20gb", "name": "nvidia.com/gpu"}]},
    ),
    "resourceConfig sharing without renaming": (
        {"resourceConfig": "gpu:gpu:2"},
        "sharing.timeSlicing.resources",
        [{"name": "nvidia.com/gpu", "replicas": 2}],
    ),
}
seed_options = pytest.mark.parametrize(
    ("fields", "path", "expected"), SEED_OPTIONS.values(), ids=SEED_OPTIONS.keys()
)


@seed_options
def test_every_seed_option_reaches_the_plugin(fields: dict[str, Any], path: str, expected: Any) -> None:
    config = plugin_config.render_plugin_config(_plugin(**fields))
    assert config["version"] == "v1"
    assert _at(config, path) == expected


@seed_options
def test_the_config_is_plain_yaml(fields: dict[str, Any], path: str, expected: Any) -> None:
    """What goes into the ConfigMap reads back unchanged (no Python objects, no enums)."""
    config = plugin_config.render_plugin_config(_plugin(**fields))
    assert yaml.safe_load(yaml.safe_dump(config)) == config


def test_nvidia_driver_root_follows_the_driver() -> None:
    """Unset, the root is the containerized driver's, or the host's when the operator deploys no driver."""
    spec = policy_parser.parse_policy({"driver": {"enabled": False}})
    assert plugin_config.render_plugin_config(spec.device_plugin)["flags"]["nvidiaDriverRoot"] == "/"


def test_nothing_to_share_writes_no_sharing_section() -> None:
    config = plugin_config.render_plugin_config(_plugin())
    assert "sharing" not in config
    assert "resources" not in config


# --- the seed's examples, advertised: (resourceConfig, migStrategy, gpus, mig) -> resources

ADVERTISED = {
    "8 GPUs, nothing configured": ("", "none", 8, {}, {"nvidia.com/gpu": 8}),
    "gpu:sharedgpu:4 on 8 GPUs": ("gpu:sharedgpu:4", "none", 8, {}, {"nvidia.com/sharedgpu": 32}),
    "gpu:sharedgpu:4 leaves MIG devices alone (mixed)": (
        "gpu:sharedgpu:4",
        "mixed",
        1,
        {"3g.20gb": 2},
        {"nvidia.com/sharedgpu": 4, "nvidia.com/mig-3g.20gb": 2},
    ),
    "mig-3g.20gb:small:2": (
        "mig-3g.20gb:small:2",
        "mixed",
        0,
        {"3g.20gb": 2, "1g.5gb": 3},
        {"nvidia.com/small": 4, "nvidia.com/mig-1g.5gb": 3},
    ),
    "mig-3g.20gb:gpu:1 beside full GPUs": (
        "mig-3g.20gb:gpu:1",
        "mixed",
        2,
        {"3g.20gb": 2},
        {"nvidia.com/gpu": 4},
    ),
    "share GPUs, MIG devices as gpu (not shared with them)": (
        "gpu:sharedgpu:4,mig-3g.20gb:gpu:1",
        "mixed",
        2,
        {"3g.20gb": 2},
        {"nvidia.com/sharedgpu": 8, "nvidia.com/gpu": 2},
    ),
    "single: MIG devices are gpu, and a gpu entry shares them": (
        "gpu:sharedgpu:3",
        "single",
        0,
        {"1g.5gb": 7},
        {"nvidia.com/sharedgpu": 21},
    ),
    "single: a pure gpu rename covers MIG devices too": (
        "gpu:whole:1",
        "single",
        0,
        {"1g.5gb": 7},
        {"nvidia.com/whole": 7},
    ),
    "single: two profiles, the plugin fails to start": ("", "single", 0, {"1g.5gb": 1, "2g.10gb": 1}, {}),
    "single: GPUs in and out of MIG mode, the plugin fails": ("", "single", 1, {"1g.5gb": 1}, {}),
    "none: MIG devices are not advertised": ("", "none", 2, {"1g.5gb": 7}, {"nvidia.com/gpu": 2}),
    "mixed: a profile with attributes": ("", "mixed", 0, {"1g.10gb+me": 1}, {"nvidia.com/mig-1g.10gb.me": 1}),
    "mixed: renaming a profile with attributes": (
        "mig-1g.10gb.me:media:1",
        "mixed",
        0,
        {"1g.10gb+me": 1, "1g.5gb": 2},
        {"nvidia.com/media": 1, "nvidia.com/mig-1g.5gb": 2},
    ),
    "chained: a shared name another rename moves onto": (
        "gpu:mig-1g.5gb:2,mig-3g.20gb:gpu:1,mig-1g.5gb:y:2",
        "mixed",
        1,
        {"3g.20gb": 1, "1g.5gb": 1},
        {"nvidia.com/mig-1g.5gb": 2, "nvidia.com/gpu": 1, "nvidia.com/y": 2},
    ),
}


@pytest.mark.parametrize(
    ("text", "strategy", "gpus", "mig", "expected"), ADVERTISED.values(), ids=ADVERTISED.keys()
)
def test_advertised_resources(
    text: str, strategy: str, gpus: int, mig: dict[str, int], expected: dict[str, int]
) -> None:
    plugin = _plugin(resourceConfig=text, migStrategy=strategy)
    assert [p for p in resource_config.resource_config_problems(text, strategy)] == []
    config = plugin_config.render_plugin_config(plugin)
    assert plugin_config.advertised_resources(config, gpus, mig) == expected


def test_nvidia_plugin_ignores_renames_but_still_shares() -> None:
    config = plugin_config.render_plugin_config(_plugin(resourceConfig="gpu:sharedgpu:4"))
    assert plugin_config.advertised_resources(config, 8, {}, honours_renames=False) == {"nvidia.com/gpu": 32}


def test_rename_by_default_and_device_counts_as_the_plugin_reads_them() -> None:
    """Config files written by hand (NVIDIA's examples) are read as the plugin reads them."""
    config = {
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {
            "timeSlicing": {
                "renameByDefault": True,
                "resources": [{"name": "gpu", "replicas": 2, "devices": 3}],
            }
        },
    }
    assert plugin_config.advertised_resources(config, 8, {}) == {
        "nvidia.com/gpu": 5,
        "nvidia.com/gpu.shared": 6,
    }


def test_gpu_patterns_match_the_product_name() -> None:
    config = {
        "version": "v1",
        "resources": {"gpus": [{"pattern": "*A100*", "name": "a100"}]},
    }
    assert plugin_config.advertised_resources(config, 2, {}, gpu_product="NVIDIA A100-SXM4-80GB") == {
        "nvidia.com/a100": 2
    }
    assert plugin_config.advertised_resources(config, 2, {}, gpu_product="Tesla T4") == {"nvidia.com/gpu": 2}


@pytest.mark.parametrize(
    ("resource", "pattern"),
    [("mig-3g.20gb", "3g.20gb"), ("mig-1g.10gb.me", "1g.10gb*me"), ("mig-1g.10gb.me.all", "1g.10gb*me*all")],
)
def test_mig_profile_patterns(resource: str, pattern: str) -> None:
    assert plugin_config.mig_profile_pattern(resource) == pattern


def test_mig_profile_pattern_refuses_other_names() -> None:
    with pytest.raises(ValueError, match="gpu"):
        plugin_config.mig_profile_pattern("gpu")


# --- the round trip, against the seed's meaning ---------------------------------------

_PROFILES = ["1g.5gb", "3g.20gb", "1g.10gb+me"]
_NAMES = ["gpu", "sharedgpu", "mig-1g.5gb", "mig-3g.20gb"]
_STRATEGIES = ["none", "single", "mixed"]


def _resource_of(profile: str) -> str:
    return "mig-" + profile.replace("+", ".")


def _seed_meaning(
    renames: tuple[resource_config.ResourceRename, ...], strategy: str, gpus: int, mig: Mapping[str, int]
) -> Counter[str]:
    """What the seed says a node advertises: each resource renamed and multiplied by its entry."""
    counts: Counter[str] = Counter()
    if strategy == "single":
        counts["gpu"] = gpus + sum(mig.values())
    else:
        counts["gpu"] = gpus
    if strategy == "mixed":
        for profile, count in mig.items():
            counts[_resource_of(profile)] += count
    by_resource = {rename.resource: rename for rename in resource_config.effective_renames(renames, strategy)}
    advertised: Counter[str] = Counter()
    for resource, count in counts.items():
        rename = by_resource.get(resource)
        name, replicas = (rename.new_name, rename.replicas) if rename else (resource, 1)
        advertised[f"nvidia.com/{name}"] += count * replicas
    return +advertised


@st.composite
def _nodes_and_configs(draw: st.DrawFn) -> tuple[str, str, int, dict[str, int]]:
    strategy = draw(st.sampled_from(_STRATEGIES))
    sources = draw(st.lists(st.sampled_from(["gpu", *map(_resource_of, _PROFILES)]), unique=True, max_size=4))
    entries = [f"{source}:{draw(st.sampled_from(_NAMES))}:{draw(st.integers(1, 5))}" for source in sources]
    if strategy == "single":
        # A node the plugin accepts: all GPUs whole, or all in MIG mode with one profile.
        if draw(st.booleans()):
            gpus, mig = draw(st.integers(0, 8)), {}
        else:
            gpus, mig = 0, {draw(st.sampled_from(_PROFILES)): draw(st.integers(1, 7))}
    else:
        gpus = draw(st.integers(0, 8))
        mig = draw(st.dictionaries(st.sampled_from(_PROFILES), st.integers(0, 7), max_size=3))
    return ",".join(entries), strategy, gpus, mig


def _errors(text: str, strategy: str) -> list[Any]:
    return [
        p for p in resource_config.resource_config_problems(text, strategy) if p.severity is Severity.ERROR
    ]


@settings(max_examples=400, deadline=None)
@given(_nodes_and_configs())
def test_round_trip_matches_the_seed(case: tuple[str, str, int, dict[str, int]]) -> None:
    text, strategy, gpus, mig = case
    if _errors(text, strategy):
        return  # refused: never rendered
    renames, invalid = resource_config.parse_resource_config(text)
    assert invalid == ()
    config = plugin_config.render_plugin_config(_plugin(resourceConfig=text, migStrategy=strategy))
    # NB: no generated profile is a substring of another (the plugin's patterns match unanchored).
    assert plugin_config.advertised_resources(config, gpus, mig) == dict(
        _seed_meaning(renames, strategy, gpus, mig)
    )


@settings(max_examples=300, deadline=None)
@given(_nodes_and_configs())
def test_replicas_multiply_and_renames_lose_nothing(case: tuple[str, str, int, dict[str, int]]) -> None:
    text, strategy, gpus, mig = case
    if _errors(text, strategy):
        return
    config = plugin_config.render_plugin_config(_plugin(resourceConfig=text, migStrategy=strategy))
    advertised = plugin_config.advertised_resources(config, gpus, mig)
    unshared = plugin_config.advertised_resources(config | {"sharing": {}}, gpus, mig)
    visible = gpus + (sum(mig.values()) if strategy != "none" else 0)
    # Every device is advertised under some name (renames lose none) ...
    assert sum(unshared.values()) == visible
    # ... and sharing multiplies, never removes.
    assert sum(advertised.values()) >= visible
    renames = resource_config.effective_renames(resource_config.parse_resource_config(text)[0], strategy)
    if all(rename.replicas == 1 for rename in renames):
        assert advertised == unshared


# --- refusals name the field and the entry ----------------------------------------------

REFUSED = {
    "missing replicas": ("gpu:sharedgpu:4,mig-3g.20gb:small", "mixed", "'mig-3g.20gb:small' has 2 part(s)"),
    "zero replicas": ("gpu:shared:0", "none", "the replicas '0' in 'gpu:shared:0'"),
    "leading zero": ("gpu:shared:04", "none", "the replicas '04' in 'gpu:shared:04'"),
    "stray comma": ("gpu:shared:2,", "none", "an empty entry (a stray comma)"),
    "spaces": ("gpu:a:2, gpu:b:2", "none", "' gpu:b:2' has spaces around it"),
    "uppercase name": ("gpu:Shared:2", "none", "the new name 'Shared' in 'gpu:Shared:2'"),
    "empty resource": (":shared:2", "none", "the resource '' in ':shared:2'"),
    "unknown resource": ("gpus:shared:2", "none", "'gpus' in 'gpus:shared:2' is not a resource"),
    "name too long": (f"gpu:{'a' * 53}:2", "none", "has 64 characters, the device plugin allows 63"),
    "name not a DNS subdomain": ("gpu:a.-b:2", "none", "'a.-b' is not a DNS subdomain"),
    "renamed twice": ("gpu:a:2,gpu:b:4", "none", "'gpu' is renamed more than once ('gpu:a:2', 'gpu:b:4')"),
    "one name, two sharing levels": (
        "gpu:shared:2,mig-3g.20gb:shared:4",
        "mixed",
        "nvidia.com/shared would hold devices shared 2 and 4 ways",
    ),
    "a shared MIG profile onto unshared GPUs": (
        "mig-1g.5gb:gpu:2",
        "mixed",
        "('mig-1g.5gb:gpu:2': 2, gpu not renamed: 1)",
    ),
}


@pytest.mark.parametrize(("text", "strategy", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_resource_configs_name_the_entry(text: str, strategy: str, message: str) -> None:
    spec = policy_parser.parse_policy({"devicePlugin": {"resourceConfig": text, "migStrategy": strategy}})
    problems = [
        p for p in policy_checks.validate_policy(spec, {"DEVICE_PLUGIN_IMAGE": "r/p:1"}) if p.field == FIELD
    ]
    assert problems, "not refused"
    assert any(message in p.message and p.severity is Severity.ERROR and p.fix for p in problems), [
        str(p) for p in problems
    ]


ACCEPTED = {
    "the seed's sharing": ("gpu:sharedgpu:4", "none"),
    "the seed's MIG sharing": ("mig-3g.20gb:small:2", "mixed"),
    "MIG as gpu beside unshared GPUs": ("mig-3g.20gb:gpu:1", "mixed"),
    "two resources shared alike under one name": ("gpu:shared:2,mig-3g.20gb:shared:2", "mixed"),
    "a 52-character name": (f"gpu:{'a' * 52}:2", "none"),
}


@pytest.mark.parametrize(("text", "strategy"), ACCEPTED.values(), ids=ACCEPTED.keys())
def test_accepted_resource_configs(text: str, strategy: str) -> None:
    assert list(resource_config.resource_config_problems(text, strategy)) == []


def test_mig_entries_without_mixed_are_a_warning() -> None:
    (problem,) = resource_config.resource_config_problems("mig-3g.20gb:small:2", "single")
    assert problem.severity is Severity.WARNING
    assert "'mig-3g.20gb:small:2' has no effect" in problem.message
    assert "mixed" in problem.fix
    # ... and the entry is not rendered.
    assert "sharing" not in plugin_config.render_plugin_config(
        _plugin(resourceConfig="mig-3g.20gb:small:2", migStrategy="single")
    )


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="gpumix-0123456789.:,ab ", max_size=40),
    st.sampled_from(_STRATEGIES),
)
def test_any_resource_config_text_renders_and_checks_without_raising(text: str, strategy: str) -> None:
    """Whatever an off-server file holds: problems are reported, never exceptions."""
    problems = list(resource_config.resource_config_problems(text, strategy))
    assert all(problem.field == FIELD and problem.fix for problem in problems)
    config = plugin_config.render_plugin_config(_plugin(resourceConfig=text, migStrategy=strategy))
    assert plugin_config.advertised_resources(config, 2, {"3g.20gb": 1}) is not None
    if not text:
        assert problems == []


@pytest.mark.parametrize("text", ["gpu:sharedgpu:4:mps", "gpu:sharedgpu:mps"])
def test_resource_config_refuses_mps_by_name(text: str) -> None:
    # The seed's entries cannot say MPS: an entry asking for it is named, with where MPS goes.
    (problem,) = resource_config.resource_config_problems(text, "none")
    assert problem.field == "spec.devicePlugin.resourceConfig"
    assert "asks for MPS" in problem.message and "spec.devicePlugin.config.name" in problem.message

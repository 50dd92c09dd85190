"""The NVIDIA device plugin's config file for a ClusterPolicy, and what a plugin with it advertises.

`render_plugin_config` decides the plugin's `version: v1` config file (the format of
k8s-device-plugin's `api/config/v1`, which the plugin reads from `--config-file`) from
`spec.devicePlugin`, mapping every seed-002 option:

| ClusterPolicy (`spec.devicePlugin.`) | config file |
|---|---|
| `migStrategy` (none, single, mixed) | `flags.migStrategy` |
| `failOnInitError` | `flags.failOnInitError` |
| `nvidiaDriverRoot` | `flags.nvidiaDriverRoot` |
| `compatWithCPUManager` | `flags.plugin.passDeviceSpecs` (the DaemonSet also runs privileged) |
| `deviceListStrategy` (unset: cdi-annotations, cdi-cri with CDI) | `flags.plugin.deviceListStrategy` |
| `deviceIDStrategy` (uuid, index) | `flags.plugin.deviceIDStrategy` |
| `resourceConfig` entry with replicas >= 2 | `sharing.timeSlicing.resources[]`: `{name, rename, replicas}` |
| `resourceConfig` entry, replicas 1 (a rename) | `resources.gpus[]`, `resources.mig[]`: `{pattern, name}` |

The plugin builds its resources in two steps, and the file follows them: first every
device gets a name from the first matching `resources` pattern (defaults after ours:
`gpu` for full GPUs, and for MIG devices `gpu` with single, `mig-<profile>` with
mixed); then `sharing.timeSlicing` replicates every device of a named resource
`replicas` times, advertised under `rename`.  Time-slicing refuses `replicas` < 2,
so a rename alone (`mig-3g.20gb:gpu:1`) goes to `resources`.  NB: when a renamed
resource lands on the name a shared entry starts from (`gpu:sharedgpu:4` with
`mig-3g.20gb:gpu:1`), the shared entry renames its devices in `resources` too and
replicates the new name, so the MIG devices now called `gpu` are not shared with them.

`advertised_resources` answers what a plugin reading such a file advertises on a node
with a given set of GPUs and MIG devices: the node-agent simulation in the harness
sets node capacity from it, and the unit tests check the round trip against the
seed's meaning of each entry.

NB, about NVIDIA's own plugin: releases since v0.12 ignore `rename` and `resources` in
the config file (`DisableResourceNamingInConfig`, "not yet supported") and advertise a
shared resource under its original name (`gpu:sharedgpu:4` on 8 GPUs gives
`nvidia.com/gpu: 32`).  `advertised_resources(..., honours_renames=False)` models
that; the seed's plugin (the fork with GPU sharing) honours them.  Put the shared
entry in `sharing.timeSlicing` with `rename` rather than in `resources` wherever
possible, so that such a plugin still shares (under the old name) instead of
silently sharing nothing.

Pure: no I/O, no Kubernetes client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ocp_gpu.model.policy import resource_config
from ocp_gpu.model.policy.policy_spec import DevicePluginSpec, MigStrategy
from ocp_gpu.model.policy.resource_config import ResourceRename

# The only config format version the plugin reads.
CONFIG_VERSION: Final = "v1"
_BASE_PROFILE_RE: Final = re.compile(r"^([0-9]+g\.[0-9]+gb)((?:\.[a-z0-9]+)*)$")


def qualified(name: str) -> str:
    """`nvidia.com/<name>`, as the plugin qualifies a bare resource name."""
    prefix = f"{resource_config.RESOURCE_PREFIX}/"
    return name if name.startswith(prefix) else prefix + name


def mig_profile_pattern(resource: str) -> str:
    """The `resources.mig[].pattern` matching the profile of `mig-<profile>`.

    NB: the resource name writes the profile's `+` as `.` (profile 1g.10gb+me is
    mig-1g.10gb.me), so the attribute part is matched with wildcards: 1g.10gb*me.
    The plugin matches patterns anywhere in the profile (unanchored), so 1g.10gb also
    matches 1g.10gb+me devices when no earlier pattern takes them.
    """
    match = _BASE_PROFILE_RE.match(resource.removeprefix("mig-"))
    if match is None:
        raise ValueError(f"{resource!r} is not a mig-<profile> resource")
    base, attributes = match.groups()
    return base + "".join(f"*{attribute}" for attribute in attributes.split(".") if attribute)


def _pure_renames(
    renames: tuple[ResourceRename, ...], mig_strategy: MigStrategy
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """`resources.gpus` and `resources.mig` entries for entries that rename in the first step."""
    gpus: list[dict[str, str]] = []
    mig: list[dict[str, str]] = []
    for rename in renames:
        name = qualified(rename.new_name)
        if rename.resource == resource_config.GPU:
            gpus.append({"pattern": "*", "name": name})
            if mig_strategy is MigStrategy.SINGLE:
                # With single, MIG devices are advertised as gpu too: the entry covers them.
                mig.append({"pattern": "*", "name": name})
        else:
            mig.append({"pattern": mig_profile_pattern(rename.resource), "name": name})
    # NB: first match wins; a profile's own pattern must come before a single strategy's "*".
    mig.sort(key=lambda entry: entry["pattern"] == "*")
    return gpus, mig


def _renamed_first(renames: tuple[ResourceRename, ...]) -> set[str]:
    """The resources renamed in the plugin's first step (`resources`), not by time-slicing's `rename`.

    Pure renames (replicas 1) must be.  A shared resource must be too when a
    first-step rename moves other devices onto its name: time-slicing that name
    would share those devices with it.  Its own new name then holds its devices,
    which may crowd another shared resource in turn: repeat until nothing changes.
    """
    first = {
        rename.resource for rename in renames if rename.replicas == 1 and rename.new_name != rename.resource
    }
    while True:
        crowded = {rename.new_name for rename in renames if rename.resource in first}
        more = {rename.resource for rename in renames if rename.replicas > 1 and rename.resource in crowded}
        if more <= first:
            return first
        first |= more


def render_plugin_config(plugin: DevicePluginSpec) -> dict[str, Any]:
    """The device plugin's config file (as a dict, to be written as YAML) for `spec.devicePlugin`.

    Renders the resourceConfig entries that parse and apply under the MIG strategy;
    callers deploy it only for a policy `validate_policy` passes (which refuses the
    others, naming them).
    """
    config: dict[str, Any] = {
        "version": CONFIG_VERSION,
        "flags": {
            "migStrategy": plugin.mig_strategy.value,
            "failOnInitError": plugin.fail_on_init_error,
            "nvidiaDriverRoot": plugin.nvidia_driver_root,
            "plugin": {
                # The static CPU manager needs the device nodes in the allocation response.
                "passDeviceSpecs": plugin.compat_with_cpu_manager,
                "deviceListStrategy": _strategies(plugin),
                "deviceIDStrategy": plugin.device_id_strategy.value,
            },
        },
    }
    renames = resource_config.effective_renames(plugin.resource_renames, plugin.mig_strategy.value)
    first = _renamed_first(renames)
    shared: list[dict[str, Any]] = []
    for rename in renames:
        if rename.replicas == 1:
            continue
        if rename.resource in first:
            # Renamed in the first step: replicate the new name (see the module's NB).
            shared.append({"name": qualified(rename.new_name), "replicas": rename.replicas})
        else:
            entry: dict[str, Any] = {"name": qualified(rename.resource), "replicas": rename.replicas}
            if rename.new_name != rename.resource:
                entry["rename"] = qualified(rename.new_name)
            shared.append(entry)
    first_step = tuple(rename for rename in renames if rename.resource in first)
    gpus, mig = _pure_renames(first_step, plugin.mig_strategy)
    if gpus or mig:
        config["resources"] = {key: entries for key, entries in (("gpus", gpus), ("mig", mig)) if entries}
    if shared:
        # Two entries sharing the same renamed devices would replicate them twice: keep one.
        unique = list({entry["name"]: entry for entry in shared}.values())
        config["sharing"] = {"timeSlicing": {"resources": unique}}
    return config


def _strategies(plugin: DevicePluginSpec) -> str | list[str]:
    """deviceListStrategy as the plugin's config reads it: one name, or a list (CDI's two)."""
    values = [strategy.value for strategy in plugin.device_list_strategies]
    return values[0] if len(values) == 1 else values


def _matches(pattern: str, text: str) -> bool:
    """The plugin's wildcard match: `*` is any run of characters, matched anywhere (unanchored)."""
    regex = ".*".join(re.escape(literal) for literal in pattern.split("*"))
    return re.search(regex, text) is not None


def _first_name(rules: list[tuple[str, str]], text: str) -> str:
    return next(name for pattern, name in rules if _matches(pattern, text))


def _rules(entries: object, defaults: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(pattern, qualified name) in match order: the file's entries, then the plugin's defaults."""
    rules: list[tuple[str, str]] = []
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, Mapping):
                rules.append((str(entry.get("pattern", "")), qualified(str(entry.get("name", "")))))
    return rules + defaults


def _device_names(
    config: Mapping[str, Any],
    gpus: int,
    mig_devices: Mapping[str, int],
    gpu_product: str,
    honours_renames: bool,
) -> dict[str, list[str]] | None:
    """The first step: device ids by resource name, or None where the plugin fails to start."""
    flags = config.get("flags") or {}
    strategy = str(flags.get("migStrategy") or MigStrategy.NONE.value)
    resources = (config.get("resources") or {}) if honours_renames else {}
    gpu_rules = _rules(resources.get("gpus"), [("*", qualified(resource_config.GPU))])
    profiles = {profile: count for profile, count in mig_devices.items() if count > 0}
    if strategy == MigStrategy.SINGLE.value and (len(profiles) > 1 or (profiles and gpus > 0)):
        # The plugin refuses: single needs one MIG profile and every GPU in MIG mode.
        return None
    names: dict[str, list[str]] = {}
    for index in range(gpus):
        names.setdefault(_first_name(gpu_rules, gpu_product), []).append(f"gpu-{index}")
    if strategy == MigStrategy.NONE.value:
        # MIG devices are not advertised at all (their parents would count in `gpus`).
        return names
    for profile, count in sorted(profiles.items()):
        if strategy == MigStrategy.SINGLE.value:
            default = qualified(resource_config.GPU)
        else:
            default = qualified("mig-" + profile.replace("+", "."))
        mig_rules = _rules(resources.get("mig"), [("*", default)])
        name = _first_name(mig_rules, profile)
        names.setdefault(name, []).extend(f"mig-{profile}-{index}" for index in range(count))
    return names


def _sharing(config: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], bool]:
    """The replicated resources the plugin applies (MPS when configured, else time-slicing)."""
    sharing = config.get("sharing") or {}
    replicated = sharing.get("mps") or sharing.get("timeSlicing") or {}
    entries = [entry for entry in replicated.get("resources") or [] if isinstance(entry, Mapping)]
    return entries, bool(replicated.get("renameByDefault", False))


def _chosen(ids: list[str], wanted: object) -> list[str]:
    """The devices a replicated entry shares: "all" (the default), the first N, or a list's worth."""
    if isinstance(wanted, int) and not isinstance(wanted, bool):
        return ids[:wanted]
    if isinstance(wanted, list):
        # NB: approximated by count: the simulation's devices have no UUIDs or indices to match.
        return ids[: len(wanted)]
    return ids


def advertised_resources(
    config: Mapping[str, Any],
    gpus: int,
    mig_devices: Mapping[str, int],
    *,
    gpu_product: str = "NVIDIA GPU",
    honours_renames: bool = True,
) -> dict[str, int]:
    """What a device plugin reading `config` advertises on a node: {"nvidia.com/gpu": 8, ...}.

    `gpus` counts full GPUs (MIG mode off), `mig_devices` MIG devices by profile
    (`{"3g.20gb": 2}`).  With migStrategy none, MIG devices are not advertised; with
    single, every GPU must be in MIG mode with one profile, else the plugin fails to
    start and advertises nothing ({}).  `gpu_product` is the GPU's product name, for
    `resources.gpus` patterns other than "*".  `honours_renames=False` is NVIDIA's
    plugin, which ignores `resources` and `rename` (see the module's NB).
    """
    names = _device_names(config, gpus, mig_devices, gpu_product, honours_renames)
    if names is None:
        return {}
    entries, rename_by_default = _sharing(config)
    devices: dict[str, set[str]] = {}
    shared_names = {qualified(str(entry.get("name", ""))) for entry in entries}
    for name, ids in names.items():
        if name not in shared_names:
            # Not shared: advertised as named.
            devices.setdefault(name, set()).update(ids)
    for entry in entries:
        name = qualified(str(entry.get("name", "")))
        ids = names.get(name, [])
        replicas = int(entry.get("replicas", 1))
        chosen = _chosen(ids, entry.get("devices", "all"))
        # Devices of the resource left out of `devices` stay as they were, unshared.
        rest = ids[len(chosen) :]
        if rest:
            devices.setdefault(name, set()).update(rest)
        target = name
        if rename_by_default:
            target = name + ".shared"
        if honours_renames and entry.get("rename"):
            target = qualified(str(entry["rename"]))
        devices.setdefault(target, set()).update(
            f"{device}::{replica}" for device in chosen for replica in range(replicas)
        )
    return {name: len(ids) for name, ids in sorted(devices.items()) if ids}

"""`spec.devicePlugin.resourceConfig`: the seed's renaming and sharing entries, parsed and checked.

The seed's device plugin takes `<resource>:<newname>:<replicas>` entries separated by
commas: `gpu:sharedgpu:4` shares every full GPU with up to 4 pods as
`nvidia.com/sharedgpu`, `mig-3g.20gb:small:2` shares each 3g.20gb MIG device with 2
pods as `nvidia.com/small`, `mig-3g.20gb:gpu:1` exposes those MIG devices as plain
`nvidia.com/gpu`.

A *resource* here is one of the names the plugin advertises before any renaming:
`gpu` (full GPUs; with migStrategy single, MIG devices too) and, with migStrategy
mixed only, `mig-<profile>` per MIG profile.  `rendering/operands/plugin_config.py` turns the
entries into the plugin's config file.

`read_resource_config` parses the text once, when the policy is read (policy_parser.py); the
rest of a pass reads the parsed `ResourceConfig`.  `config_problems` refuses what the plugin
cannot do or would do silently wrong, naming the entry (the token) at fault:
- an entry that is not `<resource>:<newname>:<replicas>` (which part, and why); one that
  asks for MPS (`gpu:sharedgpu:4:mps`) by name: the seed's entries share by time-slicing only,
  MPS is a plugin config with `sharing.mps` (`spec.devicePlugin.config.name`);
- a resource the plugin never advertises (a typo such as `gpus`: it would match nothing);
- a new name Kubernetes or the plugin would refuse (the plugin qualifies it as
  `nvidia.com/<newname>`, at most 63 characters, a DNS subdomain);
- the same resource renamed twice (the plugin would advertise one device under both);
- devices shared at different replica counts under one name, e.g. `mig-1g.5gb:gpu:2`
  while full GPUs stay `nvidia.com/gpu` unshared: the plugin merges them into one
  resource and a pod asking for one `nvidia.com/gpu` could get a whole GPU or a slice.
A `mig-<profile>` entry without migStrategy mixed is a warning: it has no effect.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Final

from ocp_gpu.model.policy.policy_problems import PolicyProblem, Severity

FIELD: Final = "spec.devicePlugin.resourceConfig"
# The plugin's resource name prefix (NVIDIA's RESOURCE_PREFIX default).
RESOURCE_PREFIX: Final = "nvidia.com"
# The plugin refuses longer qualified names (`MaxResourceNameLength`).
MAX_QUALIFIED_LENGTH: Final = 63
# The resource full GPUs are advertised as, before renaming.
GPU: Final = "gpu"
# MIG devices, with migStrategy mixed: `mig-` + the profile, `+` written as `.` (mig-1g.10gb.me).
MIG_RESOURCE_RE: Final = re.compile(r"^mig-[0-9]+g\.[0-9]+gb(\.[a-z0-9]+)*$")

# One entry; the CRD's CEL rule uses the same expression (a unit test checks).
RESOURCE_CONFIG_ENTRY: Final = r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?:[a-z0-9]([a-z0-9.-]*[a-z0-9])?:[1-9][0-9]*$"
_ENTRY_RE: Final = re.compile(RESOURCE_CONFIG_ENTRY)
_NAME_RE: Final = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")
_DNS_LABEL_RE: Final = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_EXAMPLES: Final = "write entries like gpu:sharedgpu:4 or mig-3g.20gb:small:2, separated by commas"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceRename:
    """One resourceConfig entry: expose `resource` as nvidia.com/`new_name`, `replicas` per device."""

    resource: str
    new_name: str
    replicas: int

    @property
    def token(self) -> str:
        """The entry as written."""
        return f"{self.resource}:{self.new_name}:{self.replicas}"


def parse_resource_config(text: str) -> tuple[tuple[ResourceRename, ...], tuple[str, ...]]:
    """The valid `<resource>:<newname>:<replicas>` entries, and the invalid ones as written."""
    if text == "":
        return (), ()
    valid: list[ResourceRename] = []
    invalid: list[str] = []
    for entry in text.split(","):
        if _ENTRY_RE.match(entry) is None:
            invalid.append(entry)
            continue
        resource, new_name, replicas = entry.split(":")
        valid.append(ResourceRename(resource=resource, new_name=new_name, replicas=int(replicas)))
    return tuple(valid), tuple(invalid)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceConfig:
    """resourceConfig parsed once: the text as written, its valid entries and its invalid ones."""

    text: str = ""
    renames: tuple[ResourceRename, ...] = ()
    # Entries as written that are not <resource>:<newname>:<replicas> (problems name each).
    invalid: tuple[str, ...] = ()


def read_resource_config(text: str) -> ResourceConfig:
    """The resourceConfig string read into a `ResourceConfig`."""
    renames, invalid = parse_resource_config(text)
    return ResourceConfig(text=text, renames=renames, invalid=invalid)


def is_mig_resource(resource: str) -> bool:
    """A per-profile MIG resource name such as mig-3g.20gb (advertised with migStrategy mixed)."""
    return MIG_RESOURCE_RE.match(resource) is not None


def effective_renames(renames: tuple[ResourceRename, ...], mig_strategy: str) -> tuple[ResourceRename, ...]:
    """The entries that apply under `mig_strategy` (none | single | mixed).

    MIG devices are advertised per profile only with mixed; otherwise a `mig-*`
    entry matches nothing.  Entries naming a resource the plugin never advertises
    are left out too (`resource_config_problems` reports both).
    """
    return tuple(
        rename
        for rename in renames
        if rename.resource == GPU or (is_mig_resource(rename.resource) and mig_strategy == "mixed")
    )


def _why_malformed(entry: str) -> str:
    """What is wrong with one entry that does not match RESOURCE_CONFIG_ENTRY."""
    if entry == "":
        return "an empty entry (a stray comma)"
    if entry != entry.strip():
        return f"{entry!r} has spaces around it"
    parts = entry.split(":")
    if "mps" in parts:
        # NB: the seed's syntax has no way to say MPS: every shared entry is time-slicing.
        return (
            f"{entry!r} asks for MPS, which resourceConfig cannot say (its entries share by "
            "time-slicing); for MPS, put a plugin config with sharing.mps in a ConfigMap named by "
            "spec.devicePlugin.config.name"
        )
    if len(parts) != 3:
        return f"{entry!r} has {len(parts)} part(s); an entry is <resource>:<newname>:<replicas>"
    resource, new_name, replicas = parts
    for what, part in (("resource", resource), ("new name", new_name)):
        if _NAME_RE.match(part) is None:
            return (
                f"the {what} {part!r} in {entry!r} is not a lowercase name "
                "(a-z, 0-9, '.', '-', starting and ending with a letter or digit)"
            )
    if not replicas.isdigit() or replicas.startswith("0"):
        return f"the replicas {replicas!r} in {entry!r} is not a whole number >= 1"
    return f"{entry!r} is not of the form <resource>:<newname>:<replicas>"


def _name_problem(rename: ResourceRename) -> str | None:
    """Why the plugin or Kubernetes would refuse `nvidia.com/<new_name>`, or None."""
    qualified = f"{RESOURCE_PREFIX}/{rename.new_name}"
    if len(qualified) > MAX_QUALIFIED_LENGTH:
        limit = MAX_QUALIFIED_LENGTH
        return f"{qualified!r} has {len(qualified)} characters, the device plugin allows {limit}"
    if any(_DNS_LABEL_RE.match(label) is None for label in rename.new_name.split(".")):
        return (
            f"{rename.new_name!r} is not a DNS subdomain "
            "(each '.'-separated part starts and ends with a letter or digit)"
        )
    return None


def advertised_names(
    renames: tuple[ResourceRename, ...], mig_strategy: str
) -> dict[str, list[tuple[str, int]]]:
    """Each resource name the entries advertise, with what lands under it: (entry, replicas).

    Resources no entry renames keep their own name, unshared: they appear as
    ("<resource> not renamed", 1) where an entry's new name is such a resource, e.g. `gpu`.
    """
    applied = effective_renames(renames, mig_strategy)
    renamed = {rename.resource for rename in applied}
    names: dict[str, list[tuple[str, int]]] = {}
    for rename in applied:
        names.setdefault(rename.new_name, []).append((repr(rename.token), rename.replicas))
    for name, sources in names.items():
        keeps_own_name = name == GPU or (mig_strategy == "mixed" and is_mig_resource(name))
        if keeps_own_name and name not in renamed:
            # Devices nobody renamed are still advertised under this name, unshared.
            sources.append((f"{name} not renamed", 1))
    return names


def resource_config_problems(text: str, mig_strategy: str) -> Iterator[PolicyProblem]:
    """Every problem of a resourceConfig string under `mig_strategy` (a file's, a test's)."""
    return config_problems(read_resource_config(text), mig_strategy)


def config_problems(config: ResourceConfig, mig_strategy: str) -> Iterator[PolicyProblem]:
    """Every problem of a parsed resourceConfig under `mig_strategy`, each naming the entry at fault."""
    renames, invalid = config.renames, config.invalid
    for entry in invalid:
        # The plugin would refuse the whole configuration.
        yield PolicyProblem(field=FIELD, message=_why_malformed(entry), fix=_EXAMPLES)
    for rename in renames:
        if rename.resource != GPU and not is_mig_resource(rename.resource):
            # A typo: the plugin renames nothing and the admin's pods wait for a resource nobody has.
            yield PolicyProblem(
                field=FIELD,
                message=f"{rename.resource!r} in {rename.token!r} "
                "is not a resource the device plugin advertises",
                fix="rename gpu (full GPUs) or mig-<profile> such as mig-3g.20gb (with migStrategy mixed)",
            )
        elif is_mig_resource(rename.resource) and mig_strategy != "mixed":
            yield PolicyProblem(
                field=FIELD,
                message=f"{rename.token!r} has no effect: MIG devices are advertised per profile "
                f"only with migStrategy mixed (it is {mig_strategy})",
                fix="set spec.devicePlugin.migStrategy to mixed, or remove the entry",
                severity=Severity.WARNING,
            )
        problem = _name_problem(rename)
        if problem is not None:
            yield PolicyProblem(
                field=FIELD,
                message=f"the new name in {rename.token!r}: {problem}",
                fix="use lowercase letters, digits, '-' and '.', at most 52 characters, e.g. sharedgpu",
            )
    resources = [rename.resource for rename in renames]
    for resource in sorted({resource for resource in resources if resources.count(resource) > 1}):
        tokens = ", ".join(repr(rename.token) for rename in renames if rename.resource == resource)
        yield PolicyProblem(
            field=FIELD,
            message=f"{resource!r} is renamed more than once ({tokens})",
            fix=f"keep one entry for {resource!r}",
        )
    for name, sources in sorted(advertised_names(renames, mig_strategy).items()):
        counts = sorted({replicas for _, replicas in sources})
        if len(counts) > 1:
            # One resource name, devices shared at different levels: a request for one is ambiguous.
            yield PolicyProblem(
                field=FIELD,
                message=f"{RESOURCE_PREFIX}/{name} would hold devices shared "
                f"{' and '.join(str(count) for count in counts)} ways "
                f"({', '.join(f'{source}: {replicas}' for source, replicas in sources)})",
                fix=f"give everything advertised as {name!r} the same replicas, or use another new name",
            )

"""We test these aspects of the image/command contract (ocp_gpu/model/image_contracts.py):

- every golden policy (the operand and driver golden scenarios), rendered with the release's
  images, runs in each container only commands its image has (the executable, its subcommand,
  and in `sh -c` scripts each external command and the program it `exec`s), and sets only env
  vars and flags its program reads at the pinned version; what the admin wrote in the policy
  (`<component>.env`, `driver.args`) is the admin's, not checked;
- the checker fails on a planted wrong command, env var, flag and subcommand (so the pass above
  means something);
- our own image's contract (the validator's and node status exporter's) is read from our CLI;
- the table is what hack/gen_image_contracts.py rebuilds from the upstream sources (where the
  upstream repositories are mirrored on this machine).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ocp_gpu import cli
from ocp_gpu.model import image_contracts, images, operand_types, releases
from ocp_gpu.model.policy import policy_parser
from ocp_gpu.model.policy.policy_problems import PolicyProblem
from ocp_gpu.rendering.operands import operand_catalog, operand_common, operand_rendering
from tests.unit import test_driver_rendering, test_operand_rendering

ROOT = Path(__file__).resolve().parents[2]
# Bare clones of the upstream repositories (hack/gen_image_contracts.py's docstring says how).
MIRRORS = Path(os.environ.get("OCP_GPU_UPSTREAM", ROOT / ".cache" / "upstream"))
Contract = image_contracts.ImageContract
Program = image_contracts.Program

# Shell words that are not commands looked up on the PATH (builtins and keywords of sh/bash).
SHELL_BUILTINS = frozenset(
    {
        "until",
        "while",
        "do",
        "done",
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "for",
        "in",
        "case",
        "esac",
        "[",
        "[[",
        "]]",
        "]",
        "test",
        "echo",
        "set",
        ".",
        "source",
        "export",
        "exec",
        "true",
        "false",
        ":",
        "cd",
        "read",
        "exit",
        "return",
        "shift",
        "eval",
        "trap",
        "wait",
    }
)
# Set on containers for NVIDIA's container runtime (its hook reads them, not the program):
# NVIDIA/nvidia-container-toolkit@v1.20.0 internal/config/image/cuda_image.go and envvars.go.
RUNTIME_ENV = frozenset(
    # NB: NVIDIA_MIG_CONFIG_DEVICES lets a container (the DRA kubelet plugin) manage MIG devices.
    {
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "NVIDIA_DISABLE_REQUIRE",
        "NVIDIA_MIG_CONFIG_DEVICES",
    }
)
# The OpenShift Driver Toolkit image (openshift/driver-toolkit: RHEL with the kernel's build
# tools, bash and coreutils); the sidecar runs the driver image's entrypoint copied into the
# shared directory, so its programs are the driver image's.
DTK_REPOSITORY = "quay.io/openshift-release-dev/ocp-v4.0-art-dev"
SHARED_DTK_DIR = "/mnt/shared-nvidia-driver-toolkit/"
# Proxy variables the operator passes to the driver container (the cluster Proxy, DESIGN §3):
# read by the package manager and curl its scripts run, not by the scripts themselves.
PROXY_ENV = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"})
# Env the operator sets that no program of the pinned image reads, kept on purpose: (container,
# variable) -> why.  test_every_kept_unread_variable_is_still_set_and_unread fails on a stale row.
NVIDIA_DRIVER_POD = (
    "NVIDIA's driver pod sets it too (NVIDIA/gpu-operator@v26.7.0 assets/state-driver/0500_daemonset.yaml,"
    " controllers/object_controls.go HostRootEnvName); kept so our pod template stays NVIDIA's for takeover"
)
KEPT_UNREAD = {
    ("nvidia-driver-ctr", "NODE_NAME"): NVIDIA_DRIVER_POD,
    ("nvidia-driver-ctr", "NODE_IP"): NVIDIA_DRIVER_POD,
    ("nvidia-driver-ctr", "HOST_ROOT"): NVIDIA_DRIVER_POD,
    ("k8s-driver-manager", "HOST_ROOT"): NVIDIA_DRIVER_POD,
}
USED_KEPT_UNREAD: set[tuple[str, str]] = set()
# Images without a release default (the admin names them): no contract to check against.
UNPINNED = {
    "nvcr.io/nvidia/cloud-native/nvidia-fs": "GDS: spec.gds names the image (no release default)",
    "nvcr.io/nvidia/cloud-native/gdrdrv": "GDRCopy: spec.gdrcopy names the image (no release default)",
}


def _our_contract() -> Contract:
    """ocp-gpu's own image: `ocp-gpu` (its subcommands and flags from our parser) on UBI minimal."""
    flags: set[str] = {"version", "v", "verbose", "h", "help"}
    subcommands: set[str] = {"run", "demo", *cli.ADMIN_COMMANDS}
    for module, _ in cli.ADMIN_COMMANDS.values():
        sub = argparse.ArgumentParser()
        importlib.import_module(f"ocp_gpu.commands.{module}").add_arguments(sub)
        for action in sub._actions:
            flags.update(option.lstrip("-") for option in action.option_strings)
            # `validate driver|toolkit|cuda|plugin`: a positional's choices are subcommands too
            if not action.option_strings and action.choices:
                subcommands.update(str(choice) for choice in action.choices)
    source = "\n".join(path.read_text() for path in (ROOT / "ocp_gpu" / "commands").glob("*.py"))
    env = set(re.findall(r"""(?:env|environ)(?:\.get\(|\[)\s*["']([A-Z_][A-Z0-9_]*)["']""", source))
    program = Program(
        executable="ocp-gpu",
        alias_of="",
        flags=frozenset(flags),
        env=frozenset(env),
        subcommands=frozenset(subcommands),
        read_from=("ocp_gpu/cli.py", "ocp_gpu/commands/"),
    )
    return Contract(
        env="OPERATOR_IMAGE",
        source="this repository",
        commit="HEAD",
        note="our own image (Dockerfile)",
        dockerfile="Dockerfile",
        entrypoint=("ocp-gpu",),
        base=frozenset({"sh", "bash", "sleep", "echo", "cat", "ls", "test", "["}),
        base_note="UBI 9 minimal (bash, coreutils-single)",
        programs=(program,),
    )


def _dtk_contract() -> Contract:
    return Contract(
        env="(driver-toolkit ImageStream)",
        source="openshift/driver-toolkit",
        commit="",
        note="OpenShift's Driver Toolkit image for the node's RHCOS",
        dockerfile="",
        entrypoint=(),
        base=frozenset({"sh", "bash", "sleep", "echo", "cat", "ls", "test", "["}),
        base_note="RHEL with bash and coreutils",
        programs=(),
    )


def repository(image: str) -> str:
    reference = images.parse_reference(image)
    assert reference is not None, image
    return f"{reference.repository}/{reference.name}"


def contracts_by_repository() -> dict[str, Contract]:
    found = {
        repository(releases.RELEASE_IMAGES[env]): contract
        for env, contract in image_contracts.CONTRACTS.items()
    }
    found[repository(releases.OPERATOR_IMAGE)] = _our_contract()
    found[DTK_REPOSITORY] = _dtk_contract()
    return found


@dataclasses.dataclass(frozen=True)
class Admin:
    """What the admin wrote in the policy: env names and args, not ours to check."""

    env: frozenset[str] = frozenset()
    args: frozenset[str] = frozenset()


def admin_of(spec: Mapping[str, Any]) -> Admin:
    env: set[str] = set()
    args: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if key == "env" and isinstance(item, list):
                    env.update(entry["name"] for entry in item if isinstance(entry, Mapping))
                elif key == "args" and isinstance(item, list):
                    args.update(str(arg) for arg in item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(spec)
    return Admin(frozenset(env), frozenset(args))


def _script_commands(script: str) -> tuple[list[str], str | None, set[str]]:
    """(external commands, the program it execs, env vars it reads) of an `sh -c` script."""
    commands: list[str] = []
    target = None
    for part in re.split(r";|&&|\|\||\||\n|\bdo\b|\bthen\b|\belse\b", script):
        words = shlex.split(part, posix=True) if part.strip() else []
        while words and (words[0] in {"until", "while", "if", "!", "do", "then", "else"} or "=" in words[0]):
            words = words[1:]
        if not words:
            continue
        if words[0] == "exec" and len(words) > 1:
            target = words[1]
            commands.append(words[1])
        elif words[0] not in SHELL_BUILTINS:
            commands.append(words[0])
    return commands, target, set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", script))


def violations(
    container: Mapping[str, Any], contract: Contract, admin: Admin, driver: Contract
) -> Iterator[str]:
    """What the container asks of its image that the image does not provide."""
    name = container["name"]
    argv = [*(container.get("command") or contract.entrypoint), *(container.get("args") or [])]
    if not argv:
        yield f"{name}: no command and {contract.source} has no ENTRYPOINT"
        return
    env = {item["name"] for item in container.get("env") or ()}
    # $(VAR) in another variable, the command or the args: Kubernetes reads it (dependent env).
    expanded = set(re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", json.dumps([container.get("env"), argv])))
    kept = {variable for variable in env if (name, variable) in KEPT_UNREAD}
    USED_KEPT_UNREAD.update((name, variable) for variable in kept)
    env -= expanded | kept | PROXY_ENV
    read_by_script: set[str] = set()
    program: Program | None = None
    rest: list[str] = []
    executable = argv[0]
    if Path(executable).name in {"sh", "bash"} and len(argv) >= 3 and argv[1].lstrip("-").endswith("c"):
        if Path(executable).name not in contract.executables:
            yield f"{name}: runs {executable}, which {contract.source} does not have ({contract.base_note})"
        commands, target, read_by_script = _script_commands(argv[2])
        for command in commands:
            if command.startswith(SHARED_DTK_DIR):
                continue  # the driver image's entrypoint, copied there by the driver container
            if Path(command).name not in contract.executables:
                yield (
                    f"{name}: its script runs {command}, which {contract.source} does not have "
                    f"({contract.base_note})"
                )
            elif (run := contract.program(Path(command).name)) is not None:
                # A program the script runs inherits the env (the VFIO manager's vfio-manage: HOST_ROOT).
                read_by_script |= run.env
        if target is not None:
            owner = driver if target.startswith(SHARED_DTK_DIR) else contract
            program = owner.program(Path(target).name)
            words = shlex.split(argv[2][argv[2].rindex("exec " + target) :])[2:]
            rest = words
    else:
        if Path(executable).name not in contract.executables:
            yield f"{name}: runs {executable}, which {contract.source} does not have"
            return
        program = contract.program(Path(executable).name)
        rest = argv[1:]
    unchecked = env - RUNTIME_ENV - read_by_script - admin.env
    if program is None:
        if unchecked:
            yield f"{name}: sets {sorted(unchecked)}, read by nothing it runs"
        return
    cited = f"(read from {', '.join(program.read_from)})"
    positional = [arg for arg in rest if not arg.startswith("-")]
    first = positional[0] if positional else None
    if (
        program.subcommands
        and first is not None
        and first not in admin.args
        and first not in program.subcommands
    ):
        yield f"{name}: {program.executable} has no subcommand {first!r} ({sorted(program.subcommands)})"
    for arg in rest:
        if arg.startswith("-") and arg != "-" and arg not in admin.args:
            flag = arg.lstrip("-").split("=", 1)[0]
            if flag not in program.flags:
                yield f"{name}: {program.executable} reads no flag {arg!r} {cited}"
    for variable in sorted(unchecked):
        if variable not in program.env:
            yield f"{name}: {program.executable} reads no env var {variable} {cited}"


def pod_specs(manifests: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for manifest in manifests:
        if manifest.get("kind") in {"DaemonSet", "Deployment"}:
            yield manifest["metadata"]["name"], manifest["spec"]["template"]["spec"]


def check(manifests: list[dict[str, Any]], admin: Admin) -> list[str]:
    by_repository = contracts_by_repository()
    driver = image_contracts.CONTRACTS["DRIVER_IMAGE"]
    found = []
    for owner, spec in pod_specs(manifests):
        for container in [*(spec.get("initContainers") or ()), *spec["containers"]]:
            image = repository(container["image"])
            if image in UNPINNED:
                continue
            contract = by_repository.get(image)
            if contract is None:
                found.append(f"{owner}/{container['name']}: no contract for image {container['image']}")
                continue
            found += [f"{owner}/{line}" for line in violations(container, contract, admin, driver)]
    return found


def release_image(operand: operand_types.Operand) -> str:
    return releases.with_release_defaults({})[operand.image_env]


def render_operand(
    operand: operand_types.Operand, spec: dict[str, Any], openshift: bool
) -> list[dict[str, Any]]:
    policy = policy_parser.parse_policy(spec)
    env = releases.with_release_defaults({})
    manager_image = operand_rendering.driver_manager_image(operand, policy, env)
    assert not isinstance(manager_image, PolicyProblem), manager_image
    inputs = operand_common.OperandRenderInputs(
        "gpu-operator",
        openshift,
        images.ImageRef(release_image(operand)),
        wait_image=operand_rendering.wait_image(policy, env),
        driver_manager_image=manager_image,
    )
    return operand_rendering.render_operand(operand, policy, inputs)


OPERAND_SCENARIOS = test_operand_rendering.GOLDEN
DRIVER_SCENARIOS = test_driver_rendering.SCENARIOS


@pytest.mark.parametrize("scenario", sorted(OPERAND_SCENARIOS))
def test_every_operand_golden_policy_keeps_the_contract(scenario: str) -> None:
    operand, spec, openshift = OPERAND_SCENARIOS[scenario]
    assert check(render_operand(operand, spec, openshift), admin_of(spec)) == []


@pytest.mark.parametrize("scenario", sorted(DRIVER_SCENARIOS))
def test_every_driver_golden_policy_keeps_the_contract(scenario: str) -> None:
    desired, spec, inputs = DRIVER_SCENARIOS[scenario]
    assert check(test_driver_rendering.render(desired, spec, inputs), admin_of(spec)) == []


def _plugin() -> list[dict[str, Any]]:
    return render_operand(operand_catalog.DEVICE_PLUGIN, {}, True)


def _plugin_container(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    (daemonset,) = [m for m in manifests if m["kind"] == "DaemonSet"]
    return next(
        c for c in daemonset["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-device-plugin"
    )


@pytest.mark.parametrize(
    ("plant", "expected"),
    [
        (lambda c: c.update(command=["nvidia-device-plugn"]), "runs nvidia-device-plugn, which"),
        (
            lambda c: c["env"].append({"name": "MIG_STRATEGIE", "value": "single"}),
            "reads no env var MIG_STRATEGIE",
        ),
        (lambda c: c.update(args=["--mig-strategie=single"]), "reads no flag '--mig-strategie=single'"),
        (
            lambda c: c.update(command=["sh", "-c", "exec nvidia-device-plugin --fail-on-init-eror"]),
            "reads no flag",
        ),
        (
            lambda c: c.update(command=["sh", "-c", "curl -s x; exec nvidia-device-plugin"]),
            "its script runs curl",
        ),
    ],
)
def test_a_planted_wrong_command_env_or_flag_fails(plant: Any, expected: str) -> None:
    manifests = copy.deepcopy(_plugin())
    assert check(manifests, Admin()) == []
    plant(_plugin_container(manifests))
    found = check(manifests, Admin())
    assert any(expected in line for line in found), found


def test_a_planted_wrong_subcommand_and_validator_flag_fail() -> None:
    manifests = render_operand(operand_catalog.OPERATOR_VALIDATOR, {}, True)
    (daemonset,) = [m for m in manifests if m["kind"] == "DaemonSet"]
    init = daemonset["spec"]["template"]["spec"]["initContainers"][0]
    assert init["command"][:2] == ["ocp-gpu", "validate"] and check(manifests, Admin()) == []
    init["command"] = ["ocp-gpu", "validat", "driver"]
    assert any("no subcommand 'validat'" in line for line in check(manifests, Admin()))
    init["command"] = ["ocp-gpu", "validate", "driver", "--no-such-flag"]
    assert any("reads no flag '--no-such-flag'" in line for line in check(manifests, Admin()))


def test_every_kept_unread_variable_is_still_set_and_unread() -> None:
    USED_KEPT_UNREAD.clear()
    for operand, spec, openshift in OPERAND_SCENARIOS.values():
        check(render_operand(operand, spec, openshift), admin_of(spec))
    for desired, spec, inputs in DRIVER_SCENARIOS.values():
        check(test_driver_rendering.render(desired, spec, inputs), admin_of(spec))
    assert set(KEPT_UNREAD) == USED_KEPT_UNREAD
    programs = {
        "k8s-driver-manager": ("DRIVER_MANAGER_IMAGE", ("driver-manager",)),
        "nvidia-driver-ctr": ("DRIVER_IMAGE", ("nvidia-driver", "ocp_dtk_entrypoint")),
    }
    for container, variable in KEPT_UNREAD:
        image, names = programs[container]
        contract = image_contracts.CONTRACTS[image]
        for executable in names:
            # still unread by the program the container runs (else the row is not needed)
            program = contract.program(executable)
            assert program is not None and variable not in program.env, (container, variable, executable)


def test_the_validator_and_node_status_exporter_run_from_our_image() -> None:
    for operand in (operand_catalog.OPERATOR_VALIDATOR, operand_catalog.NODE_STATUS_EXPORTER):
        for _, spec in pod_specs(render_operand(operand, {}, True)):
            for container in [*(spec.get("initContainers") or ()), *spec["containers"]]:
                assert container["image"] == releases.OPERATOR_IMAGE, (operand.name, container["name"])


def test_every_row_cites_its_source() -> None:
    assert set(image_contracts.CONTRACTS) == set(releases.RELEASE_IMAGES)
    for contract in image_contracts.CONTRACTS.values():
        assert "@" in contract.source and len(contract.commit) == 40 and contract.note
        for program in contract.programs:
            assert program.alias_of or program.read_from or program.executable == "nvidia-ctk", program


@pytest.mark.skipif(
    not all(
        (MIRRORS / c.source.split("@")[0].replace("/", "+")).exists()
        for c in image_contracts.CONTRACTS.values()
    ),
    reason=f"no clones of the upstream repositories under {MIRRORS} (set OCP_GPU_UPSTREAM)",
)
def test_the_table_is_what_the_sources_give() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "gen_image_contracts.py"), "--mirrors", str(MIRRORS), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr

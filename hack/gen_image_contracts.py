#!/usr/bin/env python3
"""Rebuild the image/command contract (ocp_gpu/model/image_contracts.py) from upstream sources.

For each operand image of the release table (ocp_gpu/model/releases.py) this reads, at the
upstream tag the release pins, the image's Dockerfile (which executables its final stage
holds, and whether a shell with `sleep` is there) and each program's source (the flags and
environment variables it reads: urfave/cli `Name`/`Aliases`/`EnvVars`/`cli.EnvVars(...)`,
`os.Getenv`/`os.LookupEnv` in Go; TCLAP arguments in C++; `$VAR` references, `getopt`
options and the command `case` of shell entrypoints).  Every row names the repository,
tag and files it was read from.  tests/unit/test_image_contracts.py renders every golden
policy and checks each container against this table.

The sources are bare clones, one per repository, `<mirrors>/<owner>+<name>` (or
`<owner>+<name>/repo`), by default under the repository's git-ignored .cache/upstream
($OCP_GPU_UPSTREAM names another directory):

    for repo in k8s-device-plugin nvidia-container-toolkit dcgm-exporter mig-parted \
                k8s-driver-manager gpu-driver-container DCGM; do
        git clone --bare https://github.com/NVIDIA/$repo .cache/upstream/NVIDIA+$repo
    done
    .venv/bin/python hack/gen_image_contracts.py [--check]

Nothing upstream is copied into the repository: only names of executables, flags and
variables.  NB: extraction is by pattern, not by compiling: a flag built at run time from a
computed string is not seen (none of the pinned programs does that today).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "ocp_gpu" / "model" / "image_contracts.py"

# busybox's applets (what `busybox --install -s` links): the wait scripts need sh and sleep.
BUSYBOX = ("sh", "sleep", "echo", "cat", "ls", "test", "[", "env", "ln", "rm", "mkdir", "cp", "grep")
# A full UBI/Ubuntu base (coreutils, bash): the commands our scripts use are there.
FULL_BASE = (
    "sh",
    "bash",
    "sleep",
    "echo",
    "cat",
    "ls",
    "test",
    "[",
    "env",
    "ln",
    "rm",
    "mkdir",
    "cp",
    "grep",
)


@dataclasses.dataclass(frozen=True)
class ProgramSource:
    executable: str
    # Go/C++/shell files or directories (recursive, *_test.go left out) read for flags and env.
    paths: tuple[str, ...]
    kind: str = "go"  # go | cpp | shell
    # Another executable name for the same program (a symlink in the image).
    alias_of: str = ""
    # Programs it runs with its environment: their variables count as read (not their flags).
    env_paths: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ImageSource:
    env: str
    repo: str  # owner/name on GitHub
    ref: str  # the tag (or commit) the release pins
    note: str  # why this ref, when it is not the image's own tag
    dockerfile: str  # "" when the image's Dockerfile is not published
    # What the image's final stage holds besides the programs: a busybox or a full base.
    base: tuple[str, ...]
    base_note: str
    programs: tuple[ProgramSource, ...]


PLUGIN_PROGRAMS = (
    ProgramSource(
        "nvidia-device-plugin", ("cmd/nvidia-device-plugin", "api/config/v1/flags.go", "internal/flags")
    ),
    ProgramSource("config-manager", ("cmd/config-manager",)),
    ProgramSource(
        "gpu-feature-discovery", ("cmd/gpu-feature-discovery", "api/config/v1/flags.go", "internal/flags")
    ),
    ProgramSource(
        "mps-control-daemon", ("cmd/mps-control-daemon", "api/config/v1/flags.go", "internal/flags")
    ),
)
PLUGIN = dict(
    repo="NVIDIA/k8s-device-plugin",
    ref="v0.20.0",
    note="the image's tag",
    dockerfile="deployments/container/Dockerfile",
    base=BUSYBOX,
    base_note="distroless/go with a static busybox (sh and its applets) linked in",
    programs=PLUGIN_PROGRAMS,
)

SOURCES = (
    ImageSource(
        env="DRIVER_IMAGE",
        repo="NVIDIA/gpu-driver-container",
        ref="06a208ca9747c82b1ba99b76ecdcf2469b0a0207",
        note="main on 2026-08-17, the last commit before NVIDIA's v26.7.0 (the repository tags by date,"
        " none since 25.01.21); the rhel9 image, which RHCOS nodes run",
        dockerfile="rhel9/Dockerfile",
        base=FULL_BASE,
        base_note="UBI 9 (registry.access.redhat.com/ubi9/ubi)",
        programs=(
            ProgramSource("nvidia-driver", ("rhel9/nvidia-driver", "rhel9/common.sh"), kind="shell"),
            # NB: it runs `nvidia-driver build` in its own environment (and its copy in the DTK sidecar).
            ProgramSource(
                "ocp_dtk_entrypoint",
                ("rhel9/ocp_dtk_entrypoint", "rhel9/common.sh"),
                kind="shell",
                env_paths=("rhel9/nvidia-driver",),
            ),
        ),
    ),
    ImageSource(
        env="DRIVER_MANAGER_IMAGE",
        repo="NVIDIA/k8s-driver-manager",
        ref="v0.12.0",
        note="the image's tag",
        dockerfile="deployments/container/Dockerfile.distroless",
        base=BUSYBOX,
        base_note="distroless/cc with a static busybox linked in",
        programs=(
            ProgramSource("driver-manager", ("cmd/driver-manager",)),
            ProgramSource("vfio-manage", ("cmd/vfio-manage",)),
        ),
    ),
    # NVIDIA's VFIO manager runs the k8s-driver-manager image (the same digest as DRIVER_MANAGER_IMAGE).
    ImageSource(
        env="VFIO_MANAGER_IMAGE",
        repo="NVIDIA/k8s-driver-manager",
        ref="v0.12.0",
        note="the image's tag",
        dockerfile="deployments/container/Dockerfile.distroless",
        base=BUSYBOX,
        base_note="distroless/cc with a static busybox linked in",
        programs=(
            ProgramSource("driver-manager", ("cmd/driver-manager",)),
            ProgramSource("vfio-manage", ("cmd/vfio-manage",)),
        ),
    ),
    ImageSource(
        env="SANDBOX_DEVICE_PLUGIN_IMAGE",
        repo="NVIDIA/kubevirt-gpu-device-plugin",
        ref="v1.6.0",
        note="the image's tag",
        dockerfile="deployments/container/Dockerfile.distroless",
        base=(),
        base_note="distroless/go: no shell (its pods' waits run in the validator's image)",
        programs=(ProgramSource("nvidia-kubevirt-gpu-device-plugin", ("cmd", "pkg")),),
    ),
    ImageSource(
        env="VGPU_DEVICE_MANAGER_IMAGE",
        repo="NVIDIA/vgpu-device-manager",
        ref="v0.5.0",
        note="the image's tag",
        dockerfile="deployments/container/Dockerfile.distroless",
        base=BUSYBOX,
        base_note="distroless/go with a static busybox under /busybox",
        programs=(
            ProgramSource("nvidia-k8s-vgpu-dm", ("cmd/nvidia-k8s-vgpu-dm",)),
            ProgramSource("nvidia-vgpu-dm", ("cmd/nvidia-vgpu-dm",)),
        ),
    ),
    ImageSource(
        env="CONTAINER_TOOLKIT_IMAGE",
        repo="NVIDIA/nvidia-container-toolkit",
        ref="v1.20.0",
        note="the image's tag",
        dockerfile="deployments/container/Dockerfile",
        base=BUSYBOX,
        base_note="distroless/go with a static busybox linked in",
        programs=(
            ProgramSource("nvidia-ctk-installer", ("cmd/nvidia-ctk-installer",)),
            ProgramSource("nvidia-toolkit", (), alias_of="nvidia-ctk-installer"),
        ),
    ),
    ImageSource(env="DEVICE_PLUGIN_IMAGE", **PLUGIN),  # type: ignore[arg-type]
    ImageSource(env="GFD_IMAGE", **PLUGIN),  # type: ignore[arg-type]
    ImageSource(
        env="DCGM_IMAGE",
        repo="NVIDIA/DCGM",
        ref="v4.6.0",
        note="the image's DCGM version; NVIDIA does not publish the cloud-native/dcgm image's"
        " Dockerfile: nv-hostengine is DCGM's, installed by its packages on a UBI 10 base",
        dockerfile="",
        base=FULL_BASE,
        base_note="UBI 10 (the tag's -ubi10)",
        programs=(ProgramSource("nv-hostengine", ("hostengine/src/HostEngineCommandLine.cpp",), kind="cpp"),),
    ),
    ImageSource(
        env="DCGM_EXPORTER_IMAGE",
        repo="NVIDIA/dcgm-exporter",
        ref="4.5.3-4.8.2",
        note="the newest tag NVIDIA/dcgm-exporter had when read"
        " (4.6.0-4.8.3, the image's own, was not tagged yet)",
        dockerfile="docker/Dockerfile",
        base=("sh", "bash", "env", "lshw", "setcap", "ldconfig"),
        base_note="distroless/cc (the runtime-distroless stage) with sh, bash, env, lshw, setcap and"
        " ldconfig copied in: no sleep, no coreutils",
        programs=(
            ProgramSource("dcgm-exporter", ("cmd/dcgm-exporter", "pkg/cmd")),
            # NB: it only `exec /usr/bin/dcgm-exporter "$@"`: the exporter's flags and env.
            ProgramSource(
                "dcgm-exporter-entrypoint.sh",
                ("docker/dcgm-exporter-entrypoint.sh",),
                kind="shell",
                alias_of="dcgm-exporter",
            ),
        ),
    ),
    ImageSource(
        env="MIG_MANAGER_IMAGE",
        repo="NVIDIA/mig-parted",
        ref="v0.15.0",
        note="the image's tag",
        dockerfile="deployments/container/Dockerfile",
        base=BUSYBOX,
        base_note="distroless/go with a static busybox linked in",
        programs=(
            ProgramSource("nvidia-mig-manager", ("cmd/nvidia-mig-manager",)),
            ProgramSource("nvidia-mig-parted", ("cmd/nvidia-mig-parted",)),
            ProgramSource("nvidia-ctk", (), alias_of=""),
        ),
    ),
    ImageSource(
        env="DRA_DRIVER_IMAGE",
        repo="kubernetes-sigs/dra-driver-nvidia-gpu",
        # NB: NVIDIA's DRA driver moved from NVIDIA/k8s-dra-driver-gpu to kubernetes-sigs.
        ref="95932046683719c43b6a0dd9613c2e5aad5d6703",
        note="the image's tag v0.5.0 is not in the mirror: main at VERSION v0.5.0-dev, its newest source "
        "(the names read are the same at v0.4.1)",
        dockerfile="deployments/container/Dockerfile",
        base=BUSYBOX,
        base_note="distroless/cc:debug (busybox under /busybox) plus a static bash",
        programs=(
            ProgramSource("gpu-kubelet-plugin", ("cmd/gpu-kubelet-plugin", "pkg/flags")),
            # ComputeDomains (draDriver.computeDomains.enabled): the kubelet plugin's second
            # container and the controller Deployment.
            ProgramSource(
                "compute-domain-kubelet-plugin", ("cmd/compute-domain-kubelet-plugin", "pkg/flags")
            ),
            ProgramSource("compute-domain-controller", ("cmd/compute-domain-controller", "pkg/flags")),
        ),
    ),
)


class Mirror:
    def __init__(self, root: Path, repo: str, ref: str) -> None:
        self.git_dir = root / repo.replace("/", "+")
        if (self.git_dir / "repo").exists():
            self.git_dir = self.git_dir / "repo"
        if not self.git_dir.exists():
            raise SystemExit(f"gen_image_contracts: no mirror of {repo} at {self.git_dir}")
        self.commit = self._git("rev-parse", f"{ref}^{{commit}}").strip()

    def _git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(self.git_dir), *args], check=True, capture_output=True, text=True
        ).stdout

    def files(self, path: str) -> list[str]:
        listed = self._git("ls-tree", "-r", "--name-only", self.commit, "--", path).split()
        return [name for name in listed if not name.endswith("_test.go") and "/vendor/" not in name]

    def read(self, path: str) -> str:
        return self._git("show", f"{self.commit}:{path}")


def _strings(text: str) -> list[str]:
    return re.findall(r'"([^"]*)"', text)


def _blocks(text: str, opener: re.Pattern[str]) -> list[str]:
    """The brace-balanced bodies following each match of `opener` (which ends with `{`)."""
    bodies = []
    for match in opener.finditer(text):
        depth, start = 1, match.end()
        for index in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[index], 0)
            if depth == 0:
                bodies.append(text[start:index])
                break
    return bodies


FLAG_OPENER = re.compile(r"cli\.\w*Flag\s*\{")
COMMAND_OPENER = re.compile(r"cli\.Command\s*\{|Commands:\s*\[\]\*cli\.Command\s*\{\s*\{")


def read_go(text: str) -> tuple[set[str], set[str], set[str]]:
    """(flags, env, subcommands) a Go file declares through urfave/cli and os.Getenv."""
    flags: set[str] = set()
    env: set[str] = set()
    # Flag names are often Go constants (dcgm-exporter's `Name: CLIAddress`): resolve them.
    constants = dict(re.findall(r'^\s*(?:const\s+)?([A-Za-z_]\w*)\s*=\s*"([^"]*)"', text, re.M))
    for body in _blocks(text, FLAG_OPENER):
        name = re.search(r'\bName:\s*(?:"([^"]+)"|([A-Za-z_]\w*))', body)
        if name:
            flags.add(name[1] or constants.get(name[2], ""))
        for aliases in re.findall(r"Aliases:\s*\[\]string\s*\{([^}]*)\}", body):
            flags.update(_strings(aliases))
            words = re.findall(r"\b([A-Za-z_]\w*)\b", aliases)
            flags.update(constants[word] for word in words if word in constants)
        for names in re.findall(r"EnvVars:\s*\[\]string\s*\{([^}]*)\}", body):
            env.update(_strings(names))
        for names in re.findall(r"cli\.EnvVars\(([^)]*)\)", body):
            env.update(_strings(names))
    flags.discard("")
    env.update(re.findall(r'os\.(?:Getenv|LookupEnv)\(\s*"([A-Za-z_][A-Za-z0-9_]*)"', text))
    commands = set()
    for body in _blocks(text, COMMAND_OPENER):
        name = re.match(r'\s*Name:\s*"([^"]+)"', body)
        if name:
            commands.add(name[1])
    return flags, env, commands


def read_cpp(text: str) -> tuple[set[str], set[str], set[str]]:
    """(flags, env, subcommands) of TCLAP arguments: short and long names."""
    flags: set[str] = set()
    for short, long in re.findall(
        r'(?:SwitchArg|ValueArg<[^>]*>|OptionalValueArg<[^>]*>)\(\s*"([^"]*)",\s*"([^"]*)"', text
    ):
        flags.update(name for name in (short, long) if name)
    env = set(re.findall(r'getenv\(\s*"([A-Za-z_][A-Za-z0-9_]*)"', text))
    return flags, env, set()


def read_shell(text: str) -> tuple[set[str], set[str], set[str]]:
    """(flags, env, subcommands) of a shell entrypoint: getopt options, $VARs, the command case."""
    flags: set[str] = set()
    for longs, shorts in re.findall(r"getopt\s+-l\s+(\S+)\s+-o\s+(\S+)", text):
        flags.update(name.rstrip(":") for name in longs.split(",") if name)
        flags.update(letter for letter in shorts.replace(":", ""))
    env = set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", text))
    commands: set[str] = set()
    dispatch = re.search(r'case "\$\{?command\}?" in(.*?)esac', text, re.S)
    if dispatch:
        commands.update(label for label in re.findall(r"^\s*([a-z][\w-]*)\)", dispatch[1], re.M))
    return flags, env, commands


READERS = {"go": read_go, "cpp": read_cpp, "shell": read_shell}


def dockerfile_entrypoint(text: str) -> list[str]:
    """The last ENTRYPOINT of the Dockerfile (exec form, the executable by name); without one, the last
    CMD (what then runs when a container sets no command: the KubeVirt device plugin's); [] when none."""
    found = re.findall(r"^ENTRYPOINT\s+(\[.*\])\s*$", text, re.M) or re.findall(
        r"^CMD\s+(\[.*\])\s*$", text, re.M
    )
    if not found:
        return []
    # NB: the executable by name (each is on the image's PATH): the paths are the image's own.
    entry = list(json.loads(found[-1]))
    return [Path(entry[0]).name, *entry[1:]]


def dockerfile_executables(text: str) -> set[str]:
    """The executable names the Dockerfile's last stage copies or links in, and its ENTRYPOINT's."""
    last = text[text.rfind("\nFROM ") :] if "\nFROM " in text else text
    names: set[str] = set()
    for line in re.sub(r"\\\n", " ", last).splitlines():
        line = line.strip()
        if line.startswith("COPY "):
            parts = [part for part in line.split()[1:] if not part.startswith("--")]
            sources, destination = parts[:-1], parts[-1]
            if destination.endswith("/") or destination.endswith(("/bin", "/sbin", "/work")):
                names.update(Path(source).name for source in sources)
            else:
                names.add(Path(destination).name)
        for target in re.findall(r"ln -s\S*\s+\S+\s+(\S+)", line):
            names.add(Path(target.strip('"],')).name)
        if line.startswith("ENTRYPOINT "):
            entry = json.loads(line.removeprefix("ENTRYPOINT "))
            names.add(Path(entry[0]).name)
    return names


def build(mirrors: Path) -> list[dict[str, object]]:
    rows = []
    for image in SOURCES:
        mirror = Mirror(mirrors, image.repo, image.ref)
        dockerfile = mirror.read(image.dockerfile) if image.dockerfile else ""
        in_dockerfile = dockerfile_executables(dockerfile) if dockerfile else set()
        programs = []
        for program in image.programs:
            if image.dockerfile and program.executable not in in_dockerfile:
                raise SystemExit(
                    f"gen_image_contracts: {image.repo}@{image.ref} {image.dockerfile} does not install "
                    f"{program.executable}"
                )
            flags: set[str] = set()
            env: set[str] = set()
            commands: set[str] = set()
            files: list[str] = []
            texts = []
            for path in program.paths:
                for name in mirror.files(path):
                    if not name.endswith((".go", ".cpp", ".sh")) and program.kind != "shell":
                        continue
                    files.append(name)
                    texts.append(mirror.read(name))
            if texts and not program.alias_of:
                # NB: read as one text, so a constant declared in one file names a flag in another.
                flags, env, commands = READERS[program.kind]("\n".join(texts))
            for path in program.env_paths:
                files.append(path)
                env |= READERS[program.kind](mirror.read(path))[1]
            if program.paths and not files:
                raise SystemExit(
                    f"gen_image_contracts: nothing read for {program.executable} in {image.repo}"
                )
            programs.append(
                {
                    "executable": program.executable,
                    "alias_of": program.alias_of,
                    "flags": sorted(flags),
                    "env": sorted(env),
                    "subcommands": sorted(commands - {program.executable}),
                    "read_from": files,
                }
            )
        rows.append(
            {
                "env": image.env,
                "source": f"{image.repo}@{image.ref}",
                "commit": mirror.commit,
                "note": image.note,
                "dockerfile": image.dockerfile,
                "entrypoint": dockerfile_entrypoint(dockerfile),
                "base": sorted(image.base),
                "base_note": image.base_note,
                "programs": programs,
            }
        )
    return rows


def render(rows: list[dict[str, object]]) -> str:
    def literal(value: object) -> str:
        return json.dumps(value)

    out = [
        "# ruff: noqa: E501, SIM905  (generated data: long citations and each set of names on one line)\n",
        '"""The image/command contract: what each operand image provides, at the version the release pins.\n',
        "\n",
        "Generated by hack/gen_image_contracts.py from upstream sources (each row names the repository,\n",
        "the tag or commit and the files it was read from); do not edit by hand.  For each operand image\n",
        "(by the operator env var carrying it, model/releases.py): the executables on its PATH, and for\n",
        "each program the flags (without dashes), environment variables and subcommands it reads.\n",
        "tests/unit/test_image_contracts.py checks every rendered container against it.  Pure data.\n",
        '"""\n',
        "\n",
        "from __future__ import annotations\n",
        "\n",
        "import dataclasses\n",
        "from typing import Final\n",
        "\n",
        "\n",
        "@dataclasses.dataclass(frozen=True)\n",
        "class Program:\n",
        "    executable: str\n",
        "    # The program this name links to in the image (its flags and env are that program's).\n",
        "    alias_of: str\n",
        "    flags: frozenset[str]\n",
        "    env: frozenset[str]\n",
        "    subcommands: frozenset[str]\n",
        "    # The upstream files the flags, env and subcommands were read from.\n",
        "    read_from: tuple[str, ...]\n",
        "\n",
        "\n",
        "@dataclasses.dataclass(frozen=True)\n",
        "class ImageContract:\n",
        "    env: str\n",
        "    # owner/name@tag (or commit) the row was read from, and that ref's commit.\n",
        "    source: str\n",
        "    commit: str\n",
        "    note: str\n",
        "    dockerfile: str\n",
        "    # The image's ENTRYPOINT: what runs when a container sets no command.\n",
        "    entrypoint: tuple[str, ...]\n",
        "    # Executables of the base image (shell, coreutils) besides the programs.\n",
        "    base: frozenset[str]\n",
        "    base_note: str\n",
        "    programs: tuple[Program, ...]\n",
        "\n",
        "    def program(self, executable: str) -> Program | None:\n",
        "        found = next((p for p in self.programs if p.executable == executable), None)\n",
        "        if found is not None and found.alias_of:\n",
        "            return self.program(found.alias_of)\n",
        "        return found\n",
        "\n",
        "    @property\n",
        "    def executables(self) -> frozenset[str]:\n",
        "        return self.base | {p.executable for p in self.programs}\n",
        "\n",
        "\n",
    ]

    def image(row: dict[str, object]) -> str:
        """What makes the image: every field but the env var that names it."""
        return literal({key: value for key, value in row.items() if key != "env"})

    # One image under two env vars (the device plugin's image is also GFD's): its contract is
    # written once, as a constant, and the other env var's row is a copy with its own name.
    first: dict[str, str] = {}
    for row in rows:
        if sum(image(other) == image(row) for other in rows) > 1 and image(row) not in first:
            first[image(row)] = str(row["env"])

    def strings(value: object) -> str:
        """A set of names (no white space in any) as one line: `"a b c".split()`.

        NB: one line, not one a name: the lists overlap (two programs of an image read the same
        shell library), and a name a line repeated long runs of lines between rows."""
        names = list(value)  # type: ignore[call-overload]
        assert not any(" " in name for name in names), names
        return f"{literal(' '.join(names))}.split()" if names else ""

    def contract(row: dict[str, object]) -> list[str]:
        lines = ["ImageContract(\n"]
        for key in ("env", "source", "commit", "note", "dockerfile"):
            lines.append(f"    {key}={literal(row[key])},\n")
        lines.append(f"    entrypoint=tuple({literal(row['entrypoint'])}),\n")
        lines.append(f"    base=frozenset({strings(row['base'])}),\n")
        lines.append(f"    base_note={literal(row['base_note'])},\n")
        lines.append("    programs=(\n")
        for program in row["programs"]:  # type: ignore[attr-defined]
            lines.append("        Program(\n")
            lines.append(f"            executable={literal(program['executable'])},\n")
            lines.append(f"            alias_of={literal(program['alias_of'])},\n")
            for key in ("flags", "env", "subcommands"):
                lines.append(f"            {key}=frozenset({strings(program[key])}),\n")
            lines.append(f"            read_from=tuple({literal(program['read_from'])}),\n")
            lines.append("        ),\n")
        lines.append("    ),\n)")
        return lines

    for row in rows:
        if first.get(image(row)) == row["env"]:
            out.append(f"# The image behind more than one env var ({row['source']}).\n")
            out += [f"{row['env']}_CONTRACT: Final = ", *contract(row), "\n\n\n"]
    out.append("CONTRACTS: Final = {\n")
    for row in rows:
        owner = first.get(image(row))
        if owner == row["env"]:
            out.append(f"    {literal(row['env'])}: {owner}_CONTRACT,\n")
        elif owner:
            replaced = f"dataclasses.replace({owner}_CONTRACT, env={literal(row['env'])})"
            out.append(f"    {literal(row['env'])}: {replaced},\n")
        else:
            out += [f"    {literal(row['env'])}: ", *contract(row), ",\n"]
    out.append("}\n")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mirrors",
        type=Path,
        default=Path(os.environ.get("OCP_GPU_UPSTREAM", ROOT / ".cache" / "upstream")),
        help="the directory of bare clones (default: $OCP_GPU_UPSTREAM or .cache/upstream)",
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when the table is stale")
    args = parser.parse_args(argv)
    text = render(build(args.mirrors))
    # NB: the committed file is ruff-formatted; compare and write through the formatter.
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if TARGET.exists() and TARGET.read_text() == formatted:
        print(f"{TARGET.relative_to(ROOT)} is current")
        return 0
    if args.check:
        print(f"{TARGET.relative_to(ROOT)} is stale: run hack/gen_image_contracts.py", file=sys.stderr)
        return 1
    TARGET.write_text(formatted)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

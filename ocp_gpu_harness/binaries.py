"""Where the control plane binaries come from.

Order, per binary: ``$OCP_GPU_BIN_DIR``; ``$KUBEBUILDER_ASSETS`` (controller-runtime's
envtest layout: etcd and kube-apiserver, rarely the rest); the cache directory that
``hack/build-control-plane.sh`` builds into. When something is still missing,
`ensure_binaries` runs that script (a cold build takes 30-60 minutes on 2 cores).

The cache path formula and the pinned versions mirror the script; both read the same
environment overrides, so ``bash hack/build-control-plane.sh --print-dir`` and
`cache_bin_dir` always agree (a unit test can check that).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

# Pinned versions, each overridable exactly as in hack/build-control-plane.sh.
KUBE_VERSION = "v1.36.3"  # kube-apiserver, kube-controller-manager, kube-scheduler
ETCD_VERSION = "v3.6.16"  # etcd server
KWOK_VERSION = "v0.8.0"  # kwok (fake kubelets) and its stage files

# The binaries a LocalControlPlane starts (kwokctl is built too but not needed here).
BINARY_NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

# The build script copies kwok's kustomize/stage tree here, next to the binaries.
KWOK_STAGE_DIR_NAME = "kwok-stages"

# The kwok stage files the harness loads, relative to the stage tree.
# NB: kwok >= 0.8 has no built-in stages: without these, nodes never become Ready.
KWOK_STAGE_FILES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)

# Relative to the repository root.
BUILD_SCRIPT = Path("hack") / "build-control-plane.sh"


class BinariesMissingError(RuntimeError):
    """Some control plane binaries are neither given, cached nor buildable."""


@dataclass(frozen=True)
class ControlPlaneBinaries:
    """Absolute paths of the executables and of kwok's stage tree."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    kwok_stages: Path

    def stage_files(self) -> list[Path]:
        """The kwok stage files to pass with ``--config``, in `KWOK_STAGE_FILES` order."""
        return [self.kwok_stages / rel for rel in KWOK_STAGE_FILES]


def versions(env: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """(kube, etcd, kwok) versions after the script's env overrides."""
    env = os.environ if env is None else env
    return (
        env.get("OCP_GPU_KUBE_VERSION") or KUBE_VERSION,
        env.get("OCP_GPU_ETCD_VERSION") or ETCD_VERSION,
        env.get("OCP_GPU_KWOK_VERSION") or KWOK_VERSION,
    )


def cache_bin_dir(env: Mapping[str, str] | None = None) -> Path:
    """The directory the build script writes to (its ``BIN_DIR``), same formula."""
    env = os.environ if env is None else env
    if env.get("OCP_GPU_BIN_DIR"):
        return Path(env["OCP_GPU_BIN_DIR"])
    xdg = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    root = Path(env.get("OCP_GPU_CACHE") or Path(xdg) / "ocp-gpu")
    kube, etcd, kwok = versions(env)
    return root / "bin" / f"kube-{kube}_etcd-{etcd}_kwok-{kwok}"


def repo_root() -> Path:
    """The checkout this module lives in (ocp_gpu_harness/binaries.py -> repo)."""
    return Path(__file__).resolve().parents[1]


def candidate_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Directories searched for executables, first match wins per binary."""
    env = os.environ if env is None else env
    dirs: list[Path] = []
    for var in ("OCP_GPU_BIN_DIR", "KUBEBUILDER_ASSETS"):
        if env.get(var):
            dirs.append(Path(env[var]))
    dirs.append(cache_bin_dir(env))
    # Deduplicate while keeping the order (OCP_GPU_BIN_DIR is also the cache dir).
    return list(dict.fromkeys(dirs))


def _stage_dir_candidates(env: Mapping[str, str]) -> list[Path]:
    dirs = [d / KWOK_STAGE_DIR_NAME for d in candidate_dirs(env)]
    # kwok's own module in the Go module cache also holds the tree (HARNESS.md's
    # suggestion); found without running `go` so this stays cheap.
    gomodcache = env.get("GOMODCACHE") or str(
        Path(env.get("GOPATH") or Path(env.get("HOME") or Path.home()) / "go") / "pkg" / "mod"
    )
    dirs.append(Path(gomodcache) / "sigs.k8s.io" / f"kwok@{versions(env)[2]}" / "kustomize" / "stage")
    return dirs


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def locate(env: Mapping[str, str] | None = None) -> tuple[dict[str, Path], Path | None]:
    """Found executables by name, and the stage tree if one has every stage file."""
    env = os.environ if env is None else env
    found: dict[str, Path] = {}
    for name in BINARY_NAMES:
        for d in candidate_dirs(env):
            if _is_executable(d / name):
                found[name] = (d / name).resolve()
                break
    stages = next(
        (d.resolve() for d in _stage_dir_candidates(env) if all((d / f).is_file() for f in KWOK_STAGE_FILES)),
        None,
    )
    return found, stages


def missing(env: Mapping[str, str] | None = None) -> list[str]:
    """Names of what is not found yet (binaries, and ``kwok-stages``)."""
    found, stages = locate(env)
    gone = [n for n in BINARY_NAMES if n not in found]
    if stages is None:
        gone.append(KWOK_STAGE_DIR_NAME)
    return gone


def find_binaries(env: Mapping[str, str] | None = None) -> ControlPlaneBinaries:
    """The binaries if all are present; never builds. Raises `BinariesMissingError`."""
    found, stages = locate(env)
    gone = missing(env)
    if gone or stages is None:
        searched = ", ".join(str(d) for d in candidate_dirs(env))
        raise BinariesMissingError(f"control plane binaries missing: {', '.join(gone)} (searched {searched})")
    return ControlPlaneBinaries(
        etcd=found["etcd"],
        kube_apiserver=found["kube-apiserver"],
        kube_controller_manager=found["kube-controller-manager"],
        kube_scheduler=found["kube-scheduler"],
        kwok=found["kwok"],
        kwok_stages=stages,
    )


def _print_to_stderr(line: str) -> None:
    sys.stderr.write(line)
    sys.stderr.flush()


def ensure_binaries(
    progress: Callable[[str], None] = _print_to_stderr,
    env: Mapping[str, str] | None = None,
) -> ControlPlaneBinaries:
    """The binaries, building the missing ones with the hack script first.

    ``progress`` receives the script's output line by line (newline included) as it
    runs, so a 30-minute cold build is not silent.
    """
    env = dict(os.environ if env is None else env)
    if not missing(env):
        return find_binaries(env)
    script = repo_root() / BUILD_SCRIPT
    if not script.is_file():
        raise BinariesMissingError(
            f"control plane binaries missing ({', '.join(missing(env))}) and {script} is not there "
            "to build them; set OCP_GPU_BIN_DIR to a directory holding them"
        )
    progress(f"[ocp-gpu harness] missing {', '.join(missing(env))}: running {script} (cold: 30-60 min)\n")
    # The script writes progress to stderr and go's chatter to stdout: merge both.
    with subprocess.Popen(
        ["bash", str(script)],
        cwd=repo_root(),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    ) as proc:
        assert proc.stdout is not None  # for mypy: we asked for a pipe
        tail: list[str] = []
        for line in proc.stdout:
            progress(line)
            tail = [*tail[-29:], line]
        rc = proc.wait()
    if rc != 0:
        raise BinariesMissingError(
            f"{script} failed with exit code {rc}; last lines:\n{''.join(tail)}"
            "(needs the Go toolchain and a reachable Go module proxy; or set OCP_GPU_BIN_DIR)"
        )
    if missing(env):
        raise BinariesMissingError(
            f"{script} succeeded but {', '.join(missing(env))} still missing in {cache_bin_dir(env)}"
        )
    return find_binaries(env)


# --- helm: built on demand, only for the Helm chart's tests -------------------------------------

HELM_VERSION = "v3.21.4"  # helm.sh/helm/v3/cmd/helm (hack/build-helm.sh, same override)
NFD_VERSION = "v0.18.3"  # Node Feature Discovery, the chart's dependency (its chart, from its Go module)
HELM_BUILD_SCRIPT = Path("hack") / "build-helm.sh"


@dataclass(frozen=True)
class HelmTools:
    """helm, and the NFD chart `helm dependency update` would fetch for charts/ocp-gpu."""

    helm: Path
    nfd_chart: Path


def helm_dir(env: Mapping[str, str] | None = None) -> Path:
    """hack/build-helm.sh's HELM_DIR (same formula and overrides)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    root = Path(env.get("OCP_GPU_CACHE") or Path(xdg) / "ocp-gpu")
    return root / "bin" / f"helm-{env.get('OCP_GPU_HELM_VERSION') or HELM_VERSION}"


def find_helm(env: Mapping[str, str] | None = None) -> HelmTools | None:
    """The cached helm and NFD chart, or None when either is missing. ``$OCP_GPU_HELM`` names
    a helm binary of the user's own (the NFD chart still comes from the cache)."""
    env = os.environ if env is None else env
    directory = helm_dir(env)
    helm = Path(env["OCP_GPU_HELM"]) if env.get("OCP_GPU_HELM") else directory / "helm"
    nfd = directory / "charts" / f"node-feature-discovery-{env.get('OCP_GPU_NFD_VERSION') or NFD_VERSION}"
    if _is_executable(helm) and (nfd / "Chart.yaml").is_file():
        return HelmTools(helm=helm.resolve(), nfd_chart=nfd.resolve())
    return None


def ensure_helm(
    progress: Callable[[str], None] = _print_to_stderr, env: Mapping[str, str] | None = None
) -> HelmTools:
    """helm and the NFD chart, running hack/build-helm.sh first when missing (about 2.5 min on
    2 cores here, measured)."""
    env = dict(os.environ if env is None else env)
    found = find_helm(env)
    if found:
        return found
    script = repo_root() / HELM_BUILD_SCRIPT
    progress(f"[ocp-gpu harness] helm missing: running {script}\n")
    result = subprocess.run(
        ["bash", str(script)], cwd=repo_root(), env=env, capture_output=True, text=True, check=False
    )
    progress(result.stdout + result.stderr)
    found = find_helm(env)
    if result.returncode != 0 or found is None:
        raise BinariesMissingError(
            f"{script} failed (exit {result.returncode}); last lines:\n{result.stderr[-3000:]}"
            "(needs the Go toolchain and a reachable Go module proxy; or set OCP_GPU_HELM)"
        )
    return found

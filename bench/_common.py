"""Helpers the benchmarks share: logging, the machine and commit a number belongs to, where
the operator's code comes from, result files and tables.

NB: not a package (bench/ scripts are run by path); each script puts bench/ on sys.path
(``python bench/x.py`` does that itself) and imports ``_common``.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import platform
import signal
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ocp_gpu_harness import binaries

REPO: Final = Path(__file__).resolve().parents[1]
RESULTS_DIR: Final = REPO / "bench" / "results"


def log(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", flush=True)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def git_commit() -> str:
    """HEAD, plus "+dirty" when the operator's sources (ocp_gpu/, templates included) differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "ocp_gpu"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def machine() -> dict[str, Any]:
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    kube, etcd, kwok = binaries.versions()[:3]
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "kube": kube,
        "etcd": etcd,
        "kwok": kwok,
    }


@contextlib.contextmanager
def operator_sources(source: str) -> Iterator[tuple[Path, str]]:
    """Where the operator's code is imported from, and the commit that names it.

    ``head``: HEAD's committed ``ocp_gpu/`` and ``templates/``, extracted to a temp dir, so
    the numbers belong to a commit even while others edit the tree; ``tree``: the working
    tree. The operator runs with that directory as its working directory (``python -m``
    puts it first on sys.path, before the editable install).
    """
    if source == "tree":
        yield REPO, git_commit()
        return
    head = git_commit().removesuffix("+dirty")
    with tempfile.TemporaryDirectory(prefix="ocp-gpu-bench-src-") as tmp:
        archive = subprocess.run(
            # NB: the templates are beside the package (rendering/templating.py reads them there).
            ["git", "-C", str(REPO), "archive", "--format=tar", "HEAD", "ocp_gpu", "templates"],
            capture_output=True,
            timeout=60,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp), head


def write_result(results_dir: Path, name: str, result: Mapping[str, Any]) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


def print_table(title: str, rows: Sequence[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    print(flush=True)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_cleanly_on_signals() -> None:
    """SIGINT and SIGTERM raise, so every `finally` runs and no control plane or operator
    outlives the script.

    NB: a background job starts with SIGINT ignored, and SIGTERM would skip every
    `finally`."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)

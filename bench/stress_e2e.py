"""Issue 30: the end-to-end tests, N runs in a row, on a fresh clone, with CPU hogs taking cores.

A test that fails only when the machine is loaded is a test bug (or an operator bug): this finds
them. Each run runs the chosen e2e files either one after the other, each file as its own pytest
process (its own control plane, as a developer runs one file), or with `--workers N` all in one
pytest session shared by N xdist workers (`--dist worksteal`, as `hack/test.sh` and CI run them:
one control plane per worker, files side by side), under `timeout`; meanwhile `--hogs` busy loops
(default 1: one of the two cores) compete for the CPU and the load average is sampled.

Writes `bench/results/stress-e2e-<stamp>.json` and `.md`: per run and file the duration, counts
and load; every failure with its test id, its first line (the cause as pytest saw it) and where
the log is. The logs (the whole pytest output of each file) stay in `--logs` (a temp dir by
default: they are large), named in the report.

    .venv/bin/python bench/stress_e2e.py --runs 5                      # every tests/e2e file
    .venv/bin/python bench/stress_e2e.py --runs 2 --files test_drivers.py test_chaos.py
    .venv/bin/python bench/stress_e2e.py --runs 5 --workers 2              # as CI runs them
    .venv/bin/python bench/stress_e2e.py --runs 1 --venv new           # a venv of the clone's own

The clone: `git clone` of this repository's HEAD (committed work only: nothing untracked, no
caches, no generated leftovers) into a temp dir. Its code is what runs: the tests are run from the
clone with `PYTHONPATH=<clone>` (the operator and node agent processes inherit it), through this
checkout's venv by default (`--venv new`: the clone gets its own, `pip install -e .[dev]`, which
needs the package index and minutes). The control plane binaries come from the shared cache, as
in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common import REPO, RESULTS_DIR, git_commit, load_average, log, machine

E2E = Path("tests") / "e2e"
# A file that hangs is a failure too, not the end of the stress run: well above the slowest
# file's time on a loaded machine (test_chaos.py, minutes).
FILE_TIMEOUT_S = 45 * 60
# One session of every file: CI's run takes ~19 min idle with two workers; a hog halves the CPU.
SESSION_TIMEOUT_S = 90 * 60


@dataclass
class Failure:
    test: str
    kind: str  # failure | error | timeout (the whole file killed) | crash (no report)
    message: str
    log: str


@dataclass
class FileRun:
    run: int
    file: str
    seconds: float
    tests: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    exit_code: int | None = None
    load_1m: dict[str, float] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)


@contextlib.contextmanager
def cpu_hogs(count: int) -> Iterator[list[int]]:
    """`count` busy loops (one core each), killed by PID on the way out."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield [h.pid for h in hogs]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


class LoadSampler:
    """The 1-minute load average every 5 s while the `with` block runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(5):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float]:
        if not self.samples:
            return {}
        return {
            "min": round(min(self.samples), 2),
            "mean": round(statistics.fmean(self.samples), 2),
            "max": round(max(self.samples), 2),
        }


def fresh_clone(dest: Path) -> str:
    """A clone of HEAD (committed work only); returns its short commit."""
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(dest)], check=True, timeout=600)
    return subprocess.run(
        ["git", "-C", str(dest), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()


def clone_python(clone: Path, venv: str) -> Path:
    if venv != "new":
        return Path(venv) / "bin" / "python"
    log("creating the clone's venv (pip install -e .[dev]) ...")
    subprocess.run([sys.executable, "-m", "venv", str(clone / ".venv")], check=True, timeout=600)
    python = clone / ".venv" / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-e", ".[dev]"], cwd=clone, check=True, timeout=3600
    )
    return python


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:400]
    return ""


def read_junit(path: Path, result: FileRun, log_path: Path) -> None:
    suites = ElementTree.parse(path).getroot()
    for case in suites.iter("testcase"):
        result.tests += 1
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        for kind in ("failure", "error"):
            found = case.find(kind)
            if found is not None:
                # the exception's own line (`E   TypeError: ...`) says more than pytest's summary
                body = found.text or ""
                cause = next(
                    (line[1:].strip() for line in body.splitlines() if line.startswith("E ")),
                    found.get("message") or first_line(body),
                )
                result.failures.append(Failure(test, kind, cause[:600], str(log_path)))
                result.failed += 1
                break
        else:
            if case.find("skipped") is not None:
                result.skipped += 1
            else:
                result.passed += 1


def run_in_group(command: list[str], cwd: Path, env: dict[str, str], out: Any, limit: float) -> int | None:
    """Run `command` in a process group of its own; its exit code, or None when it outlasted
    `limit` (then, as on an interrupt of ours: SIGINT to the group so pytest tears its control
    plane down, SIGKILL to whatever is left a minute later)."""
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        return proc.wait(limit)
    except subprocess.TimeoutExpired:
        return None
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_pytest(
    clone: Path, python: Path, run: int, label: str, files: list[str], logs: Path, keyword: str, workers: int
) -> FileRun:
    """One pytest process over `files` (`workers` > 0: shared by that many xdist workers)."""
    stem = Path(label).stem
    junit = logs / f"run{run}-{stem}.xml"
    log_path = logs / f"run{run}-{stem}.log"
    env = {**os.environ, "PYTHONPATH": str(clone), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [
        str(python),
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-ra",
        f"--junitxml={junit}",
        *(str(E2E / test_file) for test_file in files),
    ]
    if workers:
        command += ["-n", str(workers), "--dist", "worksteal"]
    if keyword:
        command += ["-k", keyword]
    limit = SESSION_TIMEOUT_S if workers else FILE_TIMEOUT_S
    began = time.monotonic()
    with LoadSampler() as load, log_path.open("w") as out:
        code = run_in_group(command, clone, env, out, limit)
    result = FileRun(run, label, round(time.monotonic() - began, 1), exit_code=code, load_1m=load.summary())
    if junit.exists():
        read_junit(junit, result, log_path)
    if code is None:
        result.failures.append(Failure(label, "timeout", f"pytest killed after {limit} s", str(log_path)))
    elif code not in (0, 1) or (code == 1 and not result.failures):
        tail = log_path.read_text(errors="replace").splitlines()[-5:]
        result.failures.append(
            Failure(label, "crash", f"exit {code}: {' | '.join(tail)}"[:600], str(log_path))
        )
    return result


def report(path: Path, meta: dict[str, Any], results: list[FileRun]) -> None:
    runs = sorted({r.run for r in results})
    selected = f" (`-k {meta['keyword']}`)" if meta["keyword"] else ""
    how = (
        f"all in one pytest session, {meta['workers']} xdist workers"
        if meta.get("workers")
        else "each file its own pytest process"
    )
    lines = [
        f"# e2e stress: {meta['started']} (commit {meta['commit']})",
        "",
        f"{len(runs)} run(s) of {len(meta['files'])} file(s){selected}, {meta['hogs']} CPU hog(s) on "
        f"{meta['machine']['cpus']} cores; {how}; logs in `{meta['logs']}`",
        "",
        "| run | file | seconds | tests | passed | failed | skipped | load 1m min/mean/max |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        load = "/".join(str(r.load_1m.get(k, "")) for k in ("min", "mean", "max"))
        lines.append(
            f"| {r.run} | {r.file} | {r.seconds} | {r.tests} | {r.passed} | {r.failed} | {r.skipped} "
            f"| {load} |"
        )
    lines += ["", "## Runs", "", "| run | seconds | tests | failed |", "|---|---|---|---|"]
    for run in runs:
        mine = [r for r in results if r.run == run]
        lines.append(
            f"| {run} | {round(sum(r.seconds for r in mine), 1)} | {sum(r.tests for r in mine)} | "
            f"{sum(len(r.failures) for r in mine)} |"
        )
    failures = [(r.run, f) for r in results for f in r.failures]
    lines += ["", f"## Failures ({len(failures)})", ""]
    if not failures:
        lines.append("None.")
    for run, failure in failures:
        lines.append(
            f"- run {run}, {failure.kind}: `{failure.test}`: {failure.message} (log `{failure.log}`)"
        )
    path.write_text("\n".join(lines) + "\n")


def interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hogs", type=int, default=1, help="busy loops, one core each (default 1)")
    parser.add_argument("--files", nargs="*", help="files under tests/e2e (default: every test_*.py)")
    parser.add_argument("-k", dest="keyword", default="", help="pytest -k for every file")
    parser.add_argument(
        "--workers", type=int, default=0, help="one pytest session per run with N xdist workers (CI: 2)"
    )
    parser.add_argument("--venv", default=str(REPO / ".venv"), help="a venv to run with, or `new`")
    parser.add_argument("--logs", type=Path, help="where the pytest logs go (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--keep-clone", action="store_true")
    args = parser.parse_args()

    files = args.files or sorted(p.name for p in (REPO / E2E).glob("test_*.py"))
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    logs = args.logs or Path(tempfile.mkdtemp(prefix=f"stress-e2e-{stamp}-"))
    logs.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    clone = Path(tempfile.mkdtemp(prefix="ocp-gpu-clone-")) / "ocp-gpu"
    results: list[FileRun] = []
    meta: dict[str, Any] = {
        "started": stamp,
        "commit": "?",
        "source_commit": git_commit(),
        "files": files,
        "runs": args.runs,
        "hogs": args.hogs,
        "keyword": args.keyword,
        "workers": args.workers,
        "machine": machine(),
        "logs": str(logs),
        "load_before": load_average(),
    }
    out_json = args.out / f"stress-e2e-{stamp}.json"
    out_md = args.out / f"stress-e2e-{stamp}.md"
    # a SIGTERM (the caller's timeout) still writes the report and kills the hogs
    signal.signal(signal.SIGTERM, interrupted)
    try:
        meta["commit"] = fresh_clone(clone)
        log(f"clone of {meta['commit']} in {clone}; logs in {logs}")
        python = clone_python(clone, args.venv)
        with cpu_hogs(args.hogs) as hog_pids:
            log(f"{args.hogs} CPU hog(s): pids {hog_pids}")
            # per-file mode: one pytest per file; session mode: one pytest over them all
            batches = [(f"e2e-{args.workers}-workers", files)] if args.workers else [(f, [f]) for f in files]
            for run in range(1, args.runs + 1):
                for label, batch in batches:
                    log(f"run {run}/{args.runs}: {label} ...")
                    result = run_pytest(clone, python, run, label, batch, logs, args.keyword, args.workers)
                    results.append(result)
                    log(
                        f"run {run}: {label}: {result.passed} passed, {result.failed} failed, "
                        f"{result.skipped} skipped in {result.seconds} s (load {result.load_1m})"
                    )
                    for failure in result.failures:
                        log(f"  FAILED {failure.test}: {failure.message}")
                    meta["finished"] = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
                    out_json.write_text(
                        json.dumps({**meta, "results": [asdict(r) for r in results]}, indent=2) + "\n"
                    )
                    report(out_md, meta, results)
    except KeyboardInterrupt:
        log("interrupted: the report holds what ran")
    finally:
        if not args.keep_clone:
            shutil.rmtree(clone.parent, ignore_errors=True)
    meta["finished"] = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_json.write_text(json.dumps({**meta, "results": [asdict(r) for r in results]}, indent=2) + "\n")
    report(out_md, meta, results)
    failed = sum(len(r.failures) for r in results)
    log(f"{len(results)} file runs, {failed} failure(s): {out_md}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

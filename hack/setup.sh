#!/usr/bin/env bash
# Sets up everything a fresh machine needs: the Python venv with ocp-gpu and its
# dev tools (./.venv), and the local control plane binaries (built from Go
# modules into ~/.cache/ocp-gpu, skipped when present).  Idempotent and quick
# when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*" >&2; }

PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null || { say "ERROR: $PY not found; install Python >= 3.11"; exit 1; }
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { say "ERROR: Python >= 3.11 required, found $("$PY" --version)"; exit 1; }

if [[ ! -x .venv/bin/python ]]; then
  say "creating .venv"
  "$PY" -m venv .venv
fi
stamp=".venv/.ocp-gpu-installed"
want="$(sha256sum pyproject.toml | cut -c1-16)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  say "installing ocp-gpu and dev tools into .venv"
  .venv/bin/pip install --quiet --upgrade pip >/dev/null
  .venv/bin/pip install --quiet -e '.[dev]'
  echo "$want" >"$stamp"
else
  say ".venv is up to date"
fi
# The test rig (ocp_gpu_harness/: local control plane, simulations, the demo) is not part of the
# wheel; the checkout on the venv's path makes it importable for the demo, tests, bench/ and hack/.
site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
[[ "$(cat "$site/ocp-gpu-checkout.pth" 2>/dev/null)" == "$PWD" ]] || echo "$PWD" >"$site/ocp-gpu-checkout.pth"

if [[ "${OCP_GPU_SKIP_E2E:-0}" != "1" ]]; then
  bash hack/build-control-plane.sh
fi

#!/usr/bin/env bash
# Sets up what is missing, then runs every test: pure unit tests, golden render
# tests and end-to-end tests on the local control plane.  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/setup.sh
exec .venv/bin/pytest "$@"

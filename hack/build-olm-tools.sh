#!/usr/bin/env bash
# Builds the OLM bundle and catalog tools from published Go modules into a cache outside
# the repository (skipped when present):
#   opm             github.com/operator-framework/operator-registry/cmd/opm (`opm validate`, `opm serve`)
#   validate-bundle hack/validate-bundle: the validators of
#                   `operator-sdk bundle validate --select-optional suite=operatorframework`
#                   (operator-sdk is not served by the module proxy here; its validators are)
# Only the tests that use them (tests/olm/) call this script, so a machine that never runs
# them never builds them.
#
# Usage: hack/build-olm-tools.sh [--print-dir]
set -euo pipefail
cd "$(dirname "$0")/.."

OPM_VERSION="${OCP_GPU_OPM_VERSION:-v1.73.0}"
API_VERSION="v0.45.0"  # must match hack/validate-bundle/go.mod
CACHE_ROOT="${OCP_GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ocp-gpu}"
BIN_DIR="${OCP_GPU_OLM_TOOLS_DIR:-$CACHE_ROOT/bin/olm-tools_opm-${OPM_VERSION}_api-${API_VERSION}}"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$BIN_DIR"
  exit 0
fi

say() { printf '[build-olm-tools] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "the Go toolchain is not on PATH; install Go >= 1.25"
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=mod"
mkdir -p "$BIN_DIR"
WORK="$CACHE_ROOT/src"
mkdir -p "$WORK"

build_opm() {
  if [[ -x "$BIN_DIR/opm" ]]; then say "opm $OPM_VERSION: cached"; return; fi
  say "building opm $OPM_VERSION (wrapper module; 6-23 minutes cold on 2 cores, see docs/testing.md)"
  local dir="$WORK/opm-$OPM_VERSION" start=$SECONDS
  mkdir -p "$dir"
  # NB: `go install …/cmd/opm@v` fails here: it asks the proxy for the module's version
  # list (deprecation check), which the proxy refuses (403); a wrapper module does not.
  cat >"$dir/go.mod" <<GOMOD
module ocpgpu.local/opm

go 1.25

require github.com/operator-framework/operator-registry $OPM_VERSION
GOMOD
  # json1: opm's sqlite support needs cgo; containers_image_openpgp avoids gpgme (as upstream builds it).
  (cd "$dir" && CGO_ENABLED=1 go build -trimpath -ldflags "-s -w" -tags=json1,containers_image_openpgp \
    -o "$BIN_DIR/opm.tmp" github.com/operator-framework/operator-registry/cmd/opm)
  mv "$BIN_DIR/opm.tmp" "$BIN_DIR/opm"
  say "opm built in $((SECONDS - start))s"
}

build_validator() {
  if [[ -x "$BIN_DIR/validate-bundle" ]] && cmp -s hack/validate-bundle/main.go "$BIN_DIR/validate-bundle.main.go"; then
    say "validate-bundle: cached"
    return
  fi
  say "building validate-bundle (operator-framework/api $API_VERSION)"
  local dir="$WORK/validate-bundle" start=$SECONDS
  rm -rf "$dir" && mkdir -p "$dir"
  cp hack/validate-bundle/go.mod hack/validate-bundle/main.go "$dir/"
  (cd "$dir" && go mod tidy && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/validate-bundle" .)
  cp hack/validate-bundle/main.go "$BIN_DIR/validate-bundle.main.go"
  say "validate-bundle built in $((SECONDS - start))s"
}

build_opm
build_validator

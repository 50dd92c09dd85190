#!/usr/bin/env bash
# Builds Operator Lifecycle Manager's two controllers, `olm` and `catalog`, from a
# checkout or snapshot of github.com/operator-framework/operator-lifecycle-manager, with
# its vendored dependencies (-mod=vendor).  OLM's module is not served by the Go module
# proxy here (403), but its repository vendors everything it needs.  The source stays
# outside this repository and is never committed; the binaries go to the cache.
#
# Source: $OCP_GPU_OLM_SRC if set, else .cache/operator-lifecycle-manager in this
# repository (git-ignored); either a directory with go.mod or a git directory, bare or not.
# To get it (docs/testing.md, "Running the tests", says the same):
#   git clone https://github.com/operator-framework/operator-lifecycle-manager \
#     .cache/operator-lifecycle-manager
# The end-to-end test tests/olm/test_olm_install.py skips, saying so, when there is none.
#
# Usage: hack/build-olm.sh [--print-dir|--print-src]
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[build-olm] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

SRC="${OCP_GPU_OLM_SRC:-$PWD/.cache/operator-lifecycle-manager}"
CACHE_ROOT="${OCP_GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ocp-gpu}"

# The source's identity names the cache directory (a rebuilt snapshot gets its own).
if [[ -f "$SRC/go.mod" && ! -d "$SRC/objects" ]]; then
  kind=tree
  rev="$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo local)"
elif [[ -d "$SRC/objects" || -d "$SRC/.git" ]]; then
  kind=git
  rev="$(git --git-dir="$([[ -d "$SRC/.git" ]] && echo "$SRC/.git" || echo "$SRC")" rev-parse HEAD)"
else
  kind=none
  rev=none
fi
BIN_DIR="$CACHE_ROOT/bin/olm-${rev:0:12}"

case "${1:-}" in
  --print-dir) echo "$BIN_DIR"; exit 0 ;;
  --print-src) [[ "$kind" != none ]] && echo "$SRC"; exit 0 ;;
esac

[[ "$kind" != none ]] || die "no OLM source at $SRC: clone operator-framework/operator-lifecycle-manager there, or set OCP_GPU_OLM_SRC to a checkout of it"
command -v go >/dev/null 2>&1 || die "the Go toolchain is not on PATH"
if [[ -x "$BIN_DIR/olm" && -x "$BIN_DIR/catalog" && -d "$BIN_DIR/crds" ]]; then
  say "olm, catalog ${rev:0:12}: cached in $BIN_DIR"
  exit 0
fi

mkdir -p "$BIN_DIR"
if [[ "$kind" == git ]]; then
  WORK="$CACHE_ROOT/src/olm-${rev:0:12}"
  if [[ ! -f "$WORK/go.mod" ]]; then
    say "extracting the snapshot ${rev:0:12} to $WORK"
    mkdir -p "$WORK"
    gitdir="$([[ -d "$SRC/.git" ]] && echo "$SRC/.git" || echo "$SRC")"
    # NB: a snapshot may lack its largest blobs (vendored sqlite3-binding.c here, which a
    # CGO_ENABLED=0 build never compiles): leave those out instead of failing the archive.
    mapfile -t absent < <(git --git-dir="$gitdir" ls-tree -r HEAD \
      | awk '{print $3" "$4}' \
      | while read -r object path; do
          if ! git --git-dir="$gitdir" cat-file -e "$object" 2>/dev/null; then echo ":(exclude)$path"; fi
        done)
    ((${#absent[@]} == 0)) || say "left out, absent from the snapshot: ${absent[*]}"
    git --git-dir="$gitdir" archive --format=tar HEAD -- . "${absent[@]}" | tar -x -C "$WORK"
  fi
else
  WORK="$SRC"
fi

export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=vendor" CGO_ENABLED=0
start=$SECONDS
for cmd in olm catalog; do
  say "building $cmd (-mod=vendor)"
  (cd "$WORK" && go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/$cmd.tmp" "./cmd/$cmd")
  mv "$BIN_DIR/$cmd.tmp" "$BIN_DIR/$cmd"
done
# OLM's own CRDs (Subscription, InstallPlan, CSV, CatalogSource, OperatorGroup, ...) as
# the same revision ships them.
mkdir -p "$BIN_DIR/crds"
cp "$WORK"/deploy/chart/crds/*.yaml "$BIN_DIR/crds/"
say "built olm and catalog in $((SECONDS - start))s into $BIN_DIR"

#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, kwokctl) from published Go modules into a cache outside
# the repository.  Skips every binary that is already there.
#
# Why from Go modules: this project's machines reach the Go module proxy but not
# the release download sites, so building is the one offline way to a real
# Kubernetes control plane.  A user who already has the binaries can point
# OCP_GPU_BIN_DIR (or KUBEBUILDER_ASSETS, for apiserver and etcd) at them.
#
# Usage: hack/build-control-plane.sh [--print-dir]
set -euo pipefail

KUBE_VERSION="${OCP_GPU_KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${OCP_GPU_ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${OCP_GPU_KWOK_VERSION:-v0.8.0}"
CACHE_ROOT="${OCP_GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ocp-gpu}"
BIN_DIR="${OCP_GPU_BIN_DIR:-$CACHE_ROOT/bin/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}}"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$BIN_DIR"
  exit 0
fi

say() { printf '[build-control-plane] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

command -v go >/dev/null 2>&1 || die "the Go toolchain is not on PATH; install Go >= 1.25 (https://go.dev/dl or your distribution's golang package)"
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=mod" CGO_ENABLED=0
mkdir -p "$BIN_DIR"
WORK="$CACHE_ROOT/src"
mkdir -p "$WORK"

have() { [[ -x "$BIN_DIR/$1" ]]; }

probe_proxy() {
  go list -m -versions sigs.k8s.io/kwok >/dev/null 2>&1 \
    || die "cannot reach the Go module proxy ($(go env GOPROXY)); set GOPROXY to a reachable proxy"
}

build_kwok() {
  if have kwok && have kwokctl; then say "kwok, kwokctl $KWOK_VERSION: cached"; return; fi
  say "building kwok, kwokctl $KWOK_VERSION (go install)"
  GOBIN="$BIN_DIR" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
  # kwok >= 0.8 ships no built-in stages; keep its stage files next to the binaries.
  local moddir
  moddir="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION"
  mkdir -p "$BIN_DIR/kwok-stages"
  cp -r "$moddir/kustomize/stage/." "$BIN_DIR/kwok-stages/"
  chmod -R u+w "$BIN_DIR/kwok-stages"
}

build_etcd() {
  if have etcd; then say "etcd $ETCD_VERSION: cached"; return; fi
  say "building etcd $ETCD_VERSION (wrapper module; etcd's go.mod has local replaces)"
  local dir="$WORK/etcd-$ETCD_VERSION"
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<GOMOD
module ocpgpu.local/etcd

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
  cat >"$dir/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$dir" && go mod tidy && go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/etcd" .)
}

build_kube() {
  if have kube-apiserver && have kube-controller-manager && have kube-scheduler; then
    say "kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION: cached"; return
  fi
  say "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION (wrapper module)"
  local dir="$WORK/kube-$KUBE_VERSION"
  mkdir -p "$dir"
  local info gomod staging
  info="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION")"
  gomod="$(printf '%s' "$info" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$KUBE_VERSION's go.mod"
  staging="v0.${KUBE_VERSION#v1.}"
  {
    echo "module ocpgpu.local/kube"
    echo
    sed -n 's/^go \(.*\)$/go \1/p' "$gomod" | head -1
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    # Every staging module that kubernetes replaces with ./staging/... is
    # replaced here with its published release of the same minor.
    echo "replace ("
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" \
      | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$dir/go.mod"
  say "  $(grep -c ' => ' "$dir/go.mod") staging modules replaced with $staging"
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "$dir" \
    && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR/" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler)
}

start=$(date +%s)
probe_proxy
build_kwok
build_etcd
build_kube
say "done in $(( $(date +%s) - start ))s: $BIN_DIR"
ls -1 "$BIN_DIR" >&2

#!/usr/bin/env bash
# Builds helm from its published Go module into the binary cache, next to (not
# inside) the control plane binaries.  Only the Helm tests need it, so it is
# built on demand (ocp_gpu_harness/binaries.py's ensure_helm runs this script
# when a collected test uses the `helm` fixture), never by hack/setup.sh.
#
# Why the ldflags: `go install` leaves helm's idea of the Kubernetes version at
# its compiled-in default (v1.20), which charts with a kubeVersion constraint and
# `helm lint` then check against; helm's own Makefile sets these variables from
# its client-go version, and so do we.  The version string is set so that
# `helm version` names the release it is.
#
# It also puts Node Feature Discovery's Helm chart beside helm: the chart's declared
# dependency, which `helm dependency update` would fetch from NFD's chart repository (not
# reachable here).  NFD's Go module (sigs.k8s.io/node-feature-discovery, served by the
# module proxy) carries the same chart source under deployment/helm/, as kwok's module
# carries the stage files the harness reads (see build-control-plane.sh).
#
# Usage: hack/build-helm.sh [--print-path]
set -euo pipefail

HELM_VERSION="${OCP_GPU_HELM_VERSION:-v3.21.4}"
NFD_VERSION="${OCP_GPU_NFD_VERSION:-v0.18.3}"
CACHE_ROOT="${OCP_GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ocp-gpu}"
HELM_DIR="$CACHE_ROOT/bin/helm-$HELM_VERSION"
NFD_CHART="$HELM_DIR/charts/node-feature-discovery-$NFD_VERSION"

if [[ "${1:-}" == "--print-path" ]]; then
  echo "$HELM_DIR/helm"
  exit 0
fi

say() { printf '[build-helm] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

if [[ -x "$HELM_DIR/helm" && -f "$NFD_CHART/Chart.yaml" ]]; then say "helm $HELM_VERSION, NFD chart $NFD_VERSION: cached"; exit 0; fi
command -v go >/dev/null 2>&1 || die "the Go toolchain is not on PATH; install Go >= 1.26 (helm $HELM_VERSION needs it)"
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=mod" CGO_ENABLED=0

if [[ ! -f "$NFD_CHART/Chart.yaml" ]]; then
  say "fetching Node Feature Discovery $NFD_VERSION's chart (its Go module)"
  nfd_dir="$(go mod download -json "sigs.k8s.io/node-feature-discovery@$NFD_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  [[ -f "$nfd_dir/deployment/helm/node-feature-discovery/Chart.yaml" ]] \
    || die "sigs.k8s.io/node-feature-discovery@$NFD_VERSION has no deployment/helm/node-feature-discovery"
  mkdir -p "$(dirname "$NFD_CHART")"
  rm -rf "$NFD_CHART.tmp" && cp -r "$nfd_dir/deployment/helm/node-feature-discovery" "$NFD_CHART.tmp"
  chmod -R u+w "$NFD_CHART.tmp" && mv "$NFD_CHART.tmp" "$NFD_CHART"
fi
if [[ -x "$HELM_DIR/helm" ]]; then say "helm $HELM_VERSION: cached"; exit 0; fi

start=$(date +%s)
info="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION")" \
  || die "cannot download helm.sh/helm/v3@$HELM_VERSION from the Go module proxy ($(go env GOPROXY))"
gomod="$(printf '%s' "$info" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
# client-go v0.X.Y is Kubernetes 1.X: helm's Makefile derives its default the same way.
client_go="$(sed -n 's/^\s*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod" | head -1)"
[[ -n "$client_go" ]] || die "could not read helm's client-go version from $gomod"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$client_go"
done
say "building helm $HELM_VERSION (go install; default Kubernetes 1.$client_go)"
mkdir -p "$HELM_DIR"
GOBIN="$HELM_DIR" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
say "done in $(( $(date +%s) - start ))s: $HELM_DIR/helm"

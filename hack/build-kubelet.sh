#!/usr/bin/env bash
# Builds the kubelet of the local control plane's real node (ocp_gpu_harness/real_node.py) from
# published Go modules into the cache, like hack/build-control-plane.sh builds the rest (the same
# wrapper module: k8s.io/kubernetes's go.mod replaces its staging modules with local paths).
# Skips when present.  Also installs the Debian packages the real node runs with.
#
# Usage: hack/build-kubelet.sh [--print-path]
set -euo pipefail

KUBE_VERSION="${OCP_GPU_KUBE_VERSION:-v1.36.3}"
CACHE_ROOT="${OCP_GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ocp-gpu}"
KUBELET="${OCP_GPU_KUBELET:-$CACHE_ROOT/bin/kubelet-$KUBE_VERSION/kubelet}"

if [[ "${1:-}" == "--print-path" ]]; then
  echo "$KUBELET"
  exit 0
fi

say() { printf '[build-kubelet] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

if [[ "$(id -u)" == 0 ]]; then
  missing=()
  for tool in containerd runc ctr umoci gcc; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  [[ -x /usr/lib/cni/bridge ]] || missing+=(cni)
  if ((${#missing[@]})); then
    say "installing Debian's containerd runc containernetworking-plugins umoci gcc libc6-dev (missing: ${missing[*]})"
    apt-get install -y -q containerd runc containernetworking-plugins umoci gcc libc6-dev >/dev/null \
      || die "apt-get install failed (run apt-get update first?)"
  fi
fi

if [[ -x "$KUBELET" ]]; then say "kubelet $KUBE_VERSION: cached"; exit 0; fi
command -v go >/dev/null 2>&1 || die "the Go toolchain is not on PATH"
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=mod" CGO_ENABLED=0
start=$(date +%s)
dir="$CACHE_ROOT/src/kubelet-$KUBE_VERSION"
mkdir -p "$dir" "$(dirname "$KUBELET")"
info="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION")"
gomod="$(printf '%s' "$info" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
[[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$KUBE_VERSION's go.mod"
staging="v0.${KUBE_VERSION#v1.}"
{
  echo "module ocpgpu.local/kubelet"
  echo
  sed -n 's/^go \(.*\)$/go \1/p' "$gomod" | head -1
  echo
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  echo
  echo "replace ("
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} >"$dir/go.mod"
printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kubelet"\n' >"$dir/tools.go"
minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
say "building kubelet $KUBE_VERSION (wrapper module)"
(cd "$dir" && { go mod tidy -e >/dev/null 2>&1 || true; } \
  && go build -trimpath -ldflags "$ldflags" -o "$KUBELET" k8s.io/kubernetes/cmd/kubelet)
say "done in $(( $(date +%s) - start ))s: $KUBELET"

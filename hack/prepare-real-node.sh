#!/usr/bin/env bash
# Prepares what the local control plane's real node needs (tests/e2e/test_real_node.py,
# ocp_gpu_harness/real_node.py), where the machine allows it (root, cgroups): Debian's containerd,
# runc, CNI plugins and umoci, the kubelet built from Go modules (hack/build-kubelet.sh), and
# ocp-gpu's image of this checkout (hack/build-image.sh) in the cache, rebuilt when the sources it
# is made of changed.  Elsewhere it says why and does nothing: the tests then skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[prepare-real-node] %s\n' "$*" >&2; }

[[ "$(id -u)" == 0 ]] || { say "not root: no real node here"; exit 0; }
[[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || { say "no cgroups: no real node here"; exit 0; }
start=$(date +%s)
bash hack/build-kubelet.sh
CACHE_ROOT="${OCP_GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ocp-gpu}"
OUT="${OCP_GPU_IMAGE_LAYOUT:+$(dirname "$OCP_GPU_IMAGE_LAYOUT")}"
OUT="${OUT:-$CACHE_ROOT/image}"
# The image holds the wheel of this checkout (ocp_gpu/ and templates/, setup.py ships the latter):
# its sources and the build script make the stamp.
want="$(cat pyproject.toml setup.py hack/build-image.sh $(find ocp_gpu templates -type f ! -name '*.pyc' | sort) | sha256sum | cut -c1-16)"
if [[ "$(cat "$OUT/.sources" 2>/dev/null)" == "$want" && -f "$OUT/oci/index.json" ]]; then
  say "ocp-gpu image: cached ($OUT/oci)"
else
  say "building ocp-gpu's image into $OUT (hack/build-image.sh)"
  bash hack/build-image.sh "$OUT"
  echo "$want" >"$OUT/.sources"
fi
say "done in $(( $(date +%s) - start ))s"

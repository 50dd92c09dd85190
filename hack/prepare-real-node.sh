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
# ocp-gpu's image of this checkout, into the cache the real node imports from; kept while the
# stamp of its sources is unchanged (tests/packaging/test_image.py then reuses it).
bash hack/build-image.sh --if-changed
say "done in $(( $(date +%s) - start ))s"

#!/usr/bin/env bash
# Build ocp-gpu's image without a container engine, and smoke-run it.
#
# No container engine or registry is reachable here, but Debian's packages and PyPI are: this
# builds an OCI image layout from a Debian root filesystem (mmdebstrap, Debian's python3), the
# ocp-gpu wheel and its dependencies (pip wheel) installed into /opt/ocp-gpu, and a non-root user
# (1001); umoci packs it (entrypoint `ocp-gpu`, cmd `run`, user `1001:0`).  Then it unpacks the
# image and runs its entrypoints in a chroot as that user, as the validator's pods would:
# `ocp-gpu --version` and `ocp-gpu validate driver` against a fake driver root (a stand-in
# nvidia-smi: no GPU here), checking the driver-ready marker it writes.
# NB: the UBI Dockerfile stays the release build (its base is Red Hat's, certified); this proves
# the wheel runs as an image on a plain Linux base.  Needs root (mmdebstrap --mode=root, chroot).
#
#   bash hack/build-image.sh [--if-changed] [OUT]
#
# OUT/oci is the image layout.  The default OUT is the cache the real node imports from
# (ocp_gpu_harness/real_node.py image_layout: $OCP_GPU_IMAGE_LAYOUT's parent, else
# <cache>/image), so the image is built once for hack/prepare-real-node.sh and
# tests/packaging/test_image.py.  OUT/.sources stamps the sources the image was built from (the
# wheel's: pyproject.toml, setup.py, ocp_gpu/, templates/, and this script); with --if-changed an
# image of the same stamp is kept (only the smoke runs again).  One build at a time per OUT
# (flock on OUT.lock; the real node reads the layout under a shared lock).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
IF_CHANGED=0
if [[ "${1:-}" == "--if-changed" ]]; then IF_CHANGED=1; shift; fi
CACHE_ROOT="${OCP_GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ocp-gpu}"
DEFAULT_OUT="${OCP_GPU_IMAGE_LAYOUT:+$(dirname "$OCP_GPU_IMAGE_LAYOUT")}"
OUT=${1:-${DEFAULT_OUT:-$CACHE_ROOT/image}}
SUITE=${OCP_GPU_IMAGE_SUITE:-bookworm}
VERSION=$("$ROOT/.venv/bin/python" -c 'import ocp_gpu; print(ocp_gpu.__version__)')
UID_NONROOT=1001

say() { echo "[build-image] $*"; }
fail() { echo "[build-image] FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (mmdebstrap --mode=root and chroot)"
for tool in mmdebstrap umoci; do
    if ! command -v "$tool" >/dev/null; then
        say "installing $tool (Debian package)"
        apt-get install -y -q "$tool" >/dev/null || fail "apt-get install $tool (run apt-get update first?)"
    fi
done

mkdir -p "$(dirname "$OUT")"
exec 9>"$OUT.lock"
flock 9
start=$(date +%s)
# The wheel holds ocp_gpu/ and templates/ (setup.py ships the latter); this script makes the rest.
STAMP=$(cd "$ROOT" && cat pyproject.toml setup.py hack/build-image.sh \
    $(find ocp_gpu templates -type f ! -name '*.pyc' | sort) | sha256sum | cut -c1-16)

smoke() {
    say "smoke: unpack v$VERSION and run its entrypoints in a chroot as its user"
    rm -rf "$OUT/check"
    umoci unpack --image "$OUT/oci:v$VERSION" "$OUT/check" >/dev/null
    python3 - "$OUT/check/config.json" "$UID_NONROOT" <<'EOF' || fail "the image's config"
import json, sys
process = json.load(open(sys.argv[1]))["process"]
assert process["args"] == ["/opt/ocp-gpu/bin/ocp-gpu", "run"], process["args"]
assert process["user"]["uid"] == int(sys.argv[2]), process["user"]
EOF
    rootfs="$OUT/check/rootfs"
    CHROOT=$(command -v chroot)
    # NB: a clean environment, the image's PATH inside (env -i would hide chroot itself in /usr/sbin).
    run() { env -i PATH=/opt/ocp-gpu/bin:/usr/bin:/bin "$CHROOT" --userspec="$UID_NONROOT:0" "$rootfs" "$@"; }
    got=$(run ocp-gpu --version) || fail "ocp-gpu --version"
    [ "$got" = "ocp-gpu $VERSION" ] || fail "ocp-gpu --version said: $got"
    say "  $got"
    # A fake driver root: the validation runs nvidia-smi from it (a stand-in: there is no GPU here).
    mkdir -p "$rootfs/smoke/driver/usr/bin" "$rootfs/smoke/host" "$rootfs/smoke/validations"
    printf '#!/bin/sh\necho "NVIDIA-SMI 595.91.07  Driver Version: 595.91.07"\n' > "$rootfs/smoke/driver/usr/bin/nvidia-smi"
    chmod 755 "$rootfs/smoke/driver/usr/bin/nvidia-smi"
    chown -R "$UID_NONROOT:0" "$rootfs/smoke/validations"
    run ocp-gpu validate driver --host-root /smoke/host --driver-root /smoke/driver \
        --validations-dir /smoke/validations --termination-log /smoke/validations/termination-log \
        || fail "ocp-gpu validate driver"
    grep -qx "NVIDIA_DRIVER_ROOT=/smoke/driver" "$rootfs/smoke/validations/driver-ready" \
        || fail "no driver-ready marker naming the driver root"
    rm -rf "$OUT/check"
}

if [[ "$IF_CHANGED" == 1 && "$(cat "$OUT/.sources" 2>/dev/null)" == "$STAMP" && -f "$OUT/oci/index.json" ]]; then
    say "cached: $OUT/oci (v$VERSION, sources $STAMP)"
    smoke
    say "done in $(( $(date +%s) - start )) s (cached)"
    exit 0
fi

rm -rf "$OUT"
mkdir -p "$OUT"

say "wheel and its dependencies (pip wheel)"
"$ROOT/.venv/bin/pip" wheel -q -w "$OUT/wheels" "$ROOT" || fail "pip wheel"

# NB: the Debian base does not depend on our sources: it is made once per suite and package list
# and kept as a tarball beside the image (most of a build's minutes on a loaded machine; delete
# it to take Debian's newest packages).
BASE_PACKAGES=python3,python3-venv,ca-certificates
BASE_TAR="$CACHE_ROOT/image-base/$SUITE-$(echo "$BASE_PACKAGES" | sha256sum | cut -c1-12).tar"
if [[ -s "$BASE_TAR" ]]; then
    say "Debian $SUITE root filesystem with python3: cached ($BASE_TAR)"
else
    say "Debian $SUITE root filesystem with python3 (mmdebstrap, kept in $BASE_TAR)"
    mkdir -p "$(dirname "$BASE_TAR")"
    mmdebstrap --quiet --mode=root --variant=essential --include="$BASE_PACKAGES" \
        --format=tar "$SUITE" "$BASE_TAR.part" || fail "mmdebstrap"
    mv "$BASE_TAR.part" "$BASE_TAR"
fi
mkdir -p "$OUT/rootfs"
tar -xf "$BASE_TAR" -C "$OUT/rootfs" --numeric-owner || fail "unpacking $BASE_TAR"

say "ocp-gpu into /opt/ocp-gpu (a venv of Debian's python3), user $UID_NONROOT"
cp -r "$OUT/wheels" "$OUT/rootfs/tmp/wheels"
# NB: a clean environment: the host's PIP_* settings (e.g. PIP_FIND_LINKS) mean nothing inside.
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$OUT/rootfs" /bin/sh -c \
    'python3 -m venv /opt/ocp-gpu && /opt/ocp-gpu/bin/pip install -q --no-index --find-links /tmp/wheels ocp-gpu' \
    || fail "pip install in the root filesystem"
rm -rf "$OUT/rootfs/tmp/wheels"
echo "ocp-gpu:x:$UID_NONROOT:0:ocp-gpu:/opt/ocp-gpu:/usr/sbin/nologin" >> "$OUT/rootfs/etc/passwd"

say "OCI image layout (umoci)"
umoci init --layout "$OUT/oci"
umoci new --image "$OUT/oci:base"
umoci unpack --image "$OUT/oci:base" "$OUT/bundle" >/dev/null
cp -a "$OUT/rootfs/." "$OUT/bundle/rootfs/"
umoci repack --image "$OUT/oci:base" "$OUT/bundle"
umoci config --image "$OUT/oci:base" --tag "v$VERSION" \
    --config.user "$UID_NONROOT:0" \
    --config.entrypoint /opt/ocp-gpu/bin/ocp-gpu --config.cmd run \
    --config.env PATH=/opt/ocp-gpu/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env PYTHONUNBUFFERED=1 --config.workingdir / \
    --config.label "org.opencontainers.image.title=ocp-gpu" \
    --config.label "org.opencontainers.image.version=$VERSION"
umoci rm --image "$OUT/oci:base"
rm -rf "$OUT/bundle" "$OUT/rootfs"

smoke
echo "$STAMP" > "$OUT/.sources"
say "done in $(( $(date +%s) - start )) s: $OUT/oci (v$VERSION, $(du -sh "$OUT/oci" | cut -f1), sources $STAMP)"

# The operator image: `ocp-gpu run` (the Deployment's command) and `ocp-gpu validate` (the
# validator DaemonSet's program), with the templates (top-level templates/) inside the Python package.
#   podman build -t quay.io/ocp-gpu/ocp-gpu:v0.1.0 .
# NB: not built in this project's CI (no container engine or registry there); the wheel
# it installs is built and run by tests/packaging/test_wheel.py, and hadolint lints this
# file (hack/lint.sh).

ARG UBI_PYTHON=registry.access.redhat.com/ubi9/python-311:latest
ARG UBI_MINIMAL=registry.access.redhat.com/ubi9/ubi-minimal:latest

# --- build: the wheel and a virtualenv holding it and its dependencies ---
FROM ${UBI_PYTHON} AS build
WORKDIR /opt/app-root/src
COPY --chown=1001:0 pyproject.toml setup.py README.md LICENSE ./
COPY --chown=1001:0 ocp_gpu ./ocp_gpu
COPY --chown=1001:0 templates ./templates
# NB: the venv lives at the path it keeps in the runtime stage (its scripts name their
# interpreter by absolute path) and uses the RPM's /usr/bin/python3.11, which the runtime
# stage installs too.
RUN /usr/bin/python3.11 -m venv /opt/app-root/ocp-gpu \
 && /opt/app-root/ocp-gpu/bin/pip install --no-cache-dir --upgrade pip==24.3.1 \
 && /opt/app-root/ocp-gpu/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /tmp/wheels . \
 && /opt/app-root/ocp-gpu/bin/pip install --no-cache-dir /tmp/wheels/ocp_gpu-*.whl

# --- runtime: UBI minimal with Python, the venv, licenses; non-root ---
FROM ${UBI_MINIMAL}
ARG VERSION=0.1.0
# Red Hat / OpenShift certification labels.
LABEL name="ocp-gpu" \
      vendor="ocp-gpu" \
      maintainer="ocp-gpu maintainers <ocp-gpu@example.com>" \
      version="${VERSION}" \
      release="1" \
      summary="OpenShift-first NVIDIA GPU operator" \
      description="Provisions NVIDIA GPU nodes from a ClusterPolicy: one Driver Toolkit driver DaemonSet per RHCOS version, node-by-node driver upgrades, the container toolkit; also the operand validator (ocp-gpu validate)." \
      io.k8s.display-name="ocp-gpu" \
      io.k8s.description="OpenShift-first NVIDIA GPU operator" \
      io.openshift.tags="gpu,nvidia,operator,driver-toolkit" \
      url="https://github.com/ocp-gpu/ocp-gpu"
# python3.11 follows the base image's errata stream; a pinned RPM release would stop
# rebuilds from picking up security fixes.
# hadolint ignore=DL3041
RUN microdnf install -y --nodocs --setopt=install_weak_deps=0 python3.11 \
 && microdnf clean all
COPY --from=build /opt/app-root/ocp-gpu /opt/app-root/ocp-gpu
COPY LICENSE /licenses/LICENSE
ENV PATH=/opt/app-root/ocp-gpu/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Any UID works on OpenShift (restricted SCC); 1001 elsewhere.
USER 1001
ENTRYPOINT ["ocp-gpu"]
CMD ["run"]
